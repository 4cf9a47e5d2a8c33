"""``scrub`` and its engine ``bookie.scrub.Scrubber`` on a real bookie's data dir.

Damage is made by hand in copies: a flipped payload byte (caught by CRC32C and CRC32, not by
MAC or DUMMY, which are counted as framing-only), and index entries pointing nowhere.
"""

from __future__ import annotations

import os

import pytest

from bookie.disk import OsDisk
from bookie.scrub import Scrubber
from entrylog.format import make_location
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex
from tests.shell.shell_support import run

EXPECTED_VERIFIED = 45 + 15 + 5 + 10  # ledgers 1, 2, 5 (CRC32C, CRC32) and 6
EXPECTED_ENTRIES = EXPECTED_VERIFIED + 8 + 8  # and 3 (MAC), 4 (DUMMY)


def _ledger_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "ledgers", "current")


def _scrubber(data_dir: str, **options) -> tuple[Scrubber, EntryLocationIndex,
                                                  LedgerMetadataIndex]:
    ledger_dir = _ledger_dir(data_dir)
    locations = EntryLocationIndex.open(os.path.join(ledger_dir, "locations"), read_only=True)
    ledgers = LedgerMetadataIndex.open(os.path.join(ledger_dir, "ledgers"), read_only=True)
    return Scrubber(OsDisk(), ledger_dir, locations, ledgers, **options), locations, ledgers


def _scrub(data_dir: str, **options):
    scrubber, locations, ledgers = _scrubber(data_dir, **options)
    try:
        return scrubber.run()
    finally:
        locations.close()
        ledgers.close()


def _location_of(data_dir: str, ledger_id: int, entry_id: int) -> int:
    index = EntryLocationIndex.open(os.path.join(_ledger_dir(data_dir), "locations"),
                                    read_only=True)
    try:
        return index.get(ledger_id, entry_id)
    finally:
        index.close()


def _flip(data_dir: str, location: int, at: int) -> tuple[str, int]:
    """Flip a bit ``at`` bytes into the entry at ``location``; (path, size field offset)."""
    path = os.path.join(_ledger_dir(data_dir), f"{location >> 32:x}.log")
    pos = location & 0xFFFFFFFF
    with open(path, "r+b") as handle:
        handle.seek(pos + at)
        byte = handle.read(1)[0]
        handle.seek(pos + at)
        handle.write(bytes([byte ^ 0x10]))
    return path, pos - 4


def _add_locations(data_dir: str, triples) -> None:
    index = EntryLocationIndex.open(os.path.join(_ledger_dir(data_dir), "locations"))
    try:
        index.add_batch(triples)
    finally:
        index.close()


def test_scrub_of_a_healthy_data_dir_is_clean(capsys, bookie_data_dir):
    result = run(capsys, "scrub", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0, result.out
    [summary] = result.of_type("summary")
    assert summary["entries"] == EXPECTED_ENTRIES
    assert summary["verified"] == EXPECTED_VERIFIED
    assert summary["framingOnly"] == {"mac": 8, "dummy": 8}
    assert summary["problems"] == 0 and summary["bytesRead"] > 0
    text = run(capsys, "scrub", "--data-dir", bookie_data_dir)
    assert f"scrub: {EXPECTED_ENTRIES} entries" in text.out and "0 bad" in text.out


@pytest.mark.parametrize("ledger_id", [1, 2, 6], ids=["crc32c", "crc32", "crc32c-replayed"])
def test_a_flipped_payload_byte_is_found_with_file_and_offset(capsys, bookie_data_dir,
                                                              ledger_id):
    location = _location_of(bookie_data_dir, ledger_id, 3)
    path, offset = _flip(bookie_data_dir, location, 200)
    result = run(capsys, "scrub", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert (problem["file"], problem["offset"]) == (path, offset)
    assert (problem["ledgerId"], problem["entryId"]) == (ledger_id, 3)
    assert "digest mismatch: stored" in problem["reason"]
    assert result.of_type("summary")[0]["verified"] == EXPECTED_VERIFIED - 1
    text = run(capsys, "scrub", "--data-dir", bookie_data_dir)
    assert f"PROBLEM {path} offset {offset}: entry {ledger_id}/3:" in text.out


def test_a_flipped_byte_in_a_mac_entry_cannot_be_seen_and_is_counted(capsys, bookie_data_dir):
    _flip(bookie_data_dir, _location_of(bookie_data_dir, 3, 2), 200)
    result = run(capsys, "scrub", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0
    assert result.of_type("summary")[0]["framingOnly"]["mac"] == 8


def test_index_entries_pointing_nowhere_are_each_named(capsys, bookie_data_dir):
    inside = _location_of(bookie_data_dir, 1, 2) + 100  # the middle of an entry
    log_id = inside >> 32
    size = os.path.getsize(os.path.join(_ledger_dir(bookie_data_dir), f"{log_id:x}.log"))
    _add_locations(bookie_data_dir, [
        (1, 1000, inside),
        (1, 1001, make_location(0x77, 2000)),           # no such log
        (1, 1002, make_location(log_id, size + 50)),    # past the end of the file
        (1, 1003, (log_id << 32) | 100),                # inside the header
        (1, 1004, _location_of(bookie_data_dir, 2, 0)),  # another entry
    ])
    result = run(capsys, "scrub", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    problems = {p["entryId"]: p for p in result.of_type("problem")}
    assert set(problems) == {1000, 1001, 1002, 1003, 1004}
    assert problems[1000]["offset"] == (inside & 0xFFFFFFFF) - 4
    assert "below the minimum 16" in problems[1000]["reason"] or \
        "holds entry" in problems[1000]["reason"] or "runs past" in problems[1000]["reason"]
    assert "entry log missing" in problems[1001]["reason"]
    assert problems[1001]["file"].endswith("/77.log")
    assert "past the end of the file" in problems[1002]["reason"]
    assert "inside the 1024-byte header" in problems[1003]["reason"]
    assert "holds entry 2/0, not 1/1004" in problems[1004]["reason"]


def test_small_windows_and_reads_find_the_same(bookie_data_dir):
    """Windows of 7 entries and reads of 1 KiB: entries cross read ends (the slow path)."""
    location = _location_of(bookie_data_dir, 2, 9)
    _flip(bookie_data_dir, location, 50)
    whole = _scrub(bookie_data_dir)
    small = _scrub(bookie_data_dir, window_entries=7, chunk_bytes=1024, tail_bytes=256)
    for report in (whole, small):
        assert report.entries == EXPECTED_ENTRIES
        assert report.verified == EXPECTED_VERIFIED - 1
        assert [(p.ledger_id, p.entry_id, p.location) for p in report.problems] == \
            [(2, 9, location)]
    assert small.ledger_entries == whole.ledger_entries
    assert dict(whole.ledger_entries) == {1: 45, 2: 15, 3: 8, 4: 8, 5: 5, 6: 10}


def test_a_ledger_without_state_is_checked_for_framing_only(bookie_data_dir):
    index = LedgerMetadataIndex.open(os.path.join(_ledger_dir(bookie_data_dir), "ledgers"))
    index.kv.delete(b"\0" * 7 + b"\x06", sync=True)
    index.close()
    report = _scrub(bookie_data_dir)
    assert report.clean and report.framing_only["no-state"] == 10
    assert report.verified == EXPECTED_VERIFIED - 10


def test_the_rate_limit_sleeps_to_the_rate_on_an_injected_clock(bookie_data_dir):
    now = [0.0]
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    report = _scrub(bookie_data_dir, rate_bytes_per_s=10_000, clock=lambda: now[0],
                    sleep=sleep, chunk_bytes=4096, tail_bytes=512)
    assert report.clean and len(sleeps) > 3
    assert now[0] == pytest.approx(report.bytes_read / 10_000)


def test_progress_reports_bytes_and_stop_ends_the_run_early(bookie_data_dir):
    seen = []
    scrubber, locations, ledgers = _scrubber(bookie_data_dir, chunk_bytes=2048,
                                             tail_bytes=512)

    def on_progress(done: int, total: int) -> None:
        seen.append((done, total))
        if len(seen) == 3:
            scrubber.stop()

    scrubber._on_progress = on_progress
    try:
        report = scrubber.run()
    finally:
        locations.close()
        ledgers.close()
    assert report.stopped and len(seen) == 3
    assert seen[-1][0] == report.bytes_read and report.entries > 0
    assert all(a[0] < b[0] and a[1] == b[1] for a, b in zip(seen, seen[1:]))


def test_a_problem_is_not_reported_once_the_index_moved_the_entry(bookie_data_dir):
    """SC2: on a live bookie an entry may move (replay, compaction) during the scrub."""
    location = _location_of(bookie_data_dir, 1, 5)
    _flip(bookie_data_dir, location, 60)

    class MovedIndex:
        def __init__(self, index):
            self.item_windows = index.item_windows
            self._index = index

        def get(self, ledger_id, entry_id):
            return None if (ledger_id, entry_id) == (1, 5) else \
                self._index.get(ledger_id, entry_id)

    scrubber, locations, ledgers = _scrubber(bookie_data_dir)
    scrubber.locations = MovedIndex(locations)
    try:
        assert scrubber.run().clean
    finally:
        locations.close()
        ledgers.close()


def test_scrub_rate_must_be_positive(capsys, bookie_data_dir):
    result = run(capsys, "scrub", "--data-dir", bookie_data_dir, "--rate", "0")
    assert result.code == 2 and "--rate" in result.err
    assert run(capsys, "scrub", "--data-dir", bookie_data_dir, "--rate", "500").code == 0


def test_reads_stop_at_gaps_left_by_other_windows():
    """A window's entries between other windows' entries: each run is read on its own."""
    from bookie.scrub_reads import first_gap as _first_gap

    window = [(position, 0, 0) for position in (1028, 1400, 1800, 90_000, 90_400)]
    assert _first_gap(window, 0, 5, 65536) == 3
    assert _first_gap(window, 3, 5, 65536) == 5
    assert _first_gap(window, 0, 1, 65536) == 1
