"""entrylog/entry_logger.py: the active log, rolls, point reads, concurrency."""

from __future__ import annotations

import threading

import pytest

from bookie.disk import OsDisk
from bookie.errors import BadRequest, IOFailure, TooLarge
from entrylog import format as fmt
from entrylog.entry_logger import EntryLogger
from entrylog.reader import EntryLogReader
from tests.support.small_fs import open_files_under
from tests.unit.entrylog.entrylog_support import RecordingDisk, make_entry


def opened(tmp_path, disk=None, **kwargs) -> EntryLogger:
    logger = EntryLogger(disk or OsDisk(), str(tmp_path), **kwargs)
    logger.open()
    return logger


def header_of(path) -> fmt.LogHeader:
    return fmt.decode_header(open(path, "rb").read(1024))


def test_open_creates_no_log_until_the_first_add(tmp_path):
    logger = opened(tmp_path)
    assert logger.current_log_id is None and logger.log_ids() == []
    location = logger.add_entry(1, make_entry(1, 0))
    assert logger.current_log_id == 0 and location == 1028
    assert logger.log_ids() == [0]
    logger.close()


def test_last_id_is_durable_before_the_log_is_created(tmp_path):
    disk = RecordingDisk()
    logger = opened(tmp_path, disk=disk)
    logger.add_entry(1, make_entry(1, 0))
    names = [event[:2] for event in disk.events]
    assert names.index(("rename", "lastId.tmp")) < names.index(("create", "0.log"))
    assert disk.events.index(("fsync_dir",)) < names.index(("create", "0.log"))
    logger.close()


def test_flushed_entries_read_back_from_the_active_log(tmp_path):
    logger = opened(tmp_path)
    entries = [make_entry(7, i, b"e%d" % i) for i in range(20)]
    locations = [logger.add_entry(7, entry) for entry in entries]
    logger.flush()
    for entry_id, (location, entry) in enumerate(zip(locations, entries)):
        assert logger.read_entry(location, 7, entry_id) == entry
    logger.close()


def test_unflushed_location_of_the_active_log_is_refused(tmp_path):
    logger = opened(tmp_path)
    location = logger.add_entry(7, make_entry(7, 0))
    with pytest.raises(IOFailure, match="not written yet"):
        logger.read_entry(location, 7, 0)
    logger.flush()
    assert logger.read_entry(location, 7, 0) == make_entry(7, 0)
    logger.close()


def test_wrong_entry_at_a_location_is_an_io_failure(tmp_path):
    logger = opened(tmp_path)
    location = logger.add_entry(7, make_entry(7, 0))
    logger.flush()
    with pytest.raises(IOFailure, match="wrong entry"):
        logger.read_entry(location, 7, 1)
    with pytest.raises(IOFailure, match="wrong entry"):
        logger.read_entry(location, 8, 0)
    logger.close()


def test_roll_finalizes_the_old_log_before_creating_the_next(tmp_path):
    disk = RecordingDisk()
    finalized = []
    logger = opened(tmp_path, disk=disk, max_bytes=1024 + 3 * 45,
                    on_log_finalized=lambda log_id, totals: finalized.append((log_id, totals)))
    locations = [logger.add_entry(1 + i % 2, make_entry(1 + i % 2, i)) for i in range(4)]
    assert [location >> 32 for location in locations] == [0, 0, 0, 1]
    assert finalized == [(0, {1: 90, 2: 45})]
    # EL1: the header patch and its fsync come before 1.log exists.
    header_fsync = disk.events.index(("write", "0.log", 8, 12)) + 1
    assert disk.events[header_fsync] == ("fsync", "0.log")
    assert header_fsync < disk.events.index(("create", "1.log"))
    assert header_of(tmp_path / "0.log") == fmt.LogHeader(b"BKLO", 1, 1024 + 135, 2)
    logger.flush()
    for i, location in enumerate(locations):
        assert logger.read_entry(location, 1 + i % 2, i) == make_entry(1 + i % 2, i)
    logger.close()
    assert finalized[1] == (1, {2: 45})


def test_entry_larger_than_the_limit_goes_into_an_empty_log(tmp_path):
    logger = opened(tmp_path, max_bytes=1100)
    big = make_entry(1, 0, b"b" * 200)
    assert logger.add_entry(1, big) >> 32 == 0
    assert logger.add_entry(1, make_entry(1, 1)) >> 32 == 1
    logger.close()
    assert logger.log_ids() == [0, 1]


def test_close_finalizes_the_active_log(tmp_path):
    finalized = []
    logger = opened(tmp_path, on_log_finalized=lambda *args: finalized.append(args))
    logger.add_entry(3, make_entry(3, 0))
    logger.close()
    assert finalized == [(0, {3: 45})]
    with EntryLogReader(OsDisk(), str(tmp_path / "0.log")) as reader:
        assert reader.ledger_totals() == ({3: 45}, "ledgersMap")


def test_abandon_closes_every_handle_and_writes_nothing(tmp_path):
    disk = RecordingDisk()
    logger = opened(tmp_path, disk=disk)
    locations = [logger.add_entry(3, make_entry(3, i)) for i in range(3)]
    logger.flush()
    assert logger.read_entry(locations[0], 3, 0) == make_entry(3, 0)  # opens a read handle
    events = len(disk.events)
    logger.abandon()
    assert disk.events[events:] == []  # no trailer, no header patch, no sync (A5)
    assert open_files_under(str(tmp_path)) == []
    assert logger.current_log_id is None
    assert header_of(tmp_path / "0.log").map_offset == 0  # still scanned when read (E2)


def test_close_without_adds_leaves_nothing(tmp_path):
    logger = opened(tmp_path)
    logger.close()
    assert logger.log_ids() == []


def test_a_restart_never_appends_to_an_old_log(tmp_path):
    for round_number in range(3):
        logger = opened(tmp_path)
        location = logger.add_entry(1, make_entry(1, round_number))
        assert location >> 32 == round_number
        logger.close()
    assert EntryLogger(OsDisk(), str(tmp_path)).log_ids() == [0, 1, 2]


def test_a_restart_after_a_crash_starts_a_new_log(tmp_path):
    logger = opened(tmp_path)
    logger.add_entry(1, make_entry(1, 0))
    logger.flush()  # no close: the process dies with 0.log active
    again = opened(tmp_path)
    assert again.add_entry(1, make_entry(1, 1)) >> 32 == 1
    again.flush()
    assert again.read_entry(1028, 1, 0) == make_entry(1, 0)
    again.close()
    assert header_of(tmp_path / "0.log").map_offset == 0


def test_open_deletes_crash_leftovers(tmp_path):
    (tmp_path / "4.log.compacting").write_bytes(b"partial")
    (tmp_path / "lastId.tmp").write_bytes(b"9")
    (tmp_path / "3.log").write_bytes(fmt.encode_header())
    (tmp_path / "VERSION").write_bytes(b"cookie")
    logger = opened(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3.log", "VERSION"]
    # 4 was free again once the leftover went; lastId then records it.
    assert logger.add_entry(1, make_entry(1, 0)) >> 32 == 4
    logger.close()


def test_log_ids_lists_only_logs(tmp_path):
    for name in ("a.log", "2.log", "10.log", "3.txn", "5.log.compacting", "lastId"):
        (tmp_path / name).write_bytes(b"")
    assert EntryLogger(OsDisk(), str(tmp_path)).log_ids() == [2, 0xA, 0x10]


def test_missing_log_is_an_io_failure_naming_it(tmp_path):
    logger = opened(tmp_path)
    with pytest.raises(IOFailure, match="2a.log is missing"):
        logger.read_entry(fmt.make_location(0x2A, 1028), 1, 0)
    logger.close()


def test_entry_sizes_are_checked(tmp_path):
    logger = opened(tmp_path, max_entry_size=100)
    with pytest.raises(BadRequest):
        logger.add_entry(1, b"\x00" * 15)
    with pytest.raises(TooLarge):
        logger.add_entry(1, make_entry(1, 0, b"t" * 80))
    assert logger.current_log_id is None
    logger.close()


def test_log_size_limit_is_at_most_1_gib(tmp_path):
    with pytest.raises(ValueError):
        EntryLogger(OsDisk(), str(tmp_path), max_bytes=2**30 + 1)


def test_read_handles_are_bounded(tmp_path):
    logger = opened(tmp_path, max_bytes=1024 + 45, read_handles_max=2)
    locations = [logger.add_entry(1, make_entry(1, i)) for i in range(6)]
    logger.flush()
    assert len({location >> 32 for location in locations}) == 6
    for _ in range(3):
        for i, location in enumerate(locations):
            assert logger.read_entry(location, 1, i) == make_entry(1, i)
            assert len(logger._readers) <= 2
    logger.close()


def test_delete_log_drops_its_handle_and_file(tmp_path):
    logger = opened(tmp_path, max_bytes=1024 + 45)
    first = logger.add_entry(1, make_entry(1, 0))
    logger.add_entry(1, make_entry(1, 1))
    logger.flush()
    assert logger.read_entry(first, 1, 0) == make_entry(1, 0)
    logger.delete_log(0)
    assert logger.log_ids() == [1]
    with pytest.raises(IOFailure, match="missing"):
        logger.read_entry(first, 1, 0)
    with pytest.raises(ValueError):
        logger.delete_log(1)
    logger.close()


def test_io_failure_makes_every_later_write_fail(tmp_path):
    disk = RecordingDisk(fail_on="fdatasync")
    logger = opened(tmp_path, disk=disk)
    logger.add_entry(1, make_entry(1, 0))
    with pytest.raises(IOFailure, match="injected"):
        logger.flush()
    calls = dict(disk.calls)
    with pytest.raises(IOFailure, match="failed earlier"):
        logger.add_entry(1, make_entry(1, 1))
    with pytest.raises(IOFailure, match="failed earlier"):
        logger.flush()
    logger.close()
    assert disk.calls == calls  # A5: nothing retried, not even at close


def test_reads_from_two_threads_while_the_writer_appends_and_rolls(tmp_path):
    logger = opened(tmp_path, max_bytes=1024 + 40 * 60, read_handles_max=3)
    published: list[tuple[int, int, bytes]] = []
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0, 0]

    def read_loop(slot: int) -> None:
        try:
            while not done.is_set() or reads[slot] < len(published):
                count = len(published)
                for location, entry_id, entry in published[:count]:
                    assert logger.read_entry(location, 5, entry_id) == entry
                reads[slot] = count
        except BaseException as err:  # noqa: BLE001 - reported to the main thread
            errors.append(err)

    threads = [threading.Thread(target=read_loop, args=(slot,)) for slot in range(2)]
    for thread in threads:
        thread.start()
    batch = []
    for entry_id in range(600):
        entry = make_entry(5, entry_id, b"%d" % entry_id * 5)
        batch.append((logger.add_entry(5, entry), entry_id, entry))
        if entry_id % 25 == 24:
            logger.flush()  # R1: locations are published only once durable
            published.extend(batch)
            batch.clear()
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    logger.close()
    assert errors == []
    assert reads == [600, 600]
    assert len(logger.log_ids()) > 10


class _ReadDuringUnlink(OsDisk):
    """Reads the doomed log at the moment its name is removed: the window of issue 13
    bug 6. Where delete holds the handle lock (the fix), the read must wait for the delete,
    so it runs on a thread that the test joins afterwards."""

    def __init__(self) -> None:
        self.logger = self.location = None
        self.reader: threading.Thread | None = None
        self.outcome: list = []

    def _read(self) -> None:
        try:
            self.outcome.append(self.logger.read_entry(self.location, 1, 0))
        except IOFailure as error:
            self.outcome.append(error)

    def unlink(self, path: str) -> None:
        if path.endswith("0.log"):
            if self.logger._lock.locked():
                self.reader = threading.Thread(target=self._read)
                self.reader.start()
            else:
                self._read()
        super().unlink(path)


def test_a_read_racing_delete_log_caches_no_handle_to_the_deleted_file(tmp_path):
    disk = _ReadDuringUnlink()
    logger = opened(tmp_path, disk=disk, max_bytes=1024 + 45)
    disk.logger, disk.location = logger, logger.add_entry(1, make_entry(1, 0))
    logger.add_entry(1, make_entry(1, 1))
    logger.flush()
    logger.delete_log(0)
    if disk.reader is not None:
        disk.reader.join(timeout=30)
    assert len(disk.outcome) == 1
    assert 0 not in logger._readers
    assert [f for f in open_files_under(str(tmp_path)) if f.endswith("/0.log")] == []
    logger.close()


def test_add_run_gives_the_locations_and_bytes_add_entry_would_rolls_included(tmp_path):
    """A checkpoint appends a ledger's sorted run at once (issue 18): the same locations,
    the same rolls (EL1: never an empty log; a big first entry still fits) and the same
    files as one add_entry per entry."""
    runs = [(1, [make_entry(1, e, b"p" * (100 + 37 * e)) for e in range(40)]),
            (2, [make_entry(2, 0, b"q" * 5000)]),  # bigger than a log's room: its own log
            (3, [make_entry(3, e, b"r" * 500) for e in range(9)])]
    for name in ("one", "run", "bad"):
        (tmp_path / name).mkdir()
    one, run = opened(tmp_path / "one", max_bytes=4096), opened(tmp_path / "run", max_bytes=4096)
    one_locations = [one.add_entry(ledger, entry) for ledger, entries in runs
                     for entry in entries]
    run_locations = [loc for ledger, entries in runs for loc in run.add_run(ledger, entries)]
    assert run_locations == one_locations
    assert len({loc >> 32 for loc in run_locations}) > 3  # it rolled, mid-run too
    one.close()
    run.close()
    for log_id in one.log_ids():
        name = fmt.log_file_name(log_id)
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
    with pytest.raises(BadRequest):
        opened(tmp_path / "bad").add_run(1, [b"short"])
