"""The writer's add pipeline (BookKeeper's PendingAddOp, for one bookie).

    append ─► queue ─► [frame with the current LAC] ─► PUT or POST batch ─► ack ─┐
      ▲        (unsent)   up to requests_in_flight_max requests at once          │
      └── futures complete in entry order as the LAC passes them ◄───────────────┘

A mixin of ``LedgerWriter`` (``writer.py``, whose invariants L1-L5 it keeps).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from api.client.retry import _retrying
from bookie.errors import BookieError, IOFailure

log = logging.getLogger("api.client.ledger")


@dataclasses.dataclass(slots=True, eq=False)
class _PendingAdd:
    entry_id: int
    payload: bytes | None         # until framed
    size: int                     # payload bytes
    length: int                   # L4
    future: asyncio.Future
    framed: bytes | None = None   # set once, when first sent (L1, L3); dropped once acked
    acked: bool = False


class AddPipeline:
    """Sending queued adds in batches and completing them in entry order."""

    def _has_room(self, size: int) -> bool:
        """Whether one more add fits; a lone add of any size always does."""
        options = self.options
        return not self._unacked or (
            self._unacked < options.adds_in_flight_max
            and self._unacked_bytes + size <= options.adds_in_flight_bytes_max
            and len(self._unresolved) < options.unresolved_factor * options.adds_in_flight_max)

    def _pump(self) -> None:
        """Start requests for queued adds while fewer than the limit are in flight."""
        loop = asyncio.get_running_loop()
        while self._queue and self._error is None \
                and self._sending < self.options.requests_in_flight_max:
            batch = self._take_batch()
            self._sending += 1
            task = loop.create_task(self._send(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take_batch(self) -> list[_PendingAdd]:
        """The oldest queued adds, framed now with the current LAC (L3)."""
        batch, size = [], 0
        while self._queue and len(batch) < self.options.batch_max_entries:
            add = self._queue[0]
            if batch and size + add.size > self.options.batch_max_bytes:
                break
            self._queue.popleft()
            add.framed = self.codec.frame(add.entry_id, self._lac, add.length, add.payload)
            add.payload = None  # retries re-send ``framed`` (L1)
            batch.append(add)
            size += add.size
        self._lac_published = max(self._lac_published, self._lac)
        return batch

    async def _send(self, batch: list[_PendingAdd]) -> None:
        first = batch[0].entry_id
        try:
            await _retrying(lambda: self._post(batch), self.options,
                            stop=lambda: self._error if first >= self._failed_from else None)
        except asyncio.CancelledError:
            raise
        except BookieError as exc:
            self._fail_from(first, exc)
        except Exception as exc:  # a bug or a surprise from the transport: still L5
            self._fail_from(first, IOFailure(f"add of entries {first}.. failed: {exc!r}"))
        else:
            self._acked(batch)
        finally:
            self._sending -= 1
            self._pump()

    async def _post(self, batch: list[_PendingAdd]) -> None:
        codec, dtype = self.codec, self.codec.digest_type.header_name
        deferred = self.options.deferred_sync
        if len(batch) == 1:
            await self._client.add_entry(codec.ledger_id, batch[0].entry_id, batch[0].framed,
                                         codec.master_key, digest_type=dtype,
                                         deferred_sync=deferred)
        else:
            await self._client.add_batch(codec.ledger_id, [a.framed for a in batch],
                                         codec.master_key, digest_type=dtype,
                                         deferred_sync=deferred)

    def _acked(self, batch: list[_PendingAdd]) -> None:
        for add in batch:
            if not add.future.done():  # else failed already (L5) and no longer counted
                add.acked, add.framed = True, None
                self._unacked -= 1
                self._unacked_bytes -= add.size
        self._room.set()
        self._advance()

    def _advance(self) -> None:
        """Complete acknowledged adds in entry order (L2)."""
        progressed = False
        while self._unresolved and self._unresolved[0].acked:
            add = self._unresolved.popleft()
            self._acked_contiguous, self._length_acked = add.entry_id, add.length
            if not self.options.deferred_sync:
                self._lac, self._length_confirmed = add.entry_id, add.length
            if not add.future.done():
                add.future.set_result(add.entry_id)
            progressed = True
        if progressed:
            self._room.set()
            self._arm_lac_timer()

    def _fail_from(self, entry_id: int, exc: BaseException) -> None:
        """L5: fail every unacknowledged add from ``entry_id`` on, and all later appends."""
        if self._error is None:
            self._error = exc
            log.warning("ledger %d writer stopped at entry %d: %s", self.ledger_id, entry_id,
                        exc)
        if self._queue:
            entry_id = min(entry_id, self._queue[0].entry_id)
        self._failed_from = min(self._failed_from, entry_id)
        self._queue.clear()
        while self._unresolved and self._unresolved[-1].entry_id >= self._failed_from:
            add = self._unresolved.pop()
            if not add.acked:
                self._unacked -= 1
                self._unacked_bytes -= add.size
            if not add.future.done():
                add.future.set_exception(self._error)
        self._room.set()  # appenders waiting for room must wake to see the error
