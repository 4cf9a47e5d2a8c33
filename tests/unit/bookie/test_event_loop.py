"""bookie/cli.py run_event_loop: the setting ``event_loop`` picks the daemon's loop."""

from __future__ import annotations

import asyncio
import sys

from bookie.cli import run_event_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_runs_where_it_is_installed():
    # uvloop is a dependency on Linux (pyproject.toml), so it is installed here.
    assert run_event_loop(_loop_module(), "uvloop").startswith("uvloop")


def test_asyncio_keeps_asyncios_own_loop():
    assert run_event_loop(_loop_module(), "asyncio").startswith("asyncio")


def test_without_uvloop_asyncio_runs_and_says_so(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    with caplog.at_level("INFO", logger="bookie"):
        assert run_event_loop(_loop_module(), "uvloop").startswith("asyncio")
    assert "uvloop is not installed" in caplog.text
