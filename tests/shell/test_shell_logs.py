"""``readlog`` and ``readlogmetadata`` on a real bookie's entry logs, whole and damaged."""

from __future__ import annotations

import os
import struct

from entrylog.format import decode_header
from tests.shell.shell_support import entry, run


def _logs(data_dir: str) -> dict[int, str]:
    folder = os.path.join(data_dir, "ledgers", "current")
    return {int(n[:-4], 16): os.path.join(folder, n) for n in os.listdir(folder)
            if n.endswith(".log")}


def _finalized(path: str) -> bool:
    with open(path, "rb") as handle:
        return decode_header(handle.read(1024)).has_ledgers_map


def test_readlog_prints_every_entry_with_offset_and_ids(capsys, bookie_data_dir):
    path = _logs(bookie_data_dir)[0]
    result = run(capsys, "readlog", "0", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0
    [header] = result.of_type("header")
    assert header["logId"] == 0 and header["ledgersMapOffset"] > 1024
    entries = result.of_type("entry")
    assert entries[0]["offset"] == 1024 and entries[0]["pos"] == 1028
    for item in entries:
        assert item["location"] == item["pos"]  # log 0: location = pos
        with open(path, "rb") as handle:
            handle.seek(item["pos"])
            data = handle.read(item["size"])
        assert data == entry(item["ledgerId"], item["entryId"])
        assert item["lac"] == item["entryId"] - 1
    assert result.of_type("end")[0]["status"] == "clean"


def test_readlog_filters_by_ledger_and_entry_and_shows_payloads(capsys, bookie_data_dir):
    args = ("--data-dir", bookie_data_dir, "--json")
    every = [e for log_id in sorted(_logs(bookie_data_dir))
             for e in run(capsys, "readlog", f"{log_id:x}", *args).of_type("entry")]
    ledger_two = [e for e in every if e["ledgerId"] == 2]
    assert [e["entryId"] for e in ledger_two] == list(range(15))
    log_id = ledger_two[3]["location"] >> 32
    one = run(capsys, "readlog", f"{log_id:x}", *args, "--ledger", "2", "--entry", "3",
              "--payload").of_type("entry")
    assert len(one) == 1 and bytes.fromhex(one[0]["payload"]) == entry(2, 3)
    text = run(capsys, "readlog", f"{log_id:x}", "--data-dir", bookie_data_dir, "--summary")
    assert text.out.splitlines()[-1].startswith("entries: ")


def test_readlog_names_a_corrupt_size_with_its_offset(capsys, bookie_data_dir):
    path = _logs(bookie_data_dir)[0]
    entries = run(capsys, "readlog", path, "--json").of_type("entry")
    victim = entries[4]
    with open(path, "r+b") as handle:
        handle.seek(victim["offset"])
        handle.write(struct.pack(">i", 9))
    result = run(capsys, "readlog", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["status"], problem["offset"]) == ("corrupt", victim["offset"])
    assert "entry size 9 < 16" in problem["reason"]
    assert len(result.of_type("entry")) == 4


def test_readlog_names_a_torn_tail_with_its_offset(capsys, bookie_data_dir):
    unfinalized = [p for p in _logs(bookie_data_dir).values() if not _finalized(p)]
    path = unfinalized[0]
    entries = run(capsys, "readlog", path, "--json").of_type("entry")
    with open(path, "r+b") as handle:
        handle.truncate(entries[-1]["offset"] + 100)
    result = run(capsys, "readlog", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["status"], problem["offset"]) == ("torn", entries[-1]["offset"])


def test_readlogmetadata_of_finalized_logs_agrees_with_a_scan(capsys, bookie_data_dir):
    for path in _logs(bookie_data_dir).values():
        if not _finalized(path):
            continue
        result = run(capsys, "readlogmetadata", path, "--scan", "--json")
        assert result.code == 0, result.out
        [summary] = result.of_type("summary")
        assert summary["source"] == "ledgersMap" and summary["agree"]
        assert summary["ledgers"] == summary["headerCount"] == len(result.of_type("ledger"))


def test_readlogmetadata_names_the_missing_trailer_of_the_crashed_log(capsys,
                                                                       bookie_data_dir):
    """Session two of the data dir was killed inside a checkpoint: its log never got a
    ledgersMap (docs/formats.md §5.5 step 5)."""
    [path] = [p for p in _logs(bookie_data_dir).values() if not _finalized(p)]
    entries = run(capsys, "readlog", path, "--json").of_type("entry")
    end = entries[-1]["offset"] + 4 + entries[-1]["size"]
    result = run(capsys, "readlogmetadata", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["offset"] == end and "offset 0, count 0" in problem["reason"]
    totals = {r["ledgerId"]: r["totalBytes"] for r in result.of_type("ledger")}
    assert set(totals) == {1, 6}
    assert totals[6] == sum(e["size"] + 4 for e in entries if e["ledgerId"] == 6)
    text = run(capsys, "readlogmetadata", path)
    assert "PROBLEM no usable ledgersMap" in text.out and f"offset {end}" in text.out


def test_readlogmetadata_scan_finds_a_map_that_disagrees(capsys, bookie_data_dir):
    path = next(p for p in _logs(bookie_data_dir).values() if _finalized(p))
    with open(path, "rb") as handle:
        map_offset = decode_header(handle.read(1024)).map_offset
    with open(path, "r+b") as handle:  # the first pair's totalBytes, 24 + 8 into the map
        handle.seek(map_offset + 32)
        handle.write(struct.pack(">q", 12345))
    result = run(capsys, "readlogmetadata", path, "--scan", "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert "says 12345 bytes" in problem["reason"] and problem["offset"] == map_offset


def test_a_foreign_file_is_a_corrupt_header(capsys, tmp_path):
    path = tmp_path / "9.log"
    path.write_bytes(b"NOPE" + bytes(2000))
    for command in ("readlog", "readlogmetadata"):
        result = run(capsys, command, path, "--json")
        assert result.code == 1
        assert "magic" in result.of_type("problem")[0]["reason"]
