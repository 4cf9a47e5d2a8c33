"""index-check finds planted index and log mismatches both ways, from an index export in
Parquet or in JSON lines (``bookie shell export-index``'s two forms)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from bookie.pipeline import index_check, jobs
from entrylog.format import parse_log_id
from ledgerindex.locations import EntryLocationIndex
from tests.pipeline.datagen import (BOOKIE_DUMMY_LEDGER, BOOKIE_ENTRIES_PER_LEDGER,
                                     BOOKIE_LEDGERS)

LEDGERS = (*BOOKIE_LEDGERS, BOOKIE_DUMMY_LEDGER)
ENTRIES_PER_LEDGER = BOOKIE_ENTRIES_PER_LEDGER
UNINDEXED = 14  # left out of the export: like a deleted ledger whose logs await GC


def _export_index(data_dir: str) -> list[dict]:
    """What ``bookie shell export-index`` writes: one object per stored location."""
    path = os.path.join(data_dir, "ledgers", "current", "locations")
    index = EntryLocationIndex.open(path, create=False, read_only=True)
    try:
        return [{"ledgerId": ledger_id, "entryId": entry_id, "logId": location >> 32,
                 "pos": location & 0xFFFFFFFF}
                for ledger_id in LEDGERS for entry_id, location in index.entries(ledger_id)]
    finally:
        index.kv.close()


def _write_exports(rows: list[dict], directory) -> tuple[str, str]:
    jsonl = os.path.join(directory, "index.jsonl")
    with open(jsonl, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    parquet_dir = os.path.join(directory, "index-parquet")
    os.makedirs(parquet_dir)
    table = pa.table({name: pa.array([row[name] for row in rows], pa.int64())
                      for name in jobs.INDEX_COLUMNS})
    pq.write_table(table, os.path.join(parquet_dir, "part-0.parquet"))
    return jsonl, parquet_dir


def _rewrite_entry_id(data_dir: str, row: dict, new_entry_id: int) -> None:
    """Damage a log: the entry at the index's location now claims another entry id."""
    name = f"{row['logId']:x}.log"
    with open(os.path.join(data_dir, "ledgers", "current", name), "r+b") as handle:
        handle.seek(row["pos"] + 8)
        handle.write(new_entry_id.to_bytes(8, "big"))


def _plant(data_dir: str, exported: list[dict]) -> tuple[list[dict], dict]:
    """The export with planted index damage, one log with planted damage, and the rows
    index-check must find: (export rows, {(kind, ledgerId, entryId): expected row})."""
    log_ids = {parse_log_id(name) for name in
               os.listdir(os.path.join(data_dir, "ledgers", "current"))} - {None}
    assert len(log_ids) > 2 and {row["logId"] for row in exported} == log_ids
    by_key = {(row["ledgerId"], row["entryId"]): row for row in exported}
    dropped = by_key[(11, 4)]                                       # index lost a key
    moved = dict(by_key[(12, 7)], pos=by_key[(12, 7)]["pos"] + 1)  # index points off
    orphan = dict(by_key[(13, 2)], logId=max(log_ids) + 5)         # index names no log
    damaged = by_key[(13, 20)]                                      # log: 13/20 -> 13/999
    _rewrite_entry_id(data_dir, damaged, 999)
    replaced = (dropped, by_key[(12, 7)], by_key[(13, 2)])
    planted = [row for row in exported if row not in replaced and row["ledgerId"] != UNINDEXED]
    expected = {
        ("missing-from-index", 11, 4): (dropped["logId"], dropped["pos"], 1),
        ("missing-from-logs", 12, 7): (moved["logId"], moved["pos"], 1),
        ("log-missing", 13, 2): (orphan["logId"], orphan["pos"], 1),
        ("missing-from-logs", 13, 20): (damaged["logId"], damaged["pos"], 0),
        ("missing-from-index", 13, 999): (damaged["logId"], damaged["pos"], 1),
        ("ledger-not-in-index", UNINDEXED, None): (None, None, ENTRIES_PER_LEDGER),
    }
    return planted + [moved, orphan], expected


def test_index_check_finds_planted_mismatches_both_ways(spark, bookie_dir, tmp_path):
    exported = _export_index(bookie_dir)
    assert len(exported) == len(LEDGERS) * ENTRIES_PER_LEDGER
    planted, expected = _plant(bookie_dir, exported)
    jsonl, parquet_dir = _write_exports(planted, tmp_path)
    # Both forms of the export read back as the same rows; the check runs once.
    assert sorted(map(tuple, index_check.read_index(spark, jsonl).collect())) == sorted(
        map(tuple, index_check.read_index(spark, parquet_dir).collect()))
    result = index_check.run_index_check(spark, [bookie_dir], parquet_dir)
    found = {(row["kind"], row["ledgerId"], row["entryId"]):
             (row["logId"] if row["kind"] != "ledger-not-in-index" else None, row["pos"],
              row["copies"]) for row in result.rows}
    assert found == expected
    assert result.problems == len(expected) - 1  # an unindexed ledger is not a problem
    assert result.summary["ledger-not-in-index"] == 1
    assert result.summary["entries"] == len(exported)  # every entry of every log, counted
