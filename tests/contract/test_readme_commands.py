"""README.md's commands, run for real so that they cannot drift from the code.

The README opens with two commands: one serves a bookie on ``./data`` for ever, the other is
CI itself (``scripts/test.sh``); those are only checked to be there, unchanged, and to match
the defaults the text around them claims. Every shell block of its "Quick start" is run as a
bash script against a real bookie daemon this test starts on 127.0.0.1 in a temp dir, and its
output must be what the block shows: a line ``# TEXT`` standing alone is a line of output. The
background ``bookie ledger tail`` prints while the writer beside it runs, so the lines are
compared as a multiset, not in order.

The commands run as written, with two substitutions for a test bookie on a free port: the
address ``127.0.0.1:3180`` becomes the daemon's, and each ``bookie ledger`` command is given
``--url`` (the README leaves it out: its default is the first command's bookie, checked here).
``.venv/bin/bookie`` is a shim in the script's working dir that runs this checkout's code.
"""

from __future__ import annotations

import collections
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

from api.client import cli as ledger_cli
from bookie.settings import SETTINGS
from tests.support.servers import Daemon

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OPENING = ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/bookie serve\n"
           "bash scripts/test.sh\n")
DEFAULT_ADDRESS = "127.0.0.1:3180"
FENCE = re.compile(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```\n", re.MULTILINE | re.DOTALL)
#: Fenced blocks in these languages hold commands or code, which a test must run.
RUNNABLE = {"sh", "bash", "shell", "console", "python", "py"}
SCRIPT_TIMEOUT_S = 120


def _sections(text: str) -> dict[str, str]:
    """The README's ``## `` sections by title, the part before the first under ''."""
    parts = re.split(r"^## (.+)\n", text, flags=re.MULTILINE)
    found = {"": parts[0]}
    found.update(zip(parts[1::2], parts[2::2]))
    return found


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def _quick_start_blocks() -> list[str]:
    blocks = _blocks(_sections(README.read_text()).get("Quick start", ""))
    return [body for language, body in blocks if language in RUNNABLE]


def test_the_readme_opens_with_the_two_commands():
    opening = _sections(README.read_text())[""]
    assert _blocks(opening)[0] == ("sh", OPENING)
    assert (ROOT / "scripts" / "test.sh").is_file()
    defaults = {setting.name: setting.default for setting in SETTINGS}
    # "starts a bookie on ./data, serving HTTP on 127.0.0.1:3180"
    assert (defaults["data_dir"], f"{defaults['host']}:{defaults['port']}") == (
        "./data", DEFAULT_ADDRESS)
    assert "./data" in opening and DEFAULT_ADDRESS in opening


def test_every_runnable_block_is_the_opening_or_the_quick_start():
    """A command block added elsewhere would be run by nothing: it belongs in the quick start
    (run below) or in docs/."""
    elsewhere = [(title, language) for title, body in _sections(README.read_text()).items()
                 if title not in ("", "Quick start")
                 for language, _ in _blocks(body) if language in RUNNABLE]
    assert elsewhere == [], f"README blocks no test runs: {elsewhere}"
    assert _quick_start_blocks(), "README.md has no Quick start shell block"


def _expected(block: str) -> list[str]:
    return [line[2:] for line in block.splitlines() if line.startswith("# ")]


def _for_the_test_bookie(block: str, address: str) -> str:
    assert ledger_cli.DEFAULT_URL == f"http://{DEFAULT_ADDRESS}", (
        "bookie ledger's default --url is no longer the first command's bookie")
    script = block.replace(DEFAULT_ADDRESS, address)
    return re.sub(r"(\.venv/bin/bookie ledger \w+)", rf"\1 --url http://{address}", script)


@pytest.fixture
def daemon(tmp_path):
    bookie = Daemon(str(tmp_path / "bookie" / "data")).start()
    try:
        yield bookie
    finally:
        bookie.terminate()


@pytest.fixture
def workdir(tmp_path) -> pathlib.Path:
    """Where the README's commands run: ``.venv/bin/bookie`` is this checkout's bookie."""
    work = tmp_path / "work"
    shim = work / ".venv" / "bin" / "bookie"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bookie "$@"\n')
    shim.chmod(0o755)
    return work


def _run(script: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """bash, stopping at the first failure; its own process group, so that a background
    command left running when the bound passes goes with it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BOOKIE_LEDGER_PASSWORD", None)
    env.pop("BOOKIE_METADATA_SERVICE_URI", None)
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"not done within {SCRIPT_TIMEOUT_S} s:\n{script}\n"
                    f"stdout: {out.decode(errors='replace')}\n"
                    f"stderr: {err.decode(errors='replace')}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_opening_paragraphs_readiness_check_answers(daemon, workdir):
    opening = _sections(README.read_text())[""]
    checks = re.findall(r"`(curl [^`]+)`", opening)
    assert checks, "the opening paragraph names no curl check"
    for check in checks:
        done = _run(_for_the_test_bookie(check, daemon.url.split("://", 1)[1]), workdir)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert b'"ready": true' in done.stdout or b'"ready":true' in done.stdout, done.stdout


def test_the_quick_start_runs_and_prints_what_it_shows(daemon, workdir):
    address = daemon.url.split("://", 1)[1]
    for block in _quick_start_blocks():
        done = _run(_for_the_test_bookie(block, address), workdir)
        stdout = done.stdout.decode(errors="replace")
        assert done.returncode == 0, (
            f"exit {done.returncode}:\n{block}\nstdout: {stdout}\n"
            f"stderr: {done.stderr.decode(errors='replace')}")
        assert collections.Counter(stdout.splitlines()) == collections.Counter(
            _expected(block)), f"{block}\nprinted:\n{stdout}"
