"""``listfiles``, ``listledgers``, ``ledger <L>`` and ``info`` on a real bookie's data dir."""

from __future__ import annotations

import os
import shutil

from tests.shell.shell_support import KEY, LEDGER_TYPES, entry, run


def test_listfiles_lists_journals_logs_and_index_dirs(capsys, bookie_data_dir):
    result = run(capsys, "listfiles", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0
    files = result.of_type("file")
    journals = [f for f in files if f["kind"] == "journal"]
    logs = [f for f in files if f["kind"] == "entrylog"]
    assert len(journals) >= 2 and all(f["version"] == 6 for f in journals)
    assert len(logs) >= 3 and sum(not f["finalized"] for f in logs) == 1
    assert {f["name"] for f in files if f["kind"] == "index"} == {"locations", "ledgers"}
    assert all(f["size"] > 0 for f in files if f["kind"] == "index")
    others = {f["name"] for f in files if f["kind"] == "other"}
    assert {"ledgers/current/lastId", "ledgers/current/lastMark"} <= others
    for item in journals + logs:
        assert item["size"] == os.path.getsize(item["path"])


def test_listledgers_shows_each_ledgers_state(capsys, bookie_data_dir):
    result = run(capsys, "listledgers", "--data-dir", bookie_data_dir, "--json", "--entries")
    assert result.code == 0
    ledgers = {r["ledgerId"]: r for r in result.of_type("ledger")}
    assert set(ledgers) == set(LEDGER_TYPES)
    for ledger_id, digest_type in LEDGER_TYPES.items():
        assert ledgers[ledger_id]["digestType"] == digest_type.header_name
        assert ledgers[ledger_id]["masterKey"] == KEY.hex()
    assert [i for i, r in ledgers.items() if r["fenced"]] == [5]
    assert ledgers[1]["explicitLac"] == 29
    assert (ledgers[1]["entries"], ledgers[1]["lastEntryId"]) == (45, 44)
    assert (ledgers[6]["entries"], ledgers[6]["lastEntryId"]) == (10, 9)
    text = run(capsys, "listledgers", "--data-dir", bookie_data_dir)
    assert "ledger 5: crc32c, fenced, key e793" in text.out


def test_ledger_lists_locations_and_reads_them_back(capsys, bookie_data_dir):
    result = run(capsys, "ledger", "2", "--data-dir", bookie_data_dir, "--json", "--read")
    assert result.code == 0, result.out
    [state] = result.of_type("ledger")
    assert state["digestType"] == "crc32"
    entries = result.of_type("entry")
    assert [e["entryId"] for e in entries] == list(range(15))
    for item in entries:
        assert item["digest"] == "digest ok" and item["size"] == len(entry(2, item["entryId"]))
        with open(item["file"], "rb") as handle:
            handle.seek(item["pos"])
            assert handle.read(item["size"]) == entry(2, item["entryId"])
    mac = run(capsys, "ledger", "3", "--data-dir", bookie_data_dir, "--json", "--read")
    assert {e["digest"] for e in mac.of_type("entry")} == {"not verifiable"}


def test_ledger_reports_an_unknown_ledger_and_a_bad_entry(capsys, bookie_data_dir):
    assert run(capsys, "ledger", "77", "--data-dir", bookie_data_dir).code == 1
    entries = run(capsys, "ledger", "1", "--data-dir", bookie_data_dir, "--json").of_type(
        "entry")
    victim = entries[7]
    with open(victim["file"], "r+b") as handle:
        handle.seek(victim["pos"] + 100)
        byte = handle.read(1)
        handle.seek(victim["pos"] + 100)
        handle.write(bytes([byte[0] ^ 0x40]))
    result = run(capsys, "ledger", "1", "--data-dir", bookie_data_dir, "--json", "--read")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["entryId"], problem["offset"]) == (7, victim["pos"] - 4)
    assert "crc32c digest mismatch" in problem["reason"]


def test_info_summarizes_the_data_dir(capsys, bookie_data_dir):
    result = run(capsys, "info", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0
    [info] = result.of_type("info")
    assert info["journals"]["count"] >= 2 and info["entryLogs"]["count"] >= 3
    assert len(info["entryLogs"]["unfinalized"]) == 1
    assert info["ledgers"] == {"live": 6, "deleted": 0, "fenced": 1, "digestTypes": {
        "crc32c": 3, "crc32": 1, "mac": 1, "dummy": 1}}
    assert info["lastMark"]["journalId"] == info["journals"]["ids"][-1]
    text = run(capsys, "info", "--data-dir", bookie_data_dir)
    assert text.out.startswith("data dir ") and "not finalized" in text.out


def test_info_reports_an_unreadable_index_and_a_missing_marked_journal(capsys,
                                                                       bookie_data_dir):
    shutil.rmtree(os.path.join(bookie_data_dir, "ledgers", "current", "ledgers"))
    journal_dir = os.path.join(bookie_data_dir, "journal", "current")
    for name in os.listdir(journal_dir):
        os.unlink(os.path.join(journal_dir, name))
    result = run(capsys, "info", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    reasons = " ".join(p["reason"] for p in result.of_type("problem"))
    assert "no ledgers index at" in reasons and "which is missing" in reasons
