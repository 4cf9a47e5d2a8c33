"""Export round-trips every entry's bytes to Parquet, partitioned by ledger; the journal
source yields the adds' bytes as written."""

from __future__ import annotations

import os

import pyarrow.dataset as ds

from bookie.pipeline import jobs
from journal.format import RecordKind


def test_export_round_trips_payload_bytes(spark, damaged_dir, tmp_path):
    result = jobs.run_export(spark, [damaged_dir.root], str(tmp_path / "out"))
    target = result.outputs["parquet"]
    # Read back without Spark: the files must stand on their own.
    table = ds.dataset(target, format="parquet", partitioning="hive").to_table()
    exported = {(row["ledgerId"], row["entryId"]): row for row in table.to_pylist()}
    expected = {key: (log, offset, entry) for log in damaged_dir.logs
                for key, (offset, entry) in log.entries.items()}
    assert exported.keys() == expected.keys()
    damaged = {(ledger, entry) for _, _, ledger, entry in damaged_dir.damaged}
    for key, (log, offset, entry) in expected.items():
        row = exported[key]
        assert (row["logId"], row["pos"], row["path"]) == (log.log_id, offset + 4, log.path)
        if key not in damaged:  # damaged ones hold the flipped byte, exported as stored
            assert row["entry"] == entry
    ledgers = {key[0] for key in expected}
    listed = sorted(name for name in os.listdir(target) if not name.startswith((".", "_")))
    assert listed == sorted(f"ledgerId={ledger}" for ledger in ledgers)
    assert result.summary["entries"] == len(expected)


def test_journal_source_yields_the_adds_as_written(spark, damaged_dir):
    rows = (spark.read.format("bkjournal").option("payload", "true")
            .load(damaged_dir.root).collect())
    adds = {(row["ledgerId"], row["entryId"]): (row["offset"], row["payload"])
            for row in rows if row["kind"] == RecordKind.DATA.value}
    assert adds == damaged_dir.journal_adds
    kinds = sorted({row["kind"] for row in rows})
    assert kinds == sorted({RecordKind.DATA.value, RecordKind.LEDGER_KEY.value,
                            RecordKind.FENCE.value})
