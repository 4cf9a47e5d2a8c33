"""The writer mark (WM1, WM2 in bookie/writer_mark.py): another bookie that ran on our dirs
(BookKeeper's adds to ``locations`` without rewriting a ledger's LedgerData, and makes a new
journal file at its start) makes our usage counters not known, so a ledger's size is recounted
from the index; our own restarts trust the counters."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.request

from api.client.bkport.client import BkBookieClient
from api.client.codec import LedgerCodec
from bookie.checkpoint import list_journal_ids
from bookie.disk import OsDisk
from ledgerindex.ledgers import LedgerMetadataIndex
from tests.support.servers import Daemon

QUIET = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB",
         "--bookie-port", "0")
LEDGER = 7


async def add(daemon: Daemon, first: int, last: int) -> None:
    codec = LedgerCodec.for_password(LEDGER, b"pw")
    async with BkBookieClient(f"127.0.0.1:{daemon.bk_port}") as client:
        for entry in range(first, last + 1):
            await client.add_entry(LEDGER, entry, codec.frame(entry, entry - 1, 0, b"x" * 100),
                                   codec.master_key)


def entries_reported(daemon: Daemon) -> int:
    with urllib.request.urlopen(f"{daemon.url}/v1/ledgers/{LEDGER}", timeout=30) as reply:
        return json.load(reply)["entries"]


def writer_mark(data: str) -> int | None:
    index = LedgerMetadataIndex.open(os.path.join(data, "ledgers", "current", "ledgers"),
                                     read_only=True)
    try:
        return index.writer_mark
    finally:
        index.close()


def test_another_writer_makes_the_sizes_recounted_and_our_restart_does_not(tmp_path):
    """The other writer is played by ours with its ``ledgers`` index put back afterwards:
    entries in ``locations`` and the entry logs that the LedgerData counters do not count,
    and journal files newer than the index's mark, as BookKeeper's run leaves them."""
    data = str(tmp_path / "data")
    index_dir = os.path.join(data, "ledgers", "current", "ledgers")
    journals = os.path.join(data, "journal", "current")
    daemon = Daemon(data, *QUIET).start()
    asyncio.run(add(daemon, 0, 9))
    assert daemon.terminate() == 0
    assert writer_mark(data) == max(list_journal_ids(OsDisk(), journals))  # WM1
    shutil.copytree(index_dir, str(tmp_path / "ledgers-before"))

    ours = Daemon(data, *QUIET).start()  # our own restart: the counters are trusted
    try:
        assert entries_reported(ours) == 10
        asyncio.run(add(ours, 10, 14))  # the other writer's adds
    finally:
        assert ours.terminate() == 0
    assert "writer mark" not in ours.log_text()
    shutil.rmtree(index_dir)
    shutil.copytree(str(tmp_path / "ledgers-before"), index_dir)  # LedgerData untouched

    after = Daemon(data, *QUIET).start()
    try:
        assert entries_reported(after) == 15  # recounted from the index (WM2); was 10
    finally:
        assert after.terminate() == 0
    assert "is newer than the writer mark" in after.log_text()
    assert writer_mark(data) == max(list_journal_ids(OsDisk(), journals))


def test_every_journal_roll_moves_the_mark(tmp_path):
    """WM1 on the journal thread too: each file a roll makes is marked, so a bookie of ours
    killed after its journal rolled is not taken for another writer at its next start."""
    data = str(tmp_path / "data")
    flags = (*QUIET, "--journal-max-bytes", "64KiB")
    daemon = Daemon(data, *flags).start()
    asyncio.run(add(daemon, 0, 999))  # ~170 KB of records: two rolls at least
    journals = os.path.join(data, "journal", "current")
    daemon.kill9()
    ids = list_journal_ids(OsDisk(), journals)
    assert len(ids) >= 3 and writer_mark(data) == max(ids)
    again = Daemon(data, *flags).start()
    try:
        assert entries_reported(again) == 1000
    finally:
        assert again.terminate() == 0
    assert "writer mark" not in again.log_text()
