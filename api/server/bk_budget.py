"""The binary port's resource budget: what one connection and the whole port may
hold, as the HTTP side's request_bodies_max_bytes and request_body_timeout_ms bound it
(api/server/body_budget.py). docs/bookkeeper-protocol.md §8 states the budget and its
settings; the listener (bk_listener.py, bk_requests.py) applies it.

Invariants:
    PB1. Requests in progress: a connection has at most ``per_connection`` requests other
         than adds begun and not yet answered, the port at most ``max_in_progress``
         (BookKeeper's maxReadsInProgressLimit). A request past either waits, decoded and
         not begun, while its connection stops reading, until a slot frees (BookKeeper turns
         the channel's autoread off likewise). Long polls are PB4's, not counted here.
    PB2. Answer bytes: a connection whose client leaves more than ``connection_buffer``
         bytes of answers unread stops reading and begins no read (BL1); while the port's
         connections hold more than ``answers_max`` bytes of answers, no connection that
         holds unread answers of its own begins a read (one whose client reads is still
         served). Reads already begun still answer, so the port holds at most answers_max
         plus what its requests in progress (PB1) make.
    PB3. Request bytes: bytes read ahead of decoding and the announced length of every
         frame not yet whole are reserved from ``requests_max``; a frame whose reservation
         does not fit waits, its connection not reading, until bytes are freed (first come,
         first served). A frame must come whole within ``frame_timeout_s`` of its start,
         or its connection is closed (refused FRAME CLOSED), freeing its reservation.
    PB4. Long polls: a connection holds at most ``polls_per_connection`` of the bookie's
         max_lac_waiters; more are answered ETOOMANYREQUESTS at once.
    PB5. A lost connection's reads and long polls are cancelled at once (no answer can
         reach it); its adds, fences, LAC writes and forces finish, so that what they
         change is whole, and their answers are dropped.
    PB6. A connection waiting for PB1 or PB2 always has an event that makes it look
         again: a request of its own ending, a slot freed elsewhere, its transport
         resuming writing, its answers leaving for the transport, or, failing all of
         these, a timer (``ANSWERS_RECHECK_S``). Without it a connection whose unread
         answers crossed ``connection_buffer`` below the transport's high-water mark
         waited for ever with its reads undecoded (issue 41: BookKeeper's client timed
         out cold single reads once they outran it).
    PB7. Read bytes: a plain read reserves, before it begins, an allowance for its entry
         (a quarter of the connection's room under ``connection_buffer``, and the port's
         under ``answers_max``, over the reads begun together, within ALLOWANCE_MIN and
         ALLOWANCE_MAX) plus ANSWER_HEAD; as many of a group begin as fit, at least one
         when the connection holds nothing. An entry larger than its allowance is not
         held: it lands as ``Oversize(size)`` (bookie/node/read_queue.py RQ6) and is read
         again at its size once that fits the connection's and the port's room, or at
         once when the connection holds nothing else, so it cannot starve. A reservation
         is released when its answer goes to the transport (PB2 counts it from then) or
         when the connection is lost (PB5). A v2 batch read reserves min(its maxSize, a
         quarter of the room) and its maxSize is cut to that; a first entry larger than
         it is read again so, at its size. Reads that run as tasks: bk_room.py TR1-TR3.
         So a connection's unread answers and
         reservations stay within ``connection_buffer`` plus one entry (at least
         ALLOWANCE_MIN) plus ANSWER_HEAD, and the port's within ``answers_max`` plus that
         one entry per connection that began a read while holding nothing. Before, a
         connection's 500 reads in progress of 1 MiB entries held 500 MiB (issue 53).

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import struct

_I32 = struct.Struct(">i")
#: PB7: what a plain read reserves for its entry, at least and at most (4 KiB: an entry of
#: up to 4092 bytes comes with a point read's first pread, entrylog/reader.py), and for
#: the rest of its answer (a v2 or v3 read answer's own fields, with maxLAC).
ALLOWANCE_MIN = 4 << 10
ALLOWANCE_MAX = 256 << 10
ANSWER_HEAD = 128
#: PB7: the most a v2 batch read reserves (bookie/node/reads.py READ_BATCH_BYTES_MAX).
BATCH_BYTES_MAX = 8 << 20
RESERVE_MIN = ALLOWANCE_MIN + ANSWER_HEAD


@dataclasses.dataclass(frozen=True)
class Limits:
    """The budget's settings (bookie/settings.py: the ``bookie_*`` names in brackets)."""

    per_connection: int = 500           # bookie_max_reads_per_connection
    max_in_progress: int = 1_000        # bookie_max_reads_in_progress
    #: BL1's "the client is not reading": answers buffered past this. asyncio's 64 KiB
    #: default paused reading whenever a busy Java client fell a few thousand answers
    #: behind (each ~35 bytes), which cost v3 runs ~10% (scripts/bench/bench_bookkeeper.py).
    connection_buffer: int = 4 << 20    # bookie_connection_buffer_bytes
    answers_max: int = 256 << 20        # bookie_answer_bytes_max
    requests_max: int = 256 << 20       # bookie_request_bytes_max
    frame_timeout_s: float = 30.0       # bookie_frame_timeout_ms
    polls_per_connection: int = 2_500   # bookie_long_polls_per_connection

    @classmethod
    def of(cls, config) -> "Limits":
        return cls(config.bookie_max_reads_per_connection, config.bookie_max_reads_in_progress,
                   config.bookie_connection_buffer_bytes, config.bookie_answer_bytes_max,
                   config.bookie_request_bytes_max, config.bookie_frame_timeout_ms / 1000,
                   config.bookie_long_polls_per_connection)


class PortBudget:
    """What the whole port holds, and the connections waiting for some of it back."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.in_progress = 0      # PB1: requests begun, not yet answered (long polls aside)
        self.answer_bytes = 0     # PB2: the sum of every connection's ``charged_answers``
        self.read_bytes = 0       # PB7: the sum of every connection's ``read_reserved``
        self.resized_total = 0    # PB7: reads read again at their entry's size (a metric)
        self.request_bytes = 0    # PB3: read ahead plus reserved partial frames
        self.waiting: collections.OrderedDict = collections.OrderedDict()  # connection -> None
        self.peak_request_bytes = 0
        self.peak_in_progress = 0
        self.peak_answer_bytes = 0  # PB7: of answer_bytes + read_bytes
        self.deferred_total = 0   # requests that had to wait for PB1/PB2 (a metric)
        self.adds_held = 0        # adds decoded and waiting to be begun (bk_add_wait.py)
        self.adds_waited_total = 0  # adds that had to wait (a metric)
        self.recheck = None       # the timer of recheck_answers
        self.connections: set = set()  # the listener's own set (for the metrics)

    # -- PB1/PB2 -------------------------------------------------------------------------

    def may_begin(self, connection) -> bool:
        """Whether ``connection`` may begin one more request now (PB1, PB2)."""
        limits = self.limits
        if connection.requests_in_progress >= limits.per_connection \
                or self.in_progress >= limits.max_in_progress or connection.writing_paused:
            return False
        unread = connection.unread_answers()
        if unread > limits.connection_buffer:
            return False
        self.charge_answers(connection, unread)
        held = unread + connection.read_reserved
        if not held:
            return True  # PB7: a connection that holds nothing may always begin one
        if held + RESERVE_MIN > limits.connection_buffer:
            return False
        if self.answer_bytes + self.read_bytes + RESERVE_MIN > limits.answers_max:
            self.recount_answers(connection.listener.connections)  # charges lag drains
            return self.answer_bytes + self.read_bytes + RESERVE_MIN <= limits.answers_max
        return True

    def charge_answers(self, connection, queued: int) -> None:
        """``connection`` now holds ``queued`` bytes of answers its client has not read."""
        self.answer_bytes += queued - connection.charged_answers
        connection.charged_answers = queued
        if self.answer_bytes + self.read_bytes > self.peak_answer_bytes:
            self.peak_answer_bytes = self.answer_bytes + self.read_bytes

    # -- PB7 -----------------------------------------------------------------------------

    def reserve_reads(self, connection, count: int) -> tuple[int, int]:
        """PB7 for ``count`` plain reads that ``may_begin`` let go (``charged_answers``
        is fresh): how many begin and each one's allowance; their reservations are held."""
        limits = self.limits
        room = limits.connection_buffer - connection.charged_answers - connection.read_reserved
        port_room = limits.answers_max - self.answer_bytes - self.read_bytes
        if port_room < room:
            room = port_room
        allowance = room // (count << 2) - ANSWER_HEAD
        if allowance < ALLOWANCE_MIN:
            allowance = ALLOWANCE_MIN
        elif allowance > ALLOWANCE_MAX:
            allowance = ALLOWANCE_MAX
        each = allowance + ANSWER_HEAD
        if count * each > room:
            count = room // each if room >= each else 1  # may_begin: one fits, or nothing held
        self.hold_reads(connection, count * each)
        return count, allowance

    def reserve_batch(self, connection, max_size: int) -> int:
        """PB7 for a v2 batch read ``may_begin`` let go: min(its maxSize, a quarter of the
        room within ALLOWANCE_MIN and BATCH_BYTES_MAX) plus ANSWER_HEAD, held and returned."""
        limits = self.limits
        room = min(limits.connection_buffer - connection.charged_answers
                   - connection.read_reserved,
                   limits.answers_max - self.answer_bytes - self.read_bytes) >> 2
        allowance = min(max(room, ALLOWANCE_MIN), BATCH_BYTES_MAX, max(max_size, 0))
        self.hold_reads(connection, allowance + ANSWER_HEAD)
        return allowance + ANSWER_HEAD

    def hold_reads(self, connection, size: int) -> None:
        connection.read_reserved += size
        self.read_bytes += size
        if self.answer_bytes + self.read_bytes > self.peak_answer_bytes:
            self.peak_answer_bytes = self.answer_bytes + self.read_bytes

    def release_reads(self, connection, size: int) -> None:
        connection.read_reserved -= size
        self.read_bytes -= size

    def reread_fits(self, connection, size: int) -> bool:
        """PB7: whether a read of an entry of ``size`` bytes may be read again now."""
        unread = connection.unread_answers()
        self.charge_answers(connection, unread)
        held = unread + connection.read_reserved
        if not held:
            return True
        limits = self.limits
        if held + size > limits.connection_buffer:
            return False
        if self.answer_bytes + self.read_bytes + size > limits.answers_max:
            self.recount_answers(connection.listener.connections)
            return self.answer_bytes + self.read_bytes + size <= limits.answers_max
        return True

    def recount_answers(self, connections) -> None:
        for connection in connections:
            self.charge_answers(connection, connection.unread_answers())

    # -- PB3 -----------------------------------------------------------------------------

    def reserve(self, size: int) -> bool:
        """Whether ``size`` bytes fit (then they are held); a reservation always fits an
        empty budget, so that a frame larger than it still comes in its turn."""
        if size > 0 and self.request_bytes > 0 \
                and self.request_bytes + size > self.limits.requests_max:
            return False
        self.request_bytes += size
        if self.request_bytes > self.peak_request_bytes:
            self.peak_request_bytes = self.request_bytes
        return True

    def hold(self, size: int) -> None:
        """Bytes already read (read ahead of decoding): held whether or not they fit; past
        the budget their connection stops reading until it has decoded them."""
        self.request_bytes += size
        if self.request_bytes > self.peak_request_bytes:
            self.peak_request_bytes = self.request_bytes

    def release(self, size: int) -> None:
        self.request_bytes -= size

    @property
    def requests_over(self) -> bool:
        return self.request_bytes > self.limits.requests_max

    # -- waiting connections -------------------------------------------------------------

    def wait(self, connection) -> None:
        self.waiting[connection] = None

    def recheck_answers(self, loop, after_s: float) -> None:
        """PB2's bound has no event of its own (a client that reads its answers drains a
        socket buffer silently): one timer for every connection waiting on it."""
        if self.recheck is None:
            self.recheck = loop.call_later(after_s, self._recheck)

    def _recheck(self) -> None:
        self.recheck = None
        self.wake()

    def forget(self, connection) -> None:
        self.waiting.pop(connection, None)

    def wake(self) -> None:
        """Something was freed: let the waiting connections try again, oldest first; each
        that still cannot go waits again (at the back)."""
        for connection in list(self.waiting):
            self.waiting.pop(connection, None)
            connection.budget_freed()


class FramePath:
    """PB3 for one connection (a mixin of ``bk_listener.BkConnection``, as bk_adds.AddPath):
    the reservation and the clock of the frame being collected. Uses the connection's
    ``budget``, ``buffer``, ``transport``, ``frame_*`` fields, ``_flow`` and ``_refuse``."""

    def _frame_collected(self, new_frame: bool) -> None:
        """PB3 after a decode: the reservation and the clock of the frame being collected
        (``new_frame``: the frames decoded ended the one that was being collected)."""
        if new_frame or not self.buffer:
            self.budget.release(self.frame_reserved)
            self.frame_reserved = 0
            self.frame_waiting = False  # the frame that waited came whole from read-ahead
            self._stop_frame_timer()
        if self.buffer and not self.frame_reserved:
            self._reserve_frame()

    def _reserve_frame(self) -> None:
        size = len(self.buffer)
        if size >= 4:
            size = max(size, 4 + _I32.unpack_from(self.buffer, 0)[0])  # BL1 checked it
        if not self.budget.reserve(size):
            self.frame_waiting = True
            self.budget.wait(self)
            self._flow()
            return
        self.frame_reserved = size
        if self.frame_waiting:
            self.frame_waiting = False
            self._flow()
        if self.frame_timer is None:
            self.frame_timer = asyncio.get_running_loop().call_later(
                self.budget.limits.frame_timeout_s, self._frame_late)

    def _frame_late(self) -> None:
        self.frame_timer = None
        if self.buffer and self.transport is not None and not self.transport.is_closing():
            self._refuse(f"a frame did not come whole within "
                         f"{self.budget.limits.frame_timeout_s:g} s")

    def _stop_frame_timer(self) -> None:
        if self.frame_timer is not None:
            self.frame_timer.cancel()
            self.frame_timer = None
