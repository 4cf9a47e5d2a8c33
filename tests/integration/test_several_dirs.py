"""Several ledger dirs and journal dirs (docs/design.md §3.8): a real bookie on real files.

Ledger L lives in ledger dir L mod 3 (entries, locations, state), its records go to journal
L mod 2, every journal has its lastMark.<i> in every ledger dir, a full ledger dir takes no
new ledgers while another can, and the bookie is read-only only when every ledger dir is.
"""

from __future__ import annotations

import json
import os

import aiohttp
import pytest

from api.client import BookieClient
from api.server.info_json import bookie_info
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry, master_key
from bookie.errors import IOFailure, NoLedger, ReadOnly
from bookie.identity import IdentityMismatch
from bookie.node import Bookie
from bookie.state import BookieState
from entrylog.format import parse_log_id
from journal.format import parse_journal_id
from journal.reader import JournalReader
from tests.support.bk_admin import admin_bookie, call
from tests.support.conditions import until
from tests.support.dir_layout import dir_lists
from tests.support.off_home import FullDirs
from tests.support.servers import Daemon

KEY = master_key(b"dirs")


def _config(root, ledgers: int = 3, journals: int = 2, **extra) -> BookieConfig:
    ledger_dirs, journal_dirs = dir_lists(root, ledgers, journals)
    return BookieConfig(
        data_dir=str(root / "unused"), port=0, checkpoint_interval_ms=3_600_000,
        gc_interval_ms=0, journal_prealloc_bytes=64 * 1024, ledger_dirs=ledger_dirs,
        journal_dirs=journal_dirs, **extra)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       f"{ledger_id}/{entry_id}".encode() * 20)


async def _write(bookie: Bookie, ledger_ids, entries: int = 5) -> None:
    for ledger_id in ledger_ids:
        for entry_id in range(entries):
            await bookie.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id), KEY)


async def _read_all(bookie: Bookie, ledger_ids, entries: int = 5) -> None:
    for ledger_id in ledger_ids:
        for entry_id in range(entries):
            assert await bookie.read_entry(ledger_id, entry_id) == _entry(ledger_id, entry_id)


def _journal_ledgers(journal_dir: str) -> set[int]:
    ledgers = set()
    for name in os.listdir(journal_dir):
        if parse_journal_id(name) is not None:
            path = os.path.join(journal_dir, name)
            ledgers |= {r.ledger_id for r in JournalReader(OsDisk(), path).scan()}
    return ledgers


async def test_ledgers_live_in_dir_l_mod_3_and_journal_l_mod_2_and_survive_restart(tmp_path):
    config = _config(tmp_path)
    ledger_ids = range(1, 13)
    bookie = Bookie(config)
    await bookie.start()
    try:
        await _write(bookie, ledger_ids)
        await bookie.checkpoint()
        assert len(bookie.journals) == 2
        for index, unit in enumerate(bookie.storage.units):
            assert set(unit.ledgers.ledger_ids()) == {i for i in ledger_ids if i % 3 == index}
            held = {i for i in ledger_ids if unit.locations.last_entry_id(i) is not None}
            assert held == {i for i in ledger_ids if i % 3 == index}
            assert any(parse_log_id(n) is not None for n in os.listdir(unit.ledger_dir))
            assert {"lastMark.0", "lastMark.1"} <= set(os.listdir(unit.ledger_dir))
    finally:
        await bookie.close()
    for index, journal_dir in enumerate(config.journal_dirs_current):
        assert _journal_ledgers(journal_dir) == {i for i in ledger_ids if i % 2 == index}
    again = Bookie(config)
    await again.start()
    try:
        await _read_all(again, ledger_ids)
        assert [u.ledger_dir for u in again.storage.units] == list(config.ledger_dirs_current)
    finally:
        await again.close()


async def test_a_full_ledger_dir_takes_no_new_ledgers_and_all_full_is_read_only(tmp_path):
    config = _config(tmp_path, disk_check_interval_ms=3_600_000)
    disk = FullDirs()
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        await _write(bookie, [4])                  # 4 mod 3 = 1: in dir 1
        disk.full.add(config.ledger_dirs_current[1])
        bookie.poll_disks()
        assert bookie.state is BookieState.WRITABLE  # two dirs still take ledgers
        await _write(bookie, [7])                  # 7 mod 3 = 1, but dir 1 is full: dir 2
        await bookie.add_entry(4, 5, _entry(4, 5), KEY)  # an old ledger of dir 1 goes on
        units = bookie.storage.units
        assert units[2].ledgers.get(7) is not None and units[1].ledgers.get(7) is None
        placement = bookie.storage.placement  # bookie_ledger_dirs_full, _placed_off_full
        assert placement.full == {1} and placement.moved_by_full == 1
        assert units[1].ledgers.get(4) is not None
        disk.full.update(config.ledger_dirs_current)
        bookie.poll_disks()
        assert bookie.state is BookieState.READ_ONLY and "full" in bookie.readonly_reasons
        with pytest.raises(ReadOnly):
            await bookie.add_entry(10, 0, _entry(10, 0), KEY)
        disk.full.clear()
        bookie.poll_disks()
        assert bookie.state is BookieState.WRITABLE
    finally:
        await bookie.close()
    again = Bookie(config)                         # PL1: ledger 7 is found where it went
    await again.start()
    try:
        await _read_all(again, [7])
        assert again.storage.placement.home(7) == 2 and again.storage.placement.home(4) == 1
        await again.add_entry(7, 5, _entry(7, 5), KEY)
        await again.checkpoint()
        assert again.storage.units[2].locations.last_entry_id(7) == 5
    finally:
        await again.close()


async def test_a_ledger_indexed_without_its_state_is_replayed_into_its_dir(tmp_path):
    """PL1's crash window: ledger 9 went to dir 2 (its dir 0 and dir 1 full), and the
    checkpoint died after its locations batch, before its states batch. At restart nothing
    is full: replay must put the ledger back where its entries are indexed, not in dir 0."""
    config = _config(tmp_path, disk_check_interval_ms=3_600_000)
    disk = FullDirs()
    disk.full.update(config.ledger_dirs_current[:2])
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        await _write(bookie, [9])
        assert bookie.storage.placement.home(9) == 2

        def die(sync=True):
            raise IOFailure("power lost before the states batch")
        bookie.storage.units[2].ledgers.flush = die
        with pytest.raises(IOFailure):
            await bookie.checkpoint()
        assert bookie.storage.units[2].locations.last_entry_id(9) == 4  # indexed, no state
    finally:
        await bookie.close()
        bookie.storage.abandon()
    again = Bookie(config)
    await again.start()
    try:
        units = again.storage.units
        assert units[2].ledgers.get(9) is not None and units[0].ledgers.get(9) is None
        await _read_all(again, [9])
    finally:
        await again.close()


async def test_reordered_journal_dirs_are_refused(tmp_path):
    """Found in review: journal i's lastMark.<i> is read for the dir at place i, so journal
    dirs given in another order were replayed each from the other's mark (journal ids of
    two dirs made at once collide), and acknowledged adds were lost, silently when the
    mark fell on a record boundary."""
    config = _config(tmp_path)
    bookie = Bookie(config)
    await bookie.start()
    await bookie.close()
    swapped = config.replace(journal_dirs=",".join(reversed(config.journal_dirs.split(","))))
    with pytest.raises(IdentityMismatch, match="was journal dir 1 .* now configured as "
                                               "journal dir 0"):
        again = Bookie(swapped)
        try:
            await again.start()
        finally:
            again.storage.close_indexes()


async def test_changing_the_number_of_dirs_is_refused(tmp_path):
    bookie = Bookie(_config(tmp_path))
    await bookie.start()
    await bookie.close()
    for ledgers, journals, what in ((2, 2, "3 ledger dir"), (3, 1, "2 journal dir")):
        with pytest.raises(IdentityMismatch, match=f"created with .*{what}"):
            fewer = Bookie(_config(tmp_path, ledgers=ledgers, journals=journals))
            try:
                await fewer.start()
            finally:
                fewer.storage.close_indexes()


@pytest.mark.timeout(120)
async def test_a_deleted_ledger_s_journal_records_are_skipped_after_kill9(tmp_path):
    """Found by the kill -9 drill with --dirs 3,2: the placement map was loaded from live
    ledgers only, so replay of a deleted ledger's records found no tombstone in any dir and
    the start was refused ("ledger 5 was deleted")."""
    config = _config(tmp_path)
    flags = ("--ledger-dirs", config.ledger_dirs, "--journal-dirs", config.journal_dirs,
             "--checkpoint-interval-ms", "3600000", "--gc-interval-ms", "0")
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, *flags).start()
    try:
        async with BookieClient(daemon.url, admin_token=None) as client:
            for entry_id in range(3):
                await client.add_entry(5, entry_id, _entry(5, entry_id), KEY)
                await client.add_entry(6, entry_id, _entry(6, entry_id), KEY)
            await client.delete_ledger(5)  # a synced tombstone; the records stay journaled
    finally:
        daemon.kill9()
    daemon = Daemon(data_dir, *flags).start()
    try:
        async with BookieClient(daemon.url) as client:
            with pytest.raises(NoLedger):
                await client.read_entry(5, 0)
            assert await client.read_entry(6, 2) == _entry(6, 2)
    finally:
        assert daemon.terminate() == 0


async def test_the_admin_api_answers_for_every_dir(tmp_path):
    """BookKeeper's handlers list every journal's mark (last_log_mark), one GC status per
    ledger dir (gc_details) and the files of every dir (list_disk_file)."""
    async with admin_bookie(_config(tmp_path)) as served:
        await _write(served.bookie, range(1, 7))
        await served.bookie.checkpoint()
        async with aiohttp.ClientSession() as session:
            marks, details, files = [
                (await call(session, f"{served.admin}/api/v1/bookie/{path}")).json()
                for path in ("last_log_mark", "gc_details", "list_disk_file")]
        persisted = served.bookie.persisted_marks
    # One key per journal's mark, in BookKeeper's words. Two journals made in the same
    # millisecond share a journal id (ids are the clock's, as BookKeeper's), and these two
    # took records of the same sizes: the same mark, one key, as BookKeeper's handler gives.
    assert len(persisted) == 2
    assert marks == {f"LastLogMark: Journal Id - {m.journal_id}({m.journal_id:x}.txn)":
                     f"Pos - {m.offset}" for m in persisted}
    assert len(details) == 3
    assert files["entrylog files"].count(".log") >= 3  # a log in each ledger dir
    assert files["journal files"].count(".txn") >= 2   # a journal in each journal dir


async def test_entry_location_compact_compacts_the_named_dir_only(tmp_path):
    """BookKeeper's entry_location_compact with entryLocations compacts the named indexes;
    ours compacted every ledger dir's."""
    async with admin_bookie(_config(tmp_path).replace(admin_token="t")) as served:
        compacted = []
        for index, unit in enumerate(served.bookie.storage.units):
            def compact(index=index, original=unit.locations.compact):
                compacted.append(index)
                original()
            unit.locations.compact = compact
        named = os.path.join(served.bookie.config.ledger_dirs_current[1], "locations")
        async with aiohttp.ClientSession() as session:
            answer = await call(session, f"{served.admin}/api/v1/bookie/entry_location_compact",
                                "PUT", json.dumps({"entryLocationRocksDBCompact": True,
                                                   "entryLocations": named}),
                                Authorization="Bearer t")
            assert answer.status == 200, answer
            await until(lambda: compacted, "the compaction ran")
    assert compacted == [1]


@pytest.mark.parametrize("ledgers", [1, 3])
def test_info_answers_before_the_dirs_are_open(tmp_path, ledgers):
    """/v1/bookie/info is served from the first moment (a probe during start): counting
    ledgers per dir before the indexes were open raised, and the answer was a 500 (caught
    by the daemon probe test in CI)."""
    info = bookie_info(Bookie(_config(tmp_path, ledgers=ledgers)))
    assert info["state"] == "starting" and info["ledgersByDir"] == [0] * ledgers


async def test_a_dir_over_the_warn_threshold_pauses_only_its_own_compaction(tmp_path):
    """G6 per dir (issue 58's review): compaction needs room in the dir it compacts, so a
    dir over the warn threshold pauses its own and no other (BookKeeper's per-dir disk
    listener); before, any one dir over it paused compaction in every dir."""
    config = _config(tmp_path, ledgers=2, journals=1, disk_check_interval_ms=3_600_000,
                     entrylog_max_bytes=64 * 1024, major_compaction_threshold=0.8,
                     major_compaction_interval_ms=1, compaction_rate_bytes=0)
    disk = FullDirs()
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        # ledgers 2, 4 in dir 0 and 3, 5 in dir 1, interleaved by a checkpoint after each
        # block (a flush writes a ledger's cached entries together): every log half dead
        # once 4 and 5 are deleted
        for first in range(0, 1000, 50):
            for ledger_id in (2, 3, 4, 5):
                for entry_id in range(first, first + 50):
                    await bookie.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id),
                                           KEY)
            await bookie.checkpoint()
        await bookie.delete_ledger(4)
        await bookie.delete_ledger(5)
        await bookie.checkpoint()
        disk.full.add(config.ledger_dirs_current[0])  # dir 0 short of room, dir 1 not
        bookie.poll_disks()
        assert bookie.disk_monitor.warn_ledger_dirs() == {0}
        result = await bookie.run_gc()
        zero, one = result.dirs
        assert zero.compaction is None and zero.logs_compacted == []
        assert zero.compaction_skipped == "a data dir is over the disk usage warn threshold"
        assert one.compaction == "major" and one.logs_compacted, one.to_json()
        await _read_all(bookie, [2, 3], entries=1000)
    finally:
        await bookie.close()


async def test_a_crashs_unindexed_leftovers_in_the_dir_a_ledger_left_are_reclaimed(tmp_path):
    """G1 with several dirs (issue 58's review): ledger 9 went to dir 2 (dirs 0 and 1 full),
    and the checkpoint died after appending its entries to dir 2's entry log, before the
    locations batch. At restart nothing is full and no index knows 9: replay puts it in its
    hashed dir 0. Dir 2's log then holds bytes of a ledger that lives elsewhere, which no
    location names; GC must count them dead there and reclaim the log (before, they
    counted as live for ever)."""
    config = _config(tmp_path, disk_check_interval_ms=3_600_000)
    disk = FullDirs()
    disk.full.update(config.ledger_dirs_current[:2])
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        await _write(bookie, [9], entries=50)
        assert bookie.storage.placement.home(9) == 2

        def die(*args, **kwargs):
            raise IOFailure("power lost before the locations batch")
        bookie.storage.units[2].locations.add_batch = die
        with pytest.raises(IOFailure):
            await bookie.checkpoint()
        left = bookie.storage.units[2].entry_logger.current_log_id
    finally:
        await bookie.close()
        bookie.storage.abandon()
    again = Bookie(config)
    await again.start()
    try:
        units = again.storage.units
        assert again.storage.placement.home(9) == 0 and units[2].ledgers.get(9) is None
        await _read_all(again, [9], entries=50)
        assert left in units[2].entry_logger.log_ids()  # the leftovers, rolled at restart
        result = await again.run_gc()
        assert left in result.dirs[2].logs_deleted, result.dirs[2].to_json()
        assert left not in units[2].entry_logger.log_ids()
        await _read_all(again, [9], entries=50)
    finally:
        await again.close()
