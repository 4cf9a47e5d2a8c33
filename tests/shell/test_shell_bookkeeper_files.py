"""Every tool reads files written the way Apache BookKeeper writes them (docs/formats.md §10).

The journals come from tests/data/golden/make_golden_journal.py and the entry logs from
``bk_entry_log`` in shell_support: both write bytes with ``struct`` from docs/formats.md's tables,
not with the project's writers, so the shell is checked against the contract.
"""

from __future__ import annotations

import os
import struct

import pytest

from tests.data.golden import make_golden_entrylog, make_golden_journal as golden
from tests.shell.shell_support import bk_crc32c_entry, bk_entry_log, run

GOLDEN_DIR = os.path.dirname(golden.__file__)


@pytest.mark.parametrize("name", sorted(golden.FILES))
def test_golden_journal_files_are_what_the_generator_writes(name):
    with open(os.path.join(GOLDEN_DIR, name), "rb") as handle:
        assert handle.read() == golden.build(name)


@pytest.mark.parametrize("name", sorted(golden.FILES))
def test_readjournal_finds_every_record_of_a_bookkeeper_journal(capsys, name):
    result = run(capsys, "readjournal", os.path.join(GOLDEN_DIR, name), "--json", "--padding")
    assert result.code == 0, result.out
    facts = golden.GOLDEN_FACTS[name]
    kinds = [r["kind"] for r in result.of_type("record")]
    for kind in ("data", "ledger_key", "fence", "explicit_lac", "padding"):
        assert kinds.count(kind) == facts[kind], kind
    [end] = result.of_type("end")
    assert (end["status"], end["offset"]) == ("clean", facts["end"])
    [summary] = result.of_type("summary")
    assert summary["version"] == int(name[len("journal-v")])
    assert summary["paddingRecords"] == facts["padding"]


def test_the_worked_example_of_formats_3_10_reads_as_documented(capsys):
    result = run(capsys, "readjournal", os.path.join(GOLDEN_DIR, "journal-v6.txn"), "--json",
                 "--padding", "--payload")
    first = result.of_type("record")[:3]
    assert [(r["offset"], r["kind"], r["length"]) for r in first] == [
        (512, "ledger_key", 40), (556, "data", 41), (601, "padding", 415)]
    assert first[0]["payload"] == "e793cbc379107648537183605cd361d3bb789a39"
    assert first[1]["payload"] == ("0000000000000001" "0000000000000000" "ffffffffffffffff"
                                   "0000000000000005" "e3a5f74d" "68656c6c6f")


def test_padding_lengths_0_and_511_and_gaps_below_8_read_as_formats_3_5(capsys):
    result = run(capsys, "readjournal", os.path.join(GOLDEN_DIR, "journal-v6.txn"), "--json",
                 "--padding")
    pads = [(r["offset"], r["length"], r["offset"] + r["size"])
            for r in result.of_type("record") if r["kind"] == "padding"]
    assert (1528, 0, 1536) in pads       # gap 8: padLen 0
    assert (2041, 511, 2560) in pads     # gap 7: the prefix does not fit, next boundary
    assert (4095, 505, 4608) in pads     # gap 1
    assert all(end % 512 == 0 for _, _, end in pads)


def test_padding_records_of_every_size_are_counted(capsys, tmp_path):
    """One group per gap 1..511, so every padLen a 512-byte alignment can produce occurs."""
    groups = [[golden.sized_record(1, 0, 512 + 512 - gap if 512 - gap < 40 else 512 - gap)]
              for gap in range(1, 512)]
    path = tmp_path / "every-padding.txn"
    path.write_bytes(golden.journal(6, groups))
    result = run(capsys, "readjournal", path, "--json", "--padding")
    assert result.code == 0, result.out[-500:]
    pads = sorted(r["length"] for r in result.of_type("record") if r["kind"] == "padding")
    expected = sorted(gap - 8 if gap >= 8 else 512 - (8 - gap) for gap in range(1, 512))
    assert pads == expected
    [summary] = result.of_type("summary")
    assert summary["paddingRecords"] == 511 and summary["records"] == 511


def test_a_padding_mask_in_a_v4_journal_is_corruption_named_with_its_offset(capsys, tmp_path):
    body = golden.journal(4, golden.v4_groups())
    end = golden.GOLDEN_FACTS["journal-v4.txn"]["end"]
    # Valid records after it make it corruption, not a torn tail (V4 wants two: §3.7).
    damaged = (body[:end] + struct.pack(">ii", -0x100, 0) + golden.fence_record(9)
               + golden.key_record(9, golden.KEY_SECRET) + body[end:])
    path = tmp_path / "v4-with-padding.txn"
    path.write_bytes(damaged)
    result = run(capsys, "readjournal", path)
    assert result.code == 1
    assert f"corrupt at offset {end}" in result.out


def test_an_explicit_lac_record_in_a_v5_journal_is_corruption(capsys, tmp_path):
    groups = golden.v5_groups()[:1] + [[golden.lac_record(1, 0)]] + golden.v5_groups()[1:2]
    path = tmp_path / "v5-with-lac.txn"
    path.write_bytes(golden.journal(5, groups))
    result = run(capsys, "readjournal", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["offset"] == 1024 and "explicit_lac record in a V5 journal" in \
        problem["reason"]


def test_an_entry_log_with_one_ledgers_map_batch_like_bookkeepers_sample(capsys, tmp_path):
    """docs/formats.md §10's facts of Apache BookKeeper's bk-entry-log: 310 CRC32C entries of
    ledger 0 of size 1111 give a map at 346,674 mapping ledger 0 to 345,650, in a file of
    346,714 bytes."""
    path = tmp_path / "0.log"
    bk_entry_log(str(path), [(0, bk_crc32c_entry(0, i, 1111)) for i in range(310)])
    assert os.path.getsize(path) == 346_714
    result = run(capsys, "readlogmetadata", path, "--json", "--scan")
    assert result.code == 0, result.out
    [header] = result.of_type("header")
    assert (header["version"], header["ledgersMapOffset"], header["ledgersCount"]) == \
        (1, 346_674, 1)
    assert result.of_type("ledger") == [{"type": "ledger", "ledgerId": 0,
                                         "totalBytes": 345_650}]
    [summary] = result.of_type("summary")
    assert summary["source"] == "ledgersMap" and summary["batches"] == 1
    entries = run(capsys, "readlog", path, "--json").of_type("entry")
    assert len(entries) == 310 and entries[0]["offset"] == 1024 and entries[0]["size"] == 1111


def test_an_entry_log_with_two_ledgers_map_batches(capsys, tmp_path):
    """10,001 ledgers make two batches, 10,000 and 1 (docs/formats.md §5.4)."""
    path = tmp_path / "7.log"
    totals = bk_entry_log(str(path), [(i, bk_crc32c_entry(i, 0, 40)) for i in range(10_001)])
    result = run(capsys, "readlogmetadata", path, "--json")
    assert result.code == 0
    [summary] = result.of_type("summary")
    assert (summary["batches"], summary["ledgers"], summary["headerCount"]) == (2, 10_001, 10_001)
    assert {r["ledgerId"]: r["totalBytes"] for r in result.of_type("ledger")} == totals


def test_an_entry_log_without_a_trailer_is_scanned_and_reported(capsys, tmp_path):
    path = tmp_path / "3.log"
    records = [(1, bk_crc32c_entry(1, i, 100)) for i in range(5)]
    bk_entry_log(str(path), records, finalize=False)
    result = run(capsys, "readlogmetadata", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["offset"] == 1024 + 5 * 104 and "no usable ledgersMap" in problem["reason"]
    assert result.of_type("ledger") == [{"type": "ledger", "ledgerId": 1,
                                         "totalBytes": 520}]
    assert run(capsys, "readlog", path).code == 0


def test_a_wrong_ledgers_count_falls_back_to_a_scan(capsys, tmp_path):
    path = tmp_path / "4.log"
    bk_entry_log(str(path), [(1, bk_crc32c_entry(1, 0, 100)), (2, bk_crc32c_entry(2, 0, 100))])
    with open(path, "r+b") as handle:
        handle.seek(16)
        handle.write(struct.pack(">i", 3))
    result = run(capsys, "readlogmetadata", path, "--json")
    assert result.code == 1
    assert "holds 2 ledgers, the header says 3" in result.of_type("problem")[0]["reason"]
    assert len(result.of_type("ledger")) == 2


@pytest.mark.parametrize("content", [b"", b"BKLO" + struct.pack(">iqi", 1, 0, 0) + bytes(1004),
                                     b"BKLO" + struct.pack(">iqi", 1, 1024, 0) + bytes(1004)],
                         ids=["0-bytes", "header-only", "empty-finalized"])
def test_empty_logs_bookkeeper_leaves_read_as_empty(capsys, tmp_path, content):
    """BookKeeper allocates the next log in advance (0 bytes or a header) and finalizes an
    empty log with offset 1024, count 0 (§5.5, §5.7): no entries, nothing wrong."""
    path = tmp_path / "5.log"
    path.write_bytes(content)
    assert run(capsys, "readlogmetadata", path).code == 0
    result = run(capsys, "readlog", path, "--json")
    assert result.code == 0 and result.of_type("entry") == []


def test_the_project_golden_logs_read_with_both_paths(capsys):
    finalized = os.path.join(GOLDEN_DIR, make_golden_entrylog.FINALIZED[0])
    unfinalized = os.path.join(GOLDEN_DIR, make_golden_entrylog.UNFINALIZED[0])
    first = run(capsys, "readlogmetadata", finalized, "--json", "--scan")
    assert first.code == 0 and first.of_type("summary")[0]["ledgers"] == 4
    second = run(capsys, "readlogmetadata", unfinalized, "--json")
    assert second.code == 1 and second.of_type("summary")[0]["source"] == "scan"
    assert {r["ledgerId"]: r["totalBytes"] for r in first.of_type("ledger")} == \
        {r["ledgerId"]: r["totalBytes"] for r in second.of_type("ledger")}
    entries = run(capsys, "readlog", unfinalized, "--json", "--ledger", "7").of_type("entry")
    assert [e["entryId"] for e in entries] == [0, 1, 2]
