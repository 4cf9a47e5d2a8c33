"""The explicit LAC of a replicated writer (BookKeeper's explicitLacInterval,
ExplicitLacFlushPolicy): when the LAC has risen and no add in flight will carry it, it is
written to every bookie of the ensemble after ``interval_ms``, so a tailing reader sees the
last entries of a ledger whose writer went idle. Off (0) by default, as in BookKeeper.

Invariant:
    EL1. An explicit LAC is only ever a LAC the writer reached (every entry up to it
         acknowledged by Qa bookies, and forced on a deferred-sync ledger), and is sent only
         while nothing is pending: an entry in flight carries the LAC itself. A bookie that
         does not take it is logged, never a failure of the writer: the next add, the next
         timer or the close carries the LAC again.
"""

from __future__ import annotations

import asyncio
import logging

from api.client.bookies import BOOKIE_FAILURES
from bookie.errors import BookieError

log = logging.getLogger("api.client.ensemble")


class ExplicitLac:
    def __init__(self, writer, interval_ms: int) -> None:
        self.writer, self.interval_ms = writer, interval_ms
        self.published = -1
        self._timer: asyncio.TimerHandle | None = None

    def risen(self) -> None:
        """The writer's LAC rose: publish it within the interval unless an add carries it."""
        if self.interval_ms and self._timer is None and self.writer.lac > self.published:
            self._timer = asyncio.get_running_loop().call_later(self.interval_ms / 1000,
                                                                self._due)

    def _due(self) -> None:
        self._timer = None
        writer = self.writer
        if writer._error is None and writer._closing is None and not writer._pending \
                and writer.lac > self.published:  # EL1
            writer._spawn(self._publish(writer.lac))

    async def _publish(self, lac: int) -> None:
        writer = self.writer
        body = writer.codec.lac_body(lac)

        async def one(bookie_id: str) -> bool:
            try:
                await asyncio.wait_for(writer.bk.client(bookie_id).write_lac(
                    writer.ledger_id, writer.codec.master_key, body), writer.bk.add_timeout_s)
                return True
            except (BookieError, *BOOKIE_FAILURES) as exc:
                log.warning("ledger %d: explicit LAC %d not written on %s: %s",
                            writer.ledger_id, lac, bookie_id, exc)
                return False
        if any(await asyncio.gather(*(one(b) for b in dict.fromkeys(writer.ensemble)))):
            self.published = max(self.published, lac)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
