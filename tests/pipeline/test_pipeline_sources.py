"""The data sources' contract: declared schemas are exactly the batches' Arrow schemas,
batches are cut by bytes, and every entry comes out once with its exact offset."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from bookie.disk import OsDisk
from bookie.pipeline import batches, fs, jobs
from bookie.pipeline.sources import spark_schema
from entrylog.reader import EntryLogReader

FLAGS = list(itertools.product([False, True], repeat=2))


@pytest.mark.parametrize("payload, verify", FLAGS)
def test_declared_schemas_convert_to_the_batches_arrow_schemas(payload, verify):
    # Spark compares the first batch's schema with the declared one, nullability included.
    for schema in (batches.entry_schema(payload, verify), batches.journal_schema(payload,
                                                                                  verify),
                   batches.ledgers_map_schema(), batches.export_schema(payload)):
        assert to_arrow_schema(spark_schema(schema), timezone="UTC").equals(schema)


@pytest.mark.parametrize("payload, verify", FLAGS)
def test_batches_are_cut_by_bytes_and_hold_every_entry_once(damaged_dir, payload, verify):
    log = damaged_dir.logs[1]
    batch_bytes = 4096
    with EntryLogReader(OsDisk(), log.path) as reader:
        found = list(batches.entry_batches(reader, log.path, payload=payload, verify=verify,
                                           batch_bytes=batch_bytes))
    schema = batches.entry_schema(payload, verify)
    assert len(found) > 2 and all(batch.schema.equals(schema) for batch in found)
    largest_row = max(len(entry) for _, entry in log.entries.values()) + 200
    assert all(batch.nbytes <= batch_bytes + largest_row for batch in found)
    rows = [row for batch in found for row in batch.to_pylist()]
    assert {(row["ledgerId"], row["entryId"]): row["offset"] for row in rows} == {
        key: offset for key, (offset, _) in log.entries.items()}
    if payload:
        damaged = {(ledger, entry) for _, _, ledger, entry in damaged_dir.damaged}
        assert all(row["entry"] == log.entries[(row["ledgerId"], row["entryId"])][1]
                   for row in rows if (row["ledgerId"], row["entryId"]) not in damaged)
    if verify:
        bad = {(row["ledgerId"], row["entryId"]) for row in rows if row["problem"]}
        assert bad == {(ledger, entry) for path, _, ledger, entry in damaged_dir.damaged
                       if path == log.path}


def test_unverified_ledgers_are_not_reported(damaged_dir):
    log = damaged_dir.logs[1]
    with EntryLogReader(OsDisk(), log.path) as reader:
        rows = [row for batch in batches.entry_batches(
            reader, log.path, verify=True, problems_only=True, unverified=frozenset({1}))
            for row in batch.to_pylist()]
    assert {(row["ledgerId"], row["entryId"]) for row in rows} == {(3, 70)}


def test_listing_finds_logs_and_journals_in_a_data_dir_by_path_or_uri(damaged_dir):
    logs = fs.list_files([damaged_dir.root], fs.LOG_KIND)
    assert sorted(ref.uri for ref in logs) == sorted(log.path for log in damaged_dir.logs)
    assert [ref.size for ref in logs] == sorted((ref.size for ref in logs), reverse=True)
    uris = fs.list_files(["file://" + damaged_dir.ledger_dir], fs.LOG_KIND)
    assert {ref.uri for ref in uris} == {"file://" + log.path for log in damaged_dir.logs}
    journals = fs.list_files([damaged_dir.root], fs.JOURNAL_KIND)
    assert [(ref.uri, ref.file_id) for ref in journals] == [(damaged_dir.journals[0], 1)]


def test_spark_reads_one_file_and_the_export_frame_has_the_export_columns(spark,
                                                                          damaged_dir):
    log = damaged_dir.logs[0]
    frame = spark.read.format("bkentrylog").option("payload", "true").load(log.path)
    assert frame.count() == len(log.entries)
    assert jobs.export_frame(frame).columns == batches.export_schema(True).names
