"""Replay accepts every journal the live path can write (kill -9 model, real daemon).

Two review findings of issue 13, each of which refused every later start:
- bug 3: an entry whose stored copy is unreadable (a damaged log) may be re-added with the
  same bytes ("the new one, journaled, replaces it"); after kill -9, replay read the damaged
  copy, raised EIO and the start failed. Replay treats an unreadable copy as absent.
- bug 5: a ledger fenced with the all-zero master key (BookKeeper's "no key") and then written
  with key K; a crash between the checkpoint's index batch (K stored) and lastMark made replay
  meet LEDGER_KEY(zero) against K and refuse. A zero key never conflicts, on replay as live.
"""

from __future__ import annotations

import glob
import os

import pytest

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from bookie.errors import IOFailure, Unauthorized
from tests.support.servers import Daemon

KEY = master_key(b"replay")
ZERO_KEY = bytes(20)
QUIET = ("--checkpoint-interval-ms", "86400000")


def entry(ledger_id: int, entry_id: int) -> bytes:
    payload = b"entry %d of ledger %d " % (entry_id, ledger_id) * 4
    return frame_entry(ledger_id, entry_id, entry_id - 1, 100 * (entry_id + 1), payload,
                       DigestType.CRC32C)


def _damage(data_dir: str, target: bytes) -> None:
    """Cut the entry log in the middle of ``target``'s bytes."""
    for path in glob.glob(os.path.join(data_dir, "ledgers", "current", "*.log")):
        with open(path, "rb") as handle:
            at = handle.read().find(target)
        if at >= 0:
            os.truncate(path, at + len(target) // 2)
            return
    raise AssertionError("entry not found in any entry log")


async def test_a_readded_entry_over_a_damaged_copy_survives_kill9(tmp_path):
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, *QUIET).start()
    async with BookieClient(daemon.url) as client:
        for entry_id in range(20):
            await client.add_entry(3, entry_id, entry(3, entry_id), KEY)
    assert daemon.terminate() == 0  # drained and checkpointed: 3/19 lives in an entry log
    _damage(data_dir, entry(3, 19))
    daemon.start()
    async with BookieClient(daemon.url) as client:
        with pytest.raises(IOFailure):
            await client.read_entry(3, 19)
        await client.add_entry(3, 19, entry(3, 19), KEY)  # accepted: replaces the copy
    daemon.kill9()
    daemon.start()  # bug 3: "no entry at ...: the file ends before it", exit 1
    async with BookieClient(daemon.url) as client:
        assert await client.read_entry(3, 19) == entry(3, 19)
        assert await client.read_entry(3, 18) == entry(3, 18)
        report = (await client.info())["replay"]
    assert any("3/19" in warning for warning in report["warnings"])
    assert daemon.terminate() == 0


async def test_a_zero_key_fence_then_key_k_survives_a_crash_before_lastmark(tmp_path):
    data_dir = str(tmp_path / "data")
    # On a new data dir the startup checkpoint has no mark to move, so lastMark.tmp's first
    # sync is the checkpoint below: after its RocksDB batch stored key K, before lastMark.
    crashing = Daemon(data_dir, *QUIET, crash_at=(1, "*lastMark.tmp")).start()
    async with BookieClient(crashing.url) as client:
        await client.fence(5, ZERO_KEY)
        await client.add_entry(5, 0, entry(5, 0), KEY, recovery=True)
        with pytest.raises(Exception):
            await client.checkpoint()  # the daemon SIGKILLs itself inside it
    assert crashing.proc.wait(60) == -9
    daemon = Daemon(data_dir, *QUIET).start()  # bug 5: "master key of ledger 5 is 0000..."
    async with BookieClient(daemon.url) as client:
        assert await client.read_entry(5, 0) == entry(5, 0)
        with pytest.raises(Unauthorized):  # K stayed the ledger's key
            await client.add_entry(5, 1, entry(5, 1), ZERO_KEY, recovery=True)
        await client.add_entry(5, 1, entry(5, 1), KEY, recovery=True)
    assert daemon.terminate() == 0
