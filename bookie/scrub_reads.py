"""Scrub's reads: planned ranges of entry logs, coalesced and read ahead on a thread.

``bookie/scrub.py`` plans one ``ScrubRead`` per run of nearby entries of a log and checks what
``ReadAhead`` hands back; the reads are the only I/O of a scrub and are read-only (SC1).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import operator
import queue
import threading
from typing import TYPE_CHECKING, Iterator

from bookie.disk import will_need

if TYPE_CHECKING:
    from bookie.disk import Disk
    from bookie.scrub_report import ScrubReport
    from ledgerindex.locations import EntryLocationIndex

#: Reads the kernel is asked to start (posix_fadvise WILLNEED) beyond the one being made.
HINT_AHEAD_READS = 4
_FIRST = operator.itemgetter(0)
_DONE = object()


@dataclasses.dataclass(frozen=True, slots=True)
class ScrubRead:
    """One planned read: ``length`` bytes of ``path`` at ``start``, for window[first:last].

    ``log_base`` is the log id shifted into a location's high 32 bits.
    """

    log_base: int
    path: str
    start: int
    length: int
    first: int
    last: int
    file_size: int


def first_gap(window, first: int, last: int, gap_bytes: int) -> int:
    """The end of window[first:last]'s leading run without a gap above ``gap_bytes``.

    When the index does not fit one window, a window's entries sit between other windows'
    entries in the logs; a read must skip those, not read through them. Done with C-level
    iterators (~0.04 µs an entry) since it runs over every entry.
    """
    locations = list(map(_FIRST, window[first:last]))
    wide = map(operator.gt, map(operator.sub, locations[1:], locations[:-1]),
               itertools.repeat(gap_bytes))
    return first + next(itertools.compress(itertools.count(1), wide), last - first)


class ReadAhead:
    """Reads planned ranges in order on its own thread, at most ``depth`` ahead of use.

    Iterating yields (read, bytes) or (read, OSError). Leaving the ``with`` block stops the
    thread after its current read and joins it.
    """

    def __init__(self, disk: "Disk", reads: list[ScrubRead], depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stopping = threading.Event()
        self._finished = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(disk, reads),
                                        name="scrub-read", daemon=True)
        self._thread.start()

    def _run(self, disk: "Disk", reads: list[ScrubRead]) -> None:
        path, handle, failure = None, None, None
        try:
            for index, read in enumerate(reads):
                if self._stopping.is_set():
                    break
                if read.path != path:
                    if handle is not None:
                        handle.close()
                    path, handle, failure = read.path, None, None
                    try:
                        handle = disk.open(path)
                    except OSError as exc:
                        failure = exc
                data = failure
                if handle is not None:
                    ahead = reads[index + HINT_AHEAD_READS:index + HINT_AHEAD_READS + 1]
                    if ahead and ahead[0].path == path:
                        will_need(handle, ahead[0].start, ahead[0].length)
                    try:
                        data = handle.read_at(read.start, read.length)
                    except OSError as exc:
                        data = exc
                self._queue.put((read, data))
        except BaseException as exc:  # a bug, not an I/O error: re-raised on the scrub thread
            self._error = exc
        finally:
            if handle is not None:
                handle.close()
            self._queue.put(_DONE)

    def __iter__(self):
        while True:
            item = self._queue.get()
            if item is _DONE:
                self._finished = True
                if self._error is not None:
                    raise self._error
                return
            yield item

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        while not self._finished:  # unblock a put, then wait for the thread's last word
            self._finished = self._queue.get() is _DONE
        self._thread.join()


def index_windows(locations: "EntryLocationIndex", size: int,
             report: "ScrubReport") -> Iterator[list[tuple[int, int, int]]]:
    """Windows of (location, ledgerId, entryId) sorted by location (SC3).

    Decoded in bulk by the index (``item_windows``). Location 0 is "absent" (docs/formats.md
    §7.1): skipped.
    """
    for ledger_ids, entry_ids, locations_ in locations.item_windows(size):
        report.ledger_entries.update(ledger_ids)
        window = sorted(zip(locations_, ledger_ids, entry_ids))
        del ledger_ids, entry_ids, locations_
        # Negative locations stay, to be reported; zeros are "absent" and go.
        zeros = bisect.bisect_left(window, (0,))
        absent = bisect.bisect_left(window, (1,), zeros)
        if absent > zeros:
            report.ledger_entries.subtract(lid for _, lid, _ in window[zeros:absent])
            report.ledger_entries += collections.Counter()  # drops the zero counts
            del window[zeros:absent]
        yield window
