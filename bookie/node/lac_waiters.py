"""LAC long polls: ``GET lac?wait_for_gt=N`` waits until a durable record raises the LAC.

The LAC rises only on the completion of a durable record (N4), so a waiter woken here never
sees a LAC a crash could take back.
"""

from __future__ import annotations

import asyncio

from bookie.errors import TooManyRequests
from bookie.state import BookieState


class LacWaiters:
    """Mixin of ``Bookie``: reading the LAC, long polls, and raising it."""

    async def read_lac(self, ledger_id: int, wait_for_gt: int | None = None,
                       timeout_ms: int = 0) -> int:
        """The LAC (N4); with ``wait_for_gt`` long-poll until it passes it or time runs out."""
        runtime = self._lac_runtime(ledger_id)
        if wait_for_gt is None or runtime.lac > wait_for_gt or timeout_ms <= 0 \
                or self.state is BookieState.STOPPING:
            return runtime.lac
        if self._lac_waiters >= self.config.max_lac_waiters:
            raise TooManyRequests(f"{self._lac_waiters} LAC long polls are waiting already")
        future = self._loop.create_future()
        runtime.waiters.append((wait_for_gt, future))
        self._lac_waiters += 1
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            pass
        finally:
            self._lac_waiters -= 1
            runtime.waiters = [w for w in runtime.waiters if w[1] is not future]
        return runtime.lac

    def lac_now(self, ledger_id: int) -> int:
        """``read_lac`` without a wait or a coroutine (the listener's plain reads, BK7)."""
        return self._lac_runtime(ledger_id).lac

    def _lac_runtime(self, ledger_id: int):
        self._check_serving()
        self._existing_state(ledger_id)
        return self._runtime_of(ledger_id)

    def _raise_lac(self, ledger_id: int, lac: int) -> None:
        runtime = self._runtime.get(ledger_id)
        if runtime is None or lac <= runtime.lac:
            return
        runtime.lac = lac
        if runtime.waiters:
            still = []
            for gt, future in runtime.waiters:
                if lac > gt:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((gt, future))
            runtime.waiters = still

    def _release_waiters(self, runtime) -> None:
        """Answer every long poll of a ledger now (shutdown, deletion)."""
        for _gt, future in runtime.waiters:
            if not future.done():
                future.set_result(None)
        runtime.waiters.clear()
