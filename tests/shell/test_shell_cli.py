"""The shell as a whole: dispatch from ``bookie``, --help, exit codes, progress, export-index."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from bookie.shell import build_parser
from bookie.shell.output import Output, Progress
from ledgerindex.locations import EntryLocationIndex
from tests.shell.shell_support import run
from tests.support.servers import ROOT

COMMANDS = ["readjournal", "lastmark", "readlog", "readlogmetadata", "listfiles",
            "listledgers", "ledger", "info", "scrub", "check-index", "bk-ready", "rebuild-index",
            "export-index", "gc", "cookie", "listbookies", "listunderreplicated",
            "decommission", "autorecovery"]
#: BookKeeper's names (bookie/shell/bk_*.py): their dirs come from the settings, not --data-dir
BK_COMMANDS = ["whatisinstanceid", "initnewcluster", "forceauditchecks", "bookieformat",
               "initbookie", "cookie_create", "cookie_delete", "cookie_get", "cookie_update",
               "cookie_generate", "updatecookie", "endpointinfo", "activeledgers"]


def test_every_command_is_registered():
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    assert sorted(commands.choices) == sorted(COMMANDS + BK_COMMANDS)


@pytest.mark.parametrize("command", BK_COMMANDS)
def test_every_bookkeeper_command_explains_itself_with_help(capsys, command):
    result = run(capsys, command, "--help")
    assert result.code == 0
    assert "-conf" in result.out and "--json" in result.out
    assert len(result.out.split("\n\n")[1]) > 40  # a description, not just usage


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_explains_itself_with_help(capsys, command):
    result = run(capsys, command, "--help")
    assert result.code == 0
    assert "--data-dir" in result.out and "--json" in result.out
    assert len(result.out.split("\n\n")[1]) > 80  # a description, not just usage


def test_usage_errors_exit_2(capsys):
    assert run(capsys).code == 2
    assert run(capsys, "no-such-command").code == 2
    assert run(capsys, "ledger", "not-a-number").code == 2
    assert run(capsys, "export-index").code == 2  # --out is required


def test_bookie_shell_runs_as_a_process_with_its_exit_code(bookie_data_dir):
    done = subprocess.run([sys.executable, "-m", "bookie", "shell", "scrub", "--data-dir",
                           bookie_data_dir, "--json"], cwd=ROOT, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "summary"
    missing = subprocess.run([sys.executable, "-m", "bookie", "shell", "readlog", "ff",
                              "--data-dir", bookie_data_dir], cwd=ROOT, capture_output=True,
                             timeout=120)
    assert missing.returncode == 2 and b"not found" in missing.stderr


def test_progress_lines_off_a_terminal_come_every_interval():
    stream, now = io.StringIO(), [0.0]
    progress = Progress("scrub", stream, tty=False, clock=lambda: now[0], interval_s=5.0)
    for step in range(1, 13):
        now[0] = step * 1.0
        progress.update(step << 20, 12 << 20)
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert lines == ["scrub: 42% (5/12 MiB, 1 MiB/s)", "scrub: 83% (10/12 MiB, 1 MiB/s)"]


def test_progress_on_a_terminal_is_a_bar_redrawn_in_place():
    stream, now = io.StringIO(), [0.0]
    progress = Progress("scrub", stream, tty=True, clock=lambda: now[0])
    now[0] = 1.0
    progress.update(512, 1024)
    now[0] = 2.0
    progress.update(1024, 1024)
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\rscrub [") and text.count("\r") == 2 and text.endswith("\n")
    assert "100%" in text and "#" * 30 in text


def test_no_progress_and_short_runs_print_nothing_on_stderr(capsys, bookie_data_dir):
    assert run(capsys, "scrub", "--data-dir", bookie_data_dir).err == ""
    assert run(capsys, "scrub", "--data-dir", bookie_data_dir, "--no-progress").err == ""


def test_problems_set_the_exit_code_and_json_lines_parse():
    out = io.StringIO()
    output = Output(True, out, io.StringIO())
    output.emit({"type": "entry", "x": 1}, "ignored in json")
    assert output.exit_code() == 0
    output.problem({"type": "entry", "offset": 3}, "text")
    assert output.exit_code() == 1
    assert [json.loads(line)["type"] for line in out.getvalue().splitlines()] == \
        ["entry", "problem"]


def test_export_index_writes_every_location_as_json_lines(capsys, bookie_data_dir, tmp_path):
    target = tmp_path / "locations.jsonl"
    result = run(capsys, "export-index", "--data-dir", bookie_data_dir, "--out", target,
                 "--json")
    assert result.code == 0 and result.of_type("summary")[0]["entries"] == 91
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    index = EntryLocationIndex.open(os.path.join(bookie_data_dir, "ledgers", "current",
                                                 "locations"), read_only=True)
    try:
        expected = [(lid, eid, loc) for lid in range(10) for eid, loc in index.entries(lid)]
    finally:
        index.close()
    assert [(r["ledgerId"], r["entryId"], r["location"]) for r in rows] == expected
    assert all(r["location"] == (r["logId"] << 32) | r["pos"] for r in rows)
    assert not os.path.exists(str(target) + ".tmp")


def test_export_index_reads_while_a_bookie_holds_the_database(capsys, bookie_data_dir):
    """A secondary instance: the primary (read-write, locked) keeps running."""
    path = os.path.join(bookie_data_dir, "ledgers", "current", "locations")
    primary = EntryLocationIndex.open(path)
    try:
        primary.add_batch([(9, 0, (1 << 32) | 1028)])
        result = run(capsys, "export-index", "--data-dir", bookie_data_dir, "--out", "-")
    finally:
        primary.close()
    assert result.code == 0
    rows = [json.loads(line) for line in result.out.splitlines()]
    assert len(rows) == 92 and rows[-1]["ledgerId"] == 9
    assert "exported 92 locations" in result.err


@pytest.mark.parametrize("command", ["listfiles", "info", "lastmark"])
def test_a_data_dir_that_does_not_exist_is_a_usage_error(capsys, tmp_path, command):
    result = run(capsys, command, "--data-dir", tmp_path / "typo")
    assert result.code == 2 and "no data dir at" in result.err
