"""index_dirs (BookKeeper's indexDirectories): ledger dir i keeps its RocksDB indexes in
index dir i's ``current/locations`` and ``current/ledgers`` (DbLedgerStorage's layout), the
entry logs stay in the ledger dir; each index dir carries the identity, so an emptied index
volume refuses the start as an emptied ledger dir does (docs/design.md §3.8)."""

from __future__ import annotations

import json
import os
import shutil

import aiohttp
import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry, master_key
from bookie.errors import NoLedger, ReadOnly
from bookie.identity import IdentityMismatch
from bookie.node import Bookie
from bookie.state import BookieState
from entrylog.format import parse_log_id
from tests.support.bk_admin import admin_bookie, call
from tests.support.conditions import until
from tests.support.servers import Daemon

KEY = master_key(b"index-dirs")
INDEXES = ("locations", "ledgers")


def _dirs(root, count: int = 2) -> tuple[list[str], list[str], str]:
    ledgers = [str(root / f"hdd{i}" / "ledgers") for i in range(count)]
    indexes = [str(root / f"nvme{i}" / "index") for i in range(count)]
    return ledgers, indexes, str(root / "hdd0" / "journal")


def _config(root, count: int = 2, **extra) -> BookieConfig:
    ledgers, indexes, journal = _dirs(root, count)
    return BookieConfig(data_dir=str(root / "unused"), port=0, checkpoint_interval_ms=3_600_000,
                        gc_interval_ms=0, journal_prealloc_bytes=64 * 1024,
                        ledger_dirs=",".join(ledgers), index_dirs=",".join(indexes),
                        journal_dirs=journal, **extra)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       f"{ledger_id}/{entry_id}".encode() * 20)


def _assert_layout(ledgers: list[str], indexes: list[str]) -> None:
    """The RocksDB dirs under each index dir and none under its ledger dir, whose
    ``current/`` keeps the entry logs."""
    for ledger, index in zip(ledgers, indexes):
        for name in INDEXES:
            assert os.path.exists(os.path.join(index, "current", name, "CURRENT")), name
            assert not os.path.exists(os.path.join(ledger, "current", name)), name
        assert not any(parse_log_id(n) is not None
                       for n in os.listdir(os.path.join(index, "current")))
        assert "IDENTITY" in os.listdir(os.path.join(index, "current"))


async def _read_back(url: str, written: dict[int, int]) -> None:
    async with BookieClient(url) as client:
        for ledger_id, count in written.items():
            for entry_id in range(count):
                assert await client.read_entry(ledger_id, entry_id) == \
                    _entry(ledger_id, entry_id)
            with pytest.raises(NoLedger):
                await client.read_entry(ledger_id + 100, 0)


@pytest.mark.timeout(180)
async def test_a_bookie_keeps_its_indexes_in_the_index_dirs_across_restart_and_kill9(tmp_path):
    ledgers, indexes, journal = _dirs(tmp_path)
    flags = ("--ledger-dirs", ",".join(ledgers), "--index-dirs", ",".join(indexes),
             "--journal-dirs", journal, "--checkpoint-interval-ms", "3600000",
             "--gc-interval-ms", "0")
    data_dir = str(tmp_path / "data")
    written: dict[int, int] = {}
    daemon = Daemon(data_dir, *flags).start()
    try:
        async with BookieClient(daemon.url, admin_token=None) as client:
            for ledger_id in range(1, 7):  # both ledger dirs: L mod 2
                for entry_id in range(4):
                    await client.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id), KEY)
                written[ledger_id] = 4
    finally:
        assert daemon.terminate() == 0  # the last checkpoint: entry logs and indexes written
    _assert_layout(ledgers, indexes)
    for ledger in ledgers:
        assert any(parse_log_id(n) is not None for n in os.listdir(os.path.join(ledger, "current")))

    daemon = Daemon(data_dir, *flags).start()
    try:
        await _read_back(daemon.url, written)
        async with BookieClient(daemon.url, admin_token=None) as client:
            dirs = (await client.info())["dirs"]
            assert dirs["indexDirs"] == [os.path.join(d, "current") for d in indexes]
            for ledger_id in range(1, 7):  # acknowledged, then killed before a checkpoint
                for entry_id in range(4, 7):
                    await client.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id), KEY)
                written[ledger_id] = 7
            for ledger_id in (7, 8):
                await client.add_entry(ledger_id, 0, _entry(ledger_id, 0), KEY)
                written[ledger_id] = 1
    finally:
        daemon.kill9()
    daemon = Daemon(data_dir, *flags).start()  # replays the journal into the index dirs
    try:
        await _read_back(daemon.url, written)
    finally:
        assert daemon.terminate() == 0
    _assert_layout(ledgers, indexes)


async def test_an_emptied_index_dir_refuses_the_start_as_an_emptied_ledger_dir(tmp_path):
    config = _config(tmp_path)
    bookie = Bookie(config)
    await bookie.start()
    try:
        await bookie.add_entry(1, 0, _entry(1, 0), KEY)
        await bookie.checkpoint()
    finally:
        await bookie.close()
    index = os.path.dirname(config.index_dirs_current[1])
    shutil.rmtree(index)  # the NVMe volume of ledger dir 1 replaced; its ledger dir kept
    with pytest.raises(IdentityMismatch,
                       match=f"index dir {index}/current has no identity \\(emptied\\)"):
        again = Bookie(config)
        try:
            await again.start()
        finally:
            again.storage.close_indexes()
    assert not os.path.exists(os.path.join(index, "current", "locations"))


async def test_dropping_or_adding_index_dirs_is_refused(tmp_path):
    """Unset again, the ledger dirs would open new empty indexes beside entry logs whose
    locations are in the index dirs: every entry would read as missing."""
    config = _config(tmp_path)
    bookie = Bookie(config)
    await bookie.start()
    await bookie.close()
    dropped = config.replace(index_dirs=None)
    with pytest.raises(IdentityMismatch, match="created with 2 index dir\\(s\\) apart"):
        again = Bookie(dropped)
        try:
            await again.start()
        finally:
            again.storage.close_indexes()
    for ledger in config.ledger_dirs_current:
        assert not os.path.exists(os.path.join(ledger, "locations"))
    plain = _config(tmp_path / "plain").replace(index_dirs=None)
    bookie = Bookie(plain)
    await bookie.start()
    await bookie.close()
    added = plain.replace(index_dirs=",".join(_dirs(tmp_path / "plain")[1]))
    with pytest.raises(IdentityMismatch, match="created with 0 index dir\\(s\\) apart"):
        again = Bookie(added)
        try:
            await again.start()
        finally:
            again.storage.close_indexes()


class FullIndexes(OsDisk):
    """The real disk, but the index dirs named in ``full`` report 99 % used."""

    def __init__(self) -> None:
        super().__init__()
        self.full: set[str] = set()

    def usage(self, path: str) -> tuple[int, int]:
        if path in self.full:
            return 100 * 2**20, 2**20
        return super().usage(path)


async def test_a_full_index_dir_takes_its_ledger_dir_out_and_all_full_is_read_only(tmp_path):
    """indexDirsManager's check, with the same disk_usage_* thresholds."""
    config = _config(tmp_path, disk_check_interval_ms=3_600_000)
    disk = FullIndexes()
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        assert {"index", "index.1"} <= set(bookie.disk_monitor.paths)
        disk.full.add(config.index_dirs_current[1])
        bookie.poll_disks()
        assert bookie.state is BookieState.WRITABLE
        await bookie.add_entry(3, 0, _entry(3, 0), KEY)  # 3 mod 2 = 1, its index disk full
        units = bookie.storage.units
        assert units[0].ledgers.get(3) is not None and units[1].ledgers.get(3) is None
        disk.full.update(config.index_dirs_current)
        bookie.poll_disks()
        assert bookie.state is BookieState.READ_ONLY and "full" in bookie.readonly_reasons
        with pytest.raises(ReadOnly):
            await bookie.add_entry(4, 0, _entry(4, 0), KEY)
        disk.full.clear()
        bookie.poll_disks()
        assert bookie.state is BookieState.WRITABLE
    finally:
        await bookie.close()


async def test_entry_location_compact_names_the_index_dirs_locations(tmp_path):
    """BookKeeper's entry_location_compact keys each index by its RocksDB path: with
    indexDirectories, <index dir>/current/locations."""
    config = _config(tmp_path).replace(admin_token="t")
    async with admin_bookie(config) as served:
        compacted = []
        for index, unit in enumerate(served.bookie.storage.units):
            def compact(index=index, original=unit.locations.compact):
                compacted.append(index)
                original()
            unit.locations.compact = compact
        paths = [os.path.join(d, "locations") for d in config.index_dirs_current]
        url = f"{served.admin}/api/v1/bookie/entry_location_compact"
        async with aiohttp.ClientSession() as session:
            answer = await call(session, url, "GET")
            assert answer.status == 200 and set(json.loads(answer.body)) == set(paths)
            answer = await call(session, url, "PUT",
                                json.dumps({"entryLocationRocksDBCompact": True,
                                            "entryLocations": paths[1]}),
                                Authorization="Bearer t")
            assert answer.status == 200, answer
            await until(lambda: compacted, "the compaction ran")
    assert compacted == [1]
