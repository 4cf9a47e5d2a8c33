"""What a newcomer meets first in ``bookie shell`` (issue 54): one-line errors naming what is
wrong, and one way to name a ledger."""

from __future__ import annotations

import os

import pytest

from journal.format import V1, encode_add, encode_header
from tests.shell.shell_support import entry, run

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
NEEDS_A_DATA_DIR = [["listledgers"], ["ledger", "1"], ["scrub"], ["check-index"],
                    ["rebuild-index"], ["export-index", "--out", "-"], ["gc"], ["info"],
                    ["listfiles"], ["lastmark"]]


@pytest.mark.parametrize("argv", NEEDS_A_DATA_DIR, ids=lambda argv: argv[0])
def test_a_missing_data_dir_is_named_and_nothing_is_created(capsys, tmp_path, argv):
    missing = tmp_path / "typo"
    result = run(capsys, *argv, "--data-dir", missing)
    assert result.code == 2, result.out
    assert result.err.strip().splitlines() == [
        f"bookie shell: error: no data dir at {missing} (see --data-dir)"]
    assert not missing.exists()  # rebuild-index once built an index into the typo


@pytest.mark.parametrize("argv", [["listledgers"], ["ledger", "1"], ["scrub"],
                                  ["check-index"], ["export-index", "--out", "-"]],
                         ids=lambda argv: argv[0])
def test_a_dir_without_an_index_says_so_not_rocksdbs_words(capsys, tmp_path, argv):
    result = run(capsys, *argv, "--data-dir", tmp_path)
    assert result.code == 2, result.out
    [line] = result.err.strip().splitlines()
    assert "index at" in line and "not a bookie's data dir" in line, line
    assert "CURRENT" not in line


def test_readjournal_of_a_file_that_is_no_journal_says_so(capsys):
    result = run(capsys, "readjournal", README, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["status"] == "not-a-journal"
    assert "not a journal: no BKLG header" in problem["reason"]
    assert "version 1" not in result.out


def test_a_header_less_v1_journal_is_still_named_v1(capsys, tmp_path):
    path = tmp_path / "1.txn"
    path.write_bytes(encode_header(V1) + encode_add(entry(1, 0)) + encode_add(entry(1, 1)))
    result = run(capsys, "readjournal", path, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["status"] == "unsupported" and "version 1" in problem["reason"]


def test_ledger_takes_dash_dash_ledger_as_bookie_ledger_does(capsys, bookie_data_dir):
    by_flag = run(capsys, "ledger", "--ledger", "2", "--data-dir", bookie_data_dir, "--json")
    by_position = run(capsys, "ledger", "2", "--data-dir", bookie_data_dir, "--json")
    assert by_flag.code == 0 and by_flag.out == by_position.out
    assert [e["entryId"] for e in by_flag.of_type("entry")] == list(range(15))


def test_ledger_refuses_no_ledger_and_two_ledgers(capsys, bookie_data_dir):
    none = run(capsys, "ledger", "--data-dir", bookie_data_dir)
    assert none.code == 2 and "--ledger ID" in none.err
    two = run(capsys, "ledger", "2", "--ledger", "3", "--data-dir", bookie_data_dir)
    assert two.code == 2 and "two ledgers named" in two.err
