"""Fixtures for the ledgerindex tests: a child process killed the kill -9 way (docs/design.md §2.2)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def _child(script: str, *, how: str) -> None:
    """Run ``script`` in a fresh interpreter, then end it without any cleanup.

    how = "sigkill": the script's last ``print("ready")`` tells us it is done; we SIGKILL it
    while it blocks on stdin, so RocksDB is never closed (the crash model kill -9).
    how = "exit": the script ends with ``os._exit(0)``: no atexit, no destructors, no close.
    """
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    code = textwrap.dedent(script)
    if how == "sigkill":
        code += "\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()\n"
    else:
        code += "\nimport os\nos._exit(0)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if how == "sigkill":
            line = proc.stdout.readline()
            assert line == "ready\n", f"child failed: {line!r} {proc.stderr.read()}"
            proc.send_signal(signal.SIGKILL)
        returncode = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    expected = -signal.SIGKILL if how == "sigkill" else 0
    assert returncode == expected, proc.stderr.read()


@pytest.fixture
def killed_child():
    """``killed_child(script, how="sigkill")``: run the script, then kill it uncleanly."""
    def run(script: str, how: str = "sigkill") -> None:
        _child(script, how=how)
    return run
