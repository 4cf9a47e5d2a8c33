"""A virtual-time asyncio event loop: no real I/O, no real clock, no threads.

``time()`` is a number the loop owns. The selector never blocks: when the loop would wait
``timeout`` seconds for I/O, there is none, so virtual time jumps straight to the next timer.
``asyncio.sleep``, ``asyncio.wait_for`` and every ``call_later`` therefore run instantly and
in one total order, and ``run_in_executor`` (so ``asyncio.to_thread``) runs the function
inline and hands back a done future, so code that hops to a thread stays on the one loop.

Invariants:
    VL1. Time never goes back, and advances only when no callback is ready.
    VL2. Two runs of the same program give the same order of callbacks: the ready queue is
         FIFO and timers with equal deadlines fire in the order they were scheduled.
    VL3. A loop with nothing ready and no timer is stuck forever (a deadlock in the program
         under test): ``select`` raises ``Stuck`` instead of waiting for an I/O that cannot
         come. So does a loop whose virtual time passes ``deadline`` (a livelock: retries
         that never end still cost real time per virtual step).
"""

from __future__ import annotations

import asyncio
import selectors


class Stuck(RuntimeError):
    """VL3: every task waits and no timer is left to wake one."""


class _VirtualSelector(selectors.BaseSelector):
    """Never waits: a select with a timeout is the passing of that much virtual time."""

    def __init__(self, loop: "VirtualTimeLoop") -> None:
        self._loop = loop
        self._map: dict = {}

    def register(self, fileobj, events, data=None):
        raise NotImplementedError("the virtual-time loop has no file descriptors")

    def unregister(self, fileobj):
        raise KeyError(fileobj)

    def select(self, timeout=None):
        if timeout is None:
            if not self._loop._ready:
                raise Stuck("no ready callback and no timer: every task waits forever")
        elif timeout > 0:
            self._loop._now += timeout  # VL1
            if self._loop._now > self._loop.deadline:
                raise Stuck(f"virtual time passed the deadline {self._loop.deadline} s")
        return []

    def close(self) -> None:
        pass

    def get_map(self):
        return self._map


class VirtualTimeLoop(asyncio.BaseEventLoop):
    """See the module docstring. Use ``run_until_complete``; never share it with threads."""

    def __init__(self, start: float = 0.0, deadline: float = float("inf")) -> None:
        super().__init__()
        self._now = float(start)
        self.deadline = deadline
        self._selector = _VirtualSelector(self)
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    # BaseEventLoop's I/O hooks: there is no I/O.
    def _process_events(self, event_list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # call_soon_threadsafe from this very thread: nothing to wake

    def run_in_executor(self, executor, func, *args):
        """Run inline (no thread, no nondeterminism); a done future with its outcome."""
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # noqa: BLE001 - the caller awaits it and sees it
            future.set_exception(exc)
        return future

    def close(self) -> None:
        self._ready.clear()
        self._scheduled.clear()
        super().close()


def run(coroutine, start: float = 0.0):
    """``asyncio.run`` on a fresh virtual-time loop: the coroutine's result."""
    loop = VirtualTimeLoop(start)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coroutine)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
