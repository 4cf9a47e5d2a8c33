"""A replicated writer's pipeline to one bookie (api/client/ensemble_writer.py): the entries
bound for it, sent as batches, a few in flight at once; entries that arrive while batches
fly form the next batch."""

from __future__ import annotations

import asyncio

#: A writer's per-bookie pipeline: entries sent in one POST batch, batches in flight at once.
BATCH_ENTRIES_MAX = 256
BATCHES_IN_FLIGHT_MAX = 4


class BookieQueue:
    """Entries bound for one bookie: sent as POST batches, a few in flight at once (the
    per-bookie pipeline); entries that arrive while batches fly form the next batch."""

    def __init__(self, writer: "EnsembleWriter", bookie_id: str) -> None:
        self.writer, self.bookie_id = writer, bookie_id
        self.waiting: list[tuple["_Pending", int]] = []
        self.in_flight = 0
        self._woken = False

    def put(self, pending: "_Pending", index: int) -> None:
        self.waiting.append((pending, index))
        self.wake()

    def wake(self) -> None:
        """Pump at the end of this turn of the loop, not now: every append made in the same
        turn (the tasks one completion woke, an append_many) goes in one batch instead of
        the first of them taking a free slot alone."""
        if not self._woken:
            self._woken = True
            asyncio.get_running_loop().call_soon(self._pump_woken)

    def _pump_woken(self) -> None:
        self._woken = False
        self.pump()

    def pump(self) -> None:
        while self.waiting and self.in_flight < BATCHES_IN_FLIGHT_MAX:
            batch = self.waiting[:BATCH_ENTRIES_MAX]
            del self.waiting[:BATCH_ENTRIES_MAX]
            self.in_flight += 1
            self.writer._spawn(self._send(batch))

    async def _send(self, batch) -> None:
        try:
            await self.writer._send_batch(self.bookie_id, batch)
        finally:
            self.in_flight -= 1
            self.pump()


