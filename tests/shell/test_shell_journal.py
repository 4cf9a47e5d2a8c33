"""``readjournal`` and ``lastmark`` on journals of a real bookie, whole and damaged."""

from __future__ import annotations

import os
import struct

from journal.format import LogMark
from tests.data.golden import make_golden_journal as golden
from tests.shell.shell_support import run


def _journals(data_dir: str) -> list[str]:
    folder = os.path.join(data_dir, "journal", "current")
    names = sorted((n for n in os.listdir(folder) if n.endswith(".txn")),
                   key=lambda n: int(n[:-4], 16))
    return [os.path.join(folder, n) for n in names]


def test_readjournal_by_hex_id_lists_every_record_of_a_bookies_journal(capsys,
                                                                      bookie_data_dir):
    first = _journals(bookie_data_dir)[0]
    journal_id = os.path.basename(first)[:-4]
    result = run(capsys, "readjournal", journal_id, "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0, result.out
    records = result.of_type("record")
    data = [(r["ledgerId"], r["entryId"]) for r in records if r["kind"] == "data"]
    assert (1, 0) in data and (4, 7) in data
    kinds = {r["kind"] for r in records}
    assert {"ledger_key", "explicit_lac", "fence"} <= kinds and "padding" not in kinds
    offsets = [r["offset"] for r in records]
    assert offsets == sorted(offsets) and offsets[0] == 512
    [end] = result.of_type("end")
    assert end["status"] == "clean"
    [summary] = result.of_type("summary")
    assert summary["paddingRecords"] > 0 and summary["records"] == len(records)


def test_readjournal_text_output_names_kinds_and_the_end(capsys, bookie_data_dir):
    result = run(capsys, "readjournal", _journals(bookie_data_dir)[0])
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith("journal ") and "version 6" in lines[0]
    assert any(" ledger_key " in line and "key e793cbc3" in line for line in lines)
    assert any(line.startswith("end: clean at offset ") for line in lines)
    assert lines[-1].startswith("records: ")


def test_readjournal_from_an_offset_and_with_payloads(capsys, tmp_path):
    path = tmp_path / "1.txn"
    path.write_bytes(golden.build("journal-v6.txn"))
    result = run(capsys, "readjournal", path, "--from", "1024", "--payload", "--json")
    records = result.of_type("record")
    assert records[0]["offset"] == 1024 and records[0]["entryId"] == 1
    assert all(("payload" in r) == (r["kind"] != "fence") for r in records)
    assert run(capsys, "readjournal", path, "--from", "100").code == 2  # inside the header


def test_a_journal_cut_inside_a_record_is_torn_at_that_records_offset(capsys, bookie_data_dir):
    path = _journals(bookie_data_dir)[0]
    records = run(capsys, "readjournal", path, "--json").of_type("record")
    victim = [r for r in records if r["kind"] == "data"][5]
    with open(path, "r+b") as handle:
        handle.truncate(victim["offset"] + 30)
    result = run(capsys, "readjournal", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["status"] == "torn" and problem["offset"] == victim["offset"]
    assert "runs past end of file" in problem["reason"]
    text = run(capsys, "readjournal", path)
    assert f"PROBLEM {path}: torn at offset {victim['offset']}: " in text.out


def test_a_record_torn_inside_preallocated_zeros_is_torn(capsys, tmp_path):
    """The last group's write stopped mid-record; the rest reads back as zeros (§3.6)."""
    body = bytearray(golden.build("journal-v6.txn"))
    record = golden.sized_record(1, 9, 300)
    body[6144:6144 + 150] = record[:150]  # written; its last 150 bytes never were
    path = tmp_path / "2.txn"
    path.write_bytes(bytes(body))
    result = run(capsys, "readjournal", path, "--json")
    assert result.code == 1
    assert result.of_type("problem")[0]["offset"] == 6144


def test_damage_followed_by_valid_records_is_corrupt_at_its_offset(capsys, bookie_data_dir):
    path = _journals(bookie_data_dir)[0]
    records = run(capsys, "readjournal", path, "--json").of_type("record")
    victim = [r for r in records if r["kind"] == "data"][3]
    with open(path, "r+b") as handle:
        handle.seek(victim["offset"])
        handle.write(struct.pack(">i", -7))
    result = run(capsys, "readjournal", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["status"], problem["offset"]) == ("corrupt", victim["offset"])
    assert "negative length -7" in problem["reason"]
    before = [r for r in result.of_type("record") if r["offset"] < victim["offset"]]
    assert len(before) == len(result.of_type("record")) > 0


def test_an_empty_journal_is_clean(capsys, tmp_path):
    path = tmp_path / "3.txn"
    path.write_bytes(bytes(8))
    result = run(capsys, "readjournal", path)
    assert result.code == 0 and "empty journal" in result.out


def test_a_v3_journal_is_reported_as_not_readable(capsys, tmp_path):
    path = tmp_path / "4.txn"
    path.write_bytes(b"BKLG" + struct.pack(">i", 3) + golden.key_record(1, golden.KEY_SECRET))
    result = run(capsys, "readjournal", path)
    assert result.code == 1 and "version 3 is not replayed" in result.out


def test_missing_journal_or_bad_id_is_a_usage_error(capsys, bookie_data_dir):
    assert run(capsys, "readjournal", "abc", "--data-dir", bookie_data_dir).code == 2
    assert run(capsys, "readjournal", "not-hex!", "--data-dir", bookie_data_dir).code == 2
    result = run(capsys, "readjournal", "/nonexistent/x.txn")
    assert result.code == 2 and "error" in result.err


def test_lastmark_names_the_journal_and_what_replay_would_read(capsys, bookie_data_dir):
    result = run(capsys, "lastmark", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0
    [mark] = result.of_type("lastmark")
    with open(os.path.join(bookie_data_dir, "ledgers", "current", "lastMark"), "rb") as handle:
        expected = LogMark.decode(handle.read())
    assert (mark["journalId"], mark["offset"]) == (expected.journal_id, expected.offset)
    assert mark["exists"] and mark["replayJournals"][0] == f"{expected.journal_id:x}"
    text = run(capsys, "lastmark", "--data-dir", bookie_data_dir)
    assert f"lastMark: journal {expected.journal_id:x}" in text.out


def test_lastmark_reports_a_missing_recovery_log(capsys, bookie_data_dir):
    mark = run(capsys, "lastmark", "--data-dir", bookie_data_dir, "--json").of_type(
        "lastmark")[0]
    os.unlink(os.path.join(bookie_data_dir, "journal", "current", mark["journalFile"]))
    result = run(capsys, "lastmark", "--data-dir", bookie_data_dir)
    assert result.code == 1 and "is missing" in result.out


def test_lastmark_reports_a_missing_or_unaligned_mark(capsys, bookie_data_dir):
    path = os.path.join(bookie_data_dir, "ledgers", "current", "lastMark")
    with open(path, "rb") as handle:
        mark = LogMark.decode(handle.read())
    with open(path, "wb") as handle:
        handle.write(LogMark(mark.journal_id, 700).encode())
    result = run(capsys, "lastmark", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1 and "not 512-aligned" in result.of_type("problem")[0]["reason"]
    os.unlink(path)
    assert run(capsys, "lastmark", "--data-dir", bookie_data_dir).code == 1
    assert not os.path.exists(path + ".tmp")
