"""``bookie shell bk-ready --move`` (MH1-MH3 in bookie/ledger_move.py): the ledgers our
bookie put outside dir ``L mod n`` because that dir was full go back there, entries, fence
and tombstones with them, and a kill -9 at any step of a move loses nothing: the bookie
reads every entry, and a run again finishes the move."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from bookie.errors import NoLedger
from bookie.node import Bookie
from tests.shell.shell_support import run
from tests.support.off_home import DELETED, MOVED, entry, off_home_ledgers, three_dirs
from tests.support.servers import ROOT

async def served(config) -> None:
    """Every entry of MOVED from its home dir, fenced; DELETED still deleted."""
    bookie = Bookie(config)
    await bookie.start()
    try:
        for entry_id in range(5):
            assert await bookie.read_entry(MOVED, entry_id) == entry(MOVED, entry_id)
        with pytest.raises(NoLedger):
            await bookie.read_entry(DELETED, 0)
        assert (await bookie.ledger_info(MOVED))["fenced"] is True
    finally:
        await bookie.close()


def dirs(config) -> str:
    return ",".join(os.path.dirname(d) for d in config.ledger_dirs_current)


def test_ledgers_outside_their_dir_are_moved_there(capsys, tmp_path):
    config = three_dirs(tmp_path)
    asyncio.run(off_home_ledgers(config))
    before = run(capsys, "bk-ready", "--ledger-dirs", dirs(config))
    assert before.code == 1 and f"ledger {MOVED} is in ledger dir 2" in before.out
    moved = run(capsys, "bk-ready", "--ledger-dirs", dirs(config), "--move")
    assert moved.code == 0, moved.out + moved.err
    assert f"moved ledger {MOVED} from ledger dir 2 to dir 1 (5 entries)" in moved.out
    assert f"moved tombstone of ledger {DELETED} from ledger dir 2 to dir 1" in moved.out
    asyncio.run(served(config))
    bookie = Bookie(config)
    asyncio.run(bookie.start())
    try:
        units = bookie.storage.units
        assert bookie.storage.placement.home(MOVED) == 1
        assert units[2].ledgers.get(MOVED) is None and units[2].ledgers.get(DELETED) is None
        assert units[2].locations.count_and_max(MOVED)[0] == 0
        assert units[1].ledgers.get(MOVED).entry_count == 5
    finally:
        asyncio.run(bookie.close())


KILLED_AT = """
import os, signal, sys
from bookie import ledger_move
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.storage_dirs import DirsStorage
config = BookieConfig(data_dir=sys.argv[1], ledger_dirs=sys.argv[2])
storage = DirsStorage(OsDisk(), config)
storage.open()
def step(name):
    if name == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)
ledger_move.move_home(storage, int(sys.argv[4]), 2, on_step=step)
"""


@pytest.mark.parametrize("step", ["copied", "state-dropped"])
def test_a_move_killed_at_each_step_loses_nothing_and_finishes_when_run_again(
        capsys, tmp_path, step):
    config = three_dirs(tmp_path)
    asyncio.run(off_home_ledgers(config))
    killed = subprocess.run([sys.executable, "-c", KILLED_AT, config.data_dir, dirs(config),
                             step, str(MOVED)], cwd=ROOT, capture_output=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    asyncio.run(served(config))  # ours reads every entry, wherever the kill left them
    again = run(capsys, "bk-ready", "--ledger-dirs", dirs(config), "--move")
    assert again.code == 0, again.out + again.err
    if step == "state-dropped":  # the old dir's locations were left: MH3 drops them
        assert f"deleted ledger {MOVED}'s leftover locations in ledger dir 2" in again.out
    else:
        assert f"moved ledger {MOVED} from ledger dir 2 to dir 1 (5 entries)" in again.out
    asyncio.run(served(config))
