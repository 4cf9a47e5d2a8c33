"""Appending to a replicated ledger (docs/cluster.md §3): each entry to its Qw bookies in
per-bookie POST batches, acknowledged at Qa in entry order, a failed bookie replaced by an
ensemble change committed before any affected entry is acknowledged (EN1-EN3, EN5 in
api/client/ensemble.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from api.client.bookies import BOOKIE_FAILURES, Bookies
from api.client.codec import LedgerCodec
from api.client.distribution import AckSet, segment_for, with_segment, write_set
from api.client.ensemble_errors import LedgerClosed, NotEnoughBookies
from api.client.metadata import BadVersion, LedgerMetadata, MetadataState
from bookie.errors import BookieError, Fenced, IOFailure


log = logging.getLogger("api.client.ensemble")

#: A writer's per-bookie pipeline: entries sent in one POST batch, batches in flight at once.
BATCH_ENTRIES_MAX = 64
BATCHES_IN_FLIGHT_MAX = 4


class _BookieQueue:
    """Entries bound for one bookie: sent as POST batches, a few in flight at once (the
    per-bookie pipeline); entries that arrive while batches fly form the next batch."""

    def __init__(self, writer: "EnsembleWriter", bookie_id: str) -> None:
        self.writer, self.bookie_id = writer, bookie_id
        self.waiting: list[tuple["_Pending", int]] = []
        self.in_flight = 0

    def put(self, pending: "_Pending", index: int) -> None:
        self.waiting.append((pending, index))
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


@dataclasses.dataclass(eq=False)
class _Pending:
    entry_id: int
    data: bytes
    acks: AckSet
    future: asyncio.Future
    length: int


class EnsembleWriter:
    """Appends to one replicated ledger. One event loop; any number of its tasks may append."""

    def __init__(self, bk: Bookies, metadata: LedgerMetadata, codec: LedgerCodec) -> None:
        self.bk, self.metadata, self.codec = bk, metadata, codec
        self.ledger_id = metadata.ledger_id
        self.lac = -1
        self.length = 0
        self._next = 0
        self._pending: dict[int, _Pending] = {}
        self._changing: asyncio.Lock = asyncio.Lock()
        self._blocked = 0  # > 0 while an ensemble change is being committed (EN1)
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task] = set()
        self._queues: dict[str, _BookieQueue] = {}
        self._closing: asyncio.Future | None = None  # set by the first close() (EN5)

    def _queue(self, bookie_id: str) -> _BookieQueue:
        if bookie_id not in self._queues:
            self._queues[bookie_id] = _BookieQueue(self, bookie_id)
        return self._queues[bookie_id]

    def _send(self, pending: "_Pending", index: int) -> None:
        bookie_id = segment_for(self.metadata.ensembles, pending.entry_id)[1][index]
        self._queue(bookie_id).put(pending, index)

    @property
    def ensemble(self) -> tuple[str, ...]:
        return self.metadata.ensembles[-1][1]

    async def append(self, payload: bytes) -> int:
        """Add an entry; returns its id once Qa bookies have it durable (and all before it).
        LedgerClosed once ``close()`` has begun (EN5)."""
        if self._error is not None:
            raise self._error
        if self._closing is not None:
            raise LedgerClosed(f"ledger {self.ledger_id} is closed or closing")
        entry_id, self._next = self._next, self._next + 1
        self.length += len(payload)
        data = self.codec.frame(entry_id, self.lac, self.length, payload)
        meta = self.metadata
        pending = _Pending(entry_id, data, AckSet(entry_id, meta.ensemble_size,
                                                  meta.write_quorum, meta.ack_quorum),
                           asyncio.get_running_loop().create_future(), self.length)
        self._pending[entry_id] = pending
        for index in write_set(entry_id, meta.ensemble_size, meta.write_quorum):
            self._send(pending, index)
        return await asyncio.shield(pending.future)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, bookie_id: str, batch) -> None:
        """One POST batch to one bookie; its acks count only for entries that bookie still
        holds in the metadata (EN1); a failure replaces the bookie."""
        try:
            await asyncio.wait_for(self.bk.client(bookie_id).add_batch(
                self.ledger_id, [pending.data for pending, _ in batch], self.codec.master_key,
                self.codec.digest_type.header_name), self.bk.add_timeout_s)
        except Fenced as exc:
            self._fail(exc)  # EN3
            return
        except BOOKIE_FAILURES as exc:
            log.warning("ledger %d entries %d..: bookie %s failed (%s): ensemble change",
                        self.ledger_id, batch[0][0].entry_id, bookie_id, exc)
            await self._replace(batch[0][1], bookie_id)
            return
        except BookieError as exc:
            self._fail(exc)
            return
        for pending, index in batch:
            if segment_for(self.metadata.ensembles, pending.entry_id)[1][index] == bookie_id:
                pending.acks.ack(index)
        self._advance()

    async def _replace(self, index: int, failed: str) -> None:
        """Ensemble change (§3): commit a new segment with a replacement, then re-send every
        pending entry whose write set holds ``index`` (EN1)."""
        async with self._changing:
            if self._error is not None or self.ensemble[index] != failed:
                return  # already replaced by an earlier failure of the same bookie
            self._blocked += 1
            try:
                await self._commit_replacement(index, failed)
            except BaseException as exc:  # noqa: BLE001 - the writer cannot go on
                self._fail(exc if isinstance(exc, BookieError) else IOFailure(
                    f"ensemble change of ledger {self.ledger_id} failed: {exc!r}"))
                return
            finally:
                self._blocked -= 1
        meta = self.metadata
        dropped = self._queues.pop(failed, None)
        if dropped is not None:
            dropped.waiting.clear()  # re-sent below, to the replacement
        for pending in list(self._pending.values()):
            if index in write_set(pending.entry_id, meta.ensemble_size, meta.write_quorum):
                pending.acks.acked.discard(index)  # withdrawn: re-sent to the replacement
                self._send(pending, index)
        self._advance()

    async def _commit_replacement(self, index: int, failed: str) -> None:
        while True:
            current = self.metadata
            if current.state is not MetadataState.OPEN:
                raise Fenced(f"ledger {self.ledger_id} is {current.state.value}")
            candidates = [b for b in await self.bk.writable_bookies()
                          if b not in self.ensemble and b != failed]
            if not candidates:
                raise NotEnoughBookies(f"no writable bookie to replace {failed} in ledger "
                                       f"{self.ledger_id}")
            ensemble = list(self.ensemble)
            ensemble[index] = random.choice(candidates)
            first = self.lac + 1
            try:
                self.metadata = await self.bk.store.write(dataclasses.replace(
                    current, ensembles=with_segment(current.ensembles, first, ensemble)))
                log.info("ledger %d: bookie %s replaced by %s from entry %d", self.ledger_id,
                         failed, ensemble[index], first)
                return
            except BadVersion:
                self.metadata = await self.bk.store.read(self.ledger_id)  # re-check, retry

    def _advance(self) -> None:
        """EN2: complete in entry order, never while a change is being committed (EN1)."""
        while not self._blocked:
            pending = self._pending.get(self.lac + 1)
            if pending is None or not pending.acks.complete:
                return
            del self._pending[pending.entry_id]
            self.lac = pending.entry_id
            if not pending.future.done():
                pending.future.set_result(pending.entry_id)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(self._error)
                pending.future.exception()  # retrieved: its appender sees it

    async def close(self) -> int:
        """Refuse later appends, wait for every earlier one, then CAS the metadata to CLOSED
        at the LAC (§3, EN5). A second call waits for the first and returns its result."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_future()
            try:
                self._closing.set_result(await self._close())
            except BaseException as exc:  # noqa: BLE001 - every caller of close() sees it
                self._closing.set_exception(exc)
        return await asyncio.shield(self._closing)

    async def _close(self) -> int:
        # No append can start now (EN5), so these are all the appends there will be.
        waiting = [p.future for p in self._pending.values()]
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)
        if self._error is not None:
            raise self._error
        while True:
            current = self.metadata
            closed = dataclasses.replace(current, state=MetadataState.CLOSED,
                                         last_entry_id=self.lac, length=self.length)
            try:
                self.metadata = await self.bk.store.write(closed)
                return closed.last_entry_id  # the end written, whatever happens meanwhile
            except BadVersion:
                self.metadata = await self.bk.store.read(self.ledger_id)
                if self.metadata.state is not MetadataState.OPEN:
                    raise Fenced(f"ledger {self.ledger_id} is {self.metadata.state.value}")
