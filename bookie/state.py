"""The bookie's state machine: states, transitions, read-only reasons, the sticky io failure.

Pure: no asyncio, no I/O. ``bookie/node/`` owns one ``NodeState`` and calls it from the
event loop. States (docs/design.md §3.6); each arrow names the function that takes it:

     STARTING
        │ dirs ok [Bookie.start]                  bad dir, missing journal or
        ▼                                         corrupt record: FAILED, exit 1
     REPLAYING
        │ replay and checkpoint done [Bookie.start]
        ▼
     WRITABLE ◄───────────────────────────────┐
        │ operator flag [set_readonly]         │ flag cleared [set_readonly]
        │ disk full [set_readonly]             │ space back [set_readonly]
        │ write/fsync error [fail_io]          │ (reasons full and operator only)
        ▼                                      │
     READ_ONLY(full | operator | io) ──────────┘
        reason io: only a restart leaves it

     REPLAYING, WRITABLE, READ_ONLY ──SIGTERM [Bookie.close]──► STOPPING: drain, checkpoint

Invariants:
    ST1. Only the transitions of ``TRANSITIONS`` happen; any other is a programmer error.
    ST2. ``io`` is sticky: once a durable write failed, no call here clears it (docs/design.md
        §1.5); the first failure's text is kept, later ones only logged by the caller.
    ST3. A privileged write (fence, recovery add, explicit LAC) passes READ_ONLY unless the
        reason is ``io`` or the free space is under the reserve kept for ledger recovery.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable

from bookie.errors import IOFailure, ReadOnly

log = logging.getLogger("bookie.node")

#: Why a bookie is read-only. ``io`` never clears (ST2); the others come and go.
REASONS = ("operator", "full", "io")


class BookieState(enum.Enum):
    STARTING = "starting"
    REPLAYING = "replaying"
    WRITABLE = "writable"
    READ_ONLY = "read_only"
    STOPPING = "stopping"
    FAILED = "failed"


#: Allowed transitions (h11 style); anything else is a programmer error (ST1).
TRANSITIONS = {
    BookieState.STARTING: {BookieState.REPLAYING, BookieState.FAILED, BookieState.STOPPING},
    BookieState.REPLAYING: {BookieState.WRITABLE, BookieState.READ_ONLY, BookieState.FAILED,
                            BookieState.STOPPING},
    BookieState.WRITABLE: {BookieState.READ_ONLY, BookieState.STOPPING},
    BookieState.READ_ONLY: {BookieState.WRITABLE, BookieState.STOPPING},
    BookieState.STOPPING: set(),
    BookieState.FAILED: {BookieState.STOPPING},
}


class NodeState:
    """The state, the read-only reasons and the first failure's text."""

    def __init__(self) -> None:
        self.state = BookieState.STARTING
        self.readonly_reasons: set[str] = set()
        self.failure: str | None = None
        self._listeners: list[Callable[[BookieState], None]] = []

    def add_listener(self, listener: Callable[[BookieState], None]) -> None:
        """Called with the new state after every change of state (a cluster bookie moves
        its registration with it). Listeners must not raise."""
        self._listeners.append(listener)

    def move(self, new: BookieState) -> None:
        assert new in TRANSITIONS[self.state], f"bookie state {self.state} -> {new}"
        if new is not self.state:
            log.info("bookie state %s -> %s%s", self.state.value, new.value,
                     f" ({', '.join(sorted(self.readonly_reasons))})"
                     if new is BookieState.READ_ONLY else "")
        changed, self.state = new is not self.state, new
        if changed:
            for listener in self._listeners:
                listener(new)

    def fail_start(self, exc: BaseException) -> None:
        self.failure = str(exc)
        self.move(BookieState.FAILED)

    def fail_io(self, exc: BaseException) -> bool:
        """ST2: read-only ``io`` until restart. True on the first failure."""
        first = self.failure is None
        if first:
            self.failure = f"I/O error: {exc}"
        self.readonly_reasons.add("io")
        if self.state is BookieState.WRITABLE:
            self.move(BookieState.READ_ONLY)
        return first

    def set_readonly(self, reason: str, on: bool) -> None:
        """Operator flag or disk-full monitor; ``io`` is never cleared here (ST2)."""
        assert reason in ("operator", "full")
        (self.readonly_reasons.add if on else self.readonly_reasons.discard)(reason)
        if self.state not in (BookieState.WRITABLE, BookieState.READ_ONLY):
            return
        target = BookieState.READ_ONLY if self.readonly_reasons else BookieState.WRITABLE
        if target is not self.state:
            self.move(target)

    def serving_after_replay(self) -> None:
        """Replay done: WRITABLE, or READ_ONLY if a reason is already set (flag, full)."""
        self.move(BookieState.READ_ONLY if self.readonly_reasons else BookieState.WRITABLE)

    @property
    def ready(self) -> bool:
        return self.state is BookieState.WRITABLE

    @property
    def failed_io(self) -> bool:
        return "io" in self.readonly_reasons

    def check_not_failed_io(self) -> None:
        if self.failed_io:
            raise IOFailure(f"bookie is read-only after an I/O error: {self.failure}")

    def check_writable(self, privileged: bool, free_bytes: Callable[[], int | None],
                       reserved_bytes: int) -> None:
        """ST3: fences, recovery adds and explicit LACs pass a read-only state unless it is
        io, or the free space is under ``reserved_bytes`` (``free_bytes``: None if unknown)."""
        if self.state is BookieState.WRITABLE:
            return
        if self.state is BookieState.READ_ONLY and privileged and not self.failed_io:
            free = free_bytes()
            if free is None or free >= reserved_bytes:
                return
            raise ReadOnly(f"bookie is read-only and only {free} bytes are free, below the "
                           f"{reserved_bytes} reserved for ledger recovery")
        reason = ", ".join(sorted(self.readonly_reasons)) or self.state.value
        if self.state is BookieState.READ_ONLY:
            self.check_not_failed_io()
        raise ReadOnly(f"bookie is not writable ({reason})")

    def check_serving(self) -> None:
        if self.state in (BookieState.STARTING, BookieState.REPLAYING):
            raise ReadOnly("bookie is replaying its journal")
        if self.state is BookieState.FAILED:
            raise IOFailure(f"bookie failed to start: {self.failure}")
