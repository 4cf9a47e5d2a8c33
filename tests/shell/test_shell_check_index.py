"""``check-index``: index -> entry logs and entry logs -> index on a real bookie's data dir."""

from __future__ import annotations

import os

from entrylog.format import make_location
from ledgerindex import keys
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex
from tests.shell.shell_support import run


def _index(data_dir: str, name: str = "locations") -> str:
    return os.path.join(data_dir, "ledgers", "current", name)


def test_a_healthy_data_dir_is_consistent_both_ways(capsys, bookie_data_dir):
    result = run(capsys, "check-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0, result.out
    [summary] = result.of_type("summary")
    assert summary["indexEntries"] == 91 and summary["indexProblems"] == 0
    assert summary["indexed"] == 91 and summary["missingFromIndex"] == 0
    # Session two's log holds the first copies of 15 entries that replay added again.
    assert summary["superseded"] == 15
    assert summary["logEntries"] == 91 + 15 + summary["garbage"]


def test_an_entry_missing_from_the_index_is_named_with_file_and_offset(capsys,
                                                                       bookie_data_dir):
    index = EntryLocationIndex.open(_index(bookie_data_dir))
    location = index.get(2, 4)
    index.kv.delete(keys.encode_location_key(2, 4), sync=True)
    index.close()
    result = run(capsys, "check-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["direction"] == "log->index"
    assert problem["file"].endswith(f"/{location >> 32:x}.log")
    assert problem["offset"] == (location & 0xFFFFFFFF) - 4
    assert (problem["ledgerId"], problem["entryId"]) == (2, 4)


def test_an_index_entry_pointing_nowhere_is_named(capsys, bookie_data_dir):
    index = EntryLocationIndex.open(_index(bookie_data_dir))
    index.add_batch([(4, 50, make_location(0, 3000)), (4, 51, make_location(0x99, 1028))])
    index.close()
    result = run(capsys, "check-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    problems = {p["entryId"]: p for p in result.of_type("problem")}
    assert set(problems) == {50, 51}
    assert problems[50]["direction"] == "index->log" and problems[50]["offset"] == 2996
    assert "entry log missing" in problems[51]["reason"]


def test_locations_of_a_ledger_the_ledgers_index_lacks_or_deleted(capsys, bookie_data_dir):
    ledgers = LedgerMetadataIndex.open(_index(bookie_data_dir, "ledgers"))
    ledgers.kv.delete(keys.encode_ledger_key(4), sync=True)
    ledgers.mark_deleted(3)
    ledgers.close()
    result = run(capsys, "check-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    reasons = sorted(p["reason"] for p in result.of_type("problem"))
    assert reasons == ["8 index entries of ledger 3, which is deleted",
                       "8 index entries of ledger 4, which the ledgers index does not know"]


def test_a_torn_log_and_a_missing_ledgers_map_are_reported(capsys, bookie_data_dir):
    folder = os.path.join(bookie_data_dir, "ledgers", "current")
    names = sorted((n for n in os.listdir(folder) if n.endswith(".log")),
                   key=lambda n: int(n[:-4], 16))
    last = os.path.join(folder, names[-1])
    with open(last, "ab") as handle:
        handle.write(b"\x00\x00\x01\x00" + b"x" * 10)  # a record cut by the end of the file
    size = os.path.getsize(last)
    result = run(capsys, "check-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["file"], problem["offset"], problem["status"]) == (last, size - 14, "torn")
