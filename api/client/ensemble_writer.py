"""Appending to a replicated ledger (docs/cluster.md §3): each entry to its Qw bookies in
per-bookie POST batches, acknowledged at Qa in entry order, a failed bookie replaced by an
ensemble change committed before any affected entry is acknowledged (EN1-EN3, EN5 in
api/client/ensemble.py).

Invariant:
    DS2. An entry completes when Qa distinct indices of its write set acknowledged: an index
         counts at most once (a set), only while the segment placing the entry still names
         the bookie that answered, and not at all once withdrawn by an ensemble change (EN1).
    DS4. Deferred sync (BookKeeper's WriteFlag.DEFERRED_SYNC): adds go with the flag and
         complete once Qa bookies hold them, not yet durable; the LAC (piggybacked, and
         what readers may read) moves only when ``force()`` has had every bookie of the
         ensemble answer FORCE_LEDGER, to the last entry acknowledged when it began. A
         bookie failure fails the writer (no ensemble change: an unforced entry could be
         lost with the bookie), as BookKeeper's does; ``close()`` forces first.
    DS3. A bookie this writer replaced is not its replacement again while another writable
         bookie can be: a bookie killed -9 stays registered until its ZooKeeper session
         expires, and a writer used to replace one dead bookie by another and back (found by
         the topology drill: rack-aware placement kept picking the dead rack's bookies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from api.client.bookies import BOOKIE_FAILURES, Bookies
from api.client.codec import LedgerCodec
from api.client.distribution import segment_for, with_segment, write_set
from api.client.ensemble_errors import LedgerClosed, NotEnoughBookies
from api.client.ensemble_lac import ExplicitLac
from api.client.ensemble_queue import BookieQueue
from api.client.metadata import BadVersion, LedgerMetadata, MetadataState
from bookie.errors import BookieError, Fenced, IOFailure, TooManyRequests


log = logging.getLogger("api.client.ensemble")

#: A bookie answering 503 ETOOMANYREQUESTS (its journal queue or request bodies full) gets
#: the batch again after its Retry-After, this many times before it counts as failed.
BUSY_RETRIES_MAX = 20
#: Entries in flight (framed, not yet acknowledged) before appends wait for room: bounds a
#: writer's memory when the bookies are slower than its caller.
PENDING_ENTRIES_MAX = 16384


@dataclasses.dataclass(eq=False, slots=True)
class _Pending:
    """One entry in flight. ``future`` is set on an ``append_async`` entry and on the last
    entry of an ``append_many`` (completions come in entry order, EN2, so the last one's
    completion is all of them); None on the others: no future per entry."""

    entry_id: int
    data: bytes  # the framed entry with its i32 length in front: a frame of a batch body
    members: tuple[int, ...]  # its write set's ensemble indices (DS1)
    acked: set  # indices that acknowledged it (DS2)
    future: asyncio.Future | None


class EnsembleWriter:
    """Appends to one replicated ledger. One event loop; any number of its tasks may append."""

    def __init__(self, bk: Bookies, metadata: LedgerMetadata, codec: LedgerCodec,
                 deferred_sync: bool = False, explicit_lac_interval_ms: int = 0) -> None:
        self.bk, self.codec = bk, codec
        self.metadata = metadata
        self.ledger_id = metadata.ledger_id
        #: DS4: adds acknowledged before the bookies' fsync; the LAC moves only by force().
        self.deferred_sync = deferred_sync
        self.lac = -1
        self._explicit = ExplicitLac(self, explicit_lac_interval_ms)
        #: The last entry acknowledged with all before it (BookKeeper's lastAddPushed once
        #: in order); the LAC too, unless deferred_sync.
        self.pushed = -1
        self.length = 0
        self._next = 0
        self._pending: dict[int, _Pending] = {}
        self._changing: asyncio.Lock = asyncio.Lock()
        self._blocked = 0  # > 0 while an ensemble change is being committed (EN1)
        self._replaced: set[str] = set()  # DS3: bookies this writer replaced
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task] = set()
        self._queues: dict[str, BookieQueue] = {}
        self._closing: asyncio.Future | None = None  # set by the first close() (EN5)
        self._room = asyncio.Event()  # set while fewer than PENDING_ENTRIES_MAX are pending
        self._room.set()
        size, quorum = metadata.ensemble_size, metadata.write_quorum
        # DS1 depends on entry_id mod E only: one write set per residue, computed once.
        self._write_sets = [tuple(write_set(r, size, quorum)) for r in range(size)]

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    @metadata.setter
    def metadata(self, value: LedgerMetadata) -> None:
        self._metadata = value
        self._last_first, self._last_members = value.ensembles[-1]
        self._targets_cache = None

    def _bookie_at(self, entry_id: int, index: int) -> str:
        """The bookie at ``index`` of the segment placing ``entry_id`` (nearly always the
        last segment: appends are at the end)."""
        if entry_id >= self._last_first:
            return self._last_members[index]
        return segment_for(self._metadata.ensembles, entry_id)[1][index]

    def _queue(self, bookie_id: str) -> BookieQueue:
        queue = self._queues.get(bookie_id)
        if queue is None:
            queue = self._queues[bookie_id] = BookieQueue(self, bookie_id)
        return queue

    def _send(self, pending: "_Pending", index: int) -> None:
        self._queue(self._bookie_at(pending.entry_id, index)).put(pending, index)

    @property
    def ensemble(self) -> tuple[str, ...]:
        return self._last_members

    async def append(self, payload: bytes) -> int:
        """Add an entry; returns its id once Qa bookies have it durable (and all before it).
        LedgerClosed once ``close()`` has begun (EN5)."""
        if len(self._pending) >= PENDING_ENTRIES_MAX:
            await self._wait_for_room()
        return await self._enqueue((payload,))  # the future is this caller's alone

    async def append_async(self, payload: bytes) -> asyncio.Future:
        """Add an entry, waiting only for room in the pipeline (PENDING_ENTRIES_MAX): a
        future of its id, done once Qa bookies have it durable and all before it (as the
        single-bookie writer's ``append_async``; BookKeeper's asyncAddEntry). Entries are
        placed in call order. LedgerClosed once ``close()`` has begun."""
        if len(self._pending) >= PENDING_ENTRIES_MAX:
            await self._wait_for_room()
        return self._enqueue((payload,))

    async def append_many(self, payloads) -> range:
        """Add entries in order; returns their ids once all are durable on Qa bookies. One
        future for all of them, and each bookie gets them in as few batches as it can."""
        payloads = list(payloads)
        if len(self._pending) >= PENDING_ENTRIES_MAX:
            await self._wait_for_room()
        if not payloads:
            self._check_open()
            return range(self._next, self._next)
        last = await self._enqueue(payloads)
        return range(last - len(payloads) + 1, last + 1)

    async def _wait_for_room(self) -> None:
        while len(self._pending) >= PENDING_ENTRIES_MAX and self._error is None:
            self._room.clear()
            await self._room.wait()

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing is not None:
            raise LedgerClosed(f"ledger {self.ledger_id} is closed or closing")

    def _enqueue(self, payloads) -> asyncio.Future:
        """Frame and place entries, one future for the last (the hot path: per entry, one
        frame and digest, one dict insert, Qw list appends)."""
        self._check_open()
        future = asyncio.get_running_loop().create_future()
        frame, lac = self.codec.frame_batch_item, self.lac
        write_sets, size = self._write_sets, len(self._write_sets)
        pending_by_id = self._pending
        entry_id, length = self._next, self.length
        pending = None
        # New entries are placed by the last segment (an ensemble change starts its segment
        # at lac + 1 <= the next id): each residue's (queue, index) pairs, looked up once.
        targets, queues = self._targets()
        for payload in payloads:
            length += len(payload)
            residue = entry_id % size
            pending = _Pending(entry_id, frame(entry_id, lac, length, payload),
                               write_sets[residue], set(), None)
            pending_by_id[entry_id] = pending
            for queue, index in targets[residue]:
                queue.waiting.append((pending, index))
            entry_id += 1
        self._next, self.length = entry_id, length
        pending.future = future
        for queue in queues:
            queue.wake()
        return future

    def _targets(self):
        """Per residue, the queues and indices of the last segment, and its queues in
        placement order (a set's order, by id, would vary from run to run); cached until
        the metadata or a queue changes."""
        if self._targets_cache is None:
            targets = [[(self._queue(self._last_members[i]), i) for i in members]
                       for members in self._write_sets]
            queues = list(dict.fromkeys(queue for pairs in targets for queue, _ in pairs))
            self._targets_cache = targets, queues
        return self._targets_cache

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, bookie_id: str, batch) -> None:
        """One POST batch to one bookie; its acks count only for entries that bookie still
        holds in the metadata (EN1); a failure replaces the bookie."""
        body = b"".join([pending.data for pending, _ in batch])
        try:
            flags = {"deferred_sync": True} if self.deferred_sync else {}
            for attempt in itertools.count():
                try:
                    await asyncio.wait_for(self.bk.client(bookie_id).add_batch_body(
                        self.ledger_id, body, self.codec.master_key,
                        self.codec.digest_type.header_name, **flags), self.bk.add_timeout_s)
                    break
                except TooManyRequests as exc:  # back-pressure, not a failure: send again
                    if attempt == BUSY_RETRIES_MAX:
                        raise IOFailure(f"bookie {bookie_id} stayed busy: {exc}") from exc
                    await asyncio.sleep(min(exc.retry_after_s or 0.05, 1.0))  # noqa: sleep-ok (its Retry-After)
        except Fenced as exc:
            self._fail(exc)  # EN3
            return
        except BOOKIE_FAILURES as exc:
            log.warning("ledger %d entries %d..: bookie %s failed (%s): ensemble change",
                        self.ledger_id, batch[0][0].entry_id, bookie_id,
                        str(exc) or type(exc).__name__)  # a timeout's str() is empty
            await self._replace(batch[0][1], bookie_id)
            return
        except BookieError as exc:
            self._fail(exc)
            return
        last_first, last_members = self._last_first, self._last_members
        for pending, index in batch:  # EN1: counted only if the bookie still holds it
            if pending.entry_id >= last_first:
                if last_members[index] == bookie_id:
                    pending.acked.add(index)
            elif self._bookie_at(pending.entry_id, index) == bookie_id:
                pending.acked.add(index)
        self._advance()

    async def _replace(self, index: int, failed: str) -> None:
        """Ensemble change (§3): commit a new segment with a replacement, then re-send every
        pending entry whose write set holds ``index`` (EN1)."""
        async with self._changing:
            if self._error is not None or self.ensemble[index] != failed:
                return  # already replaced by an earlier failure of the same bookie
            if self.deferred_sync:  # DS4, as BookKeeper: an unforced add may be lost with it
                self._fail(IOFailure(f"ledger {self.ledger_id}: bookie {failed} failed and "
                                     "a deferred-sync ledger makes no ensemble change"))
                return
            self._blocked += 1
            try:
                await self._commit_replacement(index, failed)
            except BaseException as exc:  # noqa: BLE001 - the writer cannot go on
                self._fail(exc if isinstance(exc, BookieError) else IOFailure(
                    f"ensemble change of ledger {self.ledger_id} failed: {exc!r}"))
                return
            finally:
                self._blocked -= 1
        dropped = self._queues.pop(failed, None)
        self._targets_cache = None
        if dropped is not None:
            dropped.waiting.clear()  # re-sent below, to the replacement
        for pending in list(self._pending.values()):
            if index in pending.members:
                pending.acked.discard(index)  # withdrawn: re-sent to the replacement
                self._send(pending, index)
        self._advance()

    async def _commit_replacement(self, index: int, failed: str) -> None:
        while True:
            current = self.metadata
            if current.state is not MetadataState.OPEN:
                raise Fenced(f"ledger {self.ledger_id} is {current.state.value}")
            self._replaced.add(failed)
            candidates = [b for b in await self.bk.writable_bookies()
                          if b not in self.ensemble and b != failed]
            fresh = [b for b in candidates if b not in self._replaced]  # DS3
            candidates = fresh or candidates
            if not candidates:
                raise NotEnoughBookies(f"no writable bookie to replace {failed} in ledger "
                                       f"{self.ledger_id}")
            ensemble = list(self.bk.placement.replace_one(
                self.ensemble, index, self.metadata.write_quorum, candidates,
                await self.bk.locations(list(self.ensemble) + candidates)))
            first = self.pushed + 1
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
        pending_by_id, quorum = self._pending, self.metadata.ack_quorum
        lac = self.lac
        while not self._blocked:
            pending = pending_by_id.get(self.pushed + 1)
            if pending is None or len(pending.acked) < quorum:
                break
            del pending_by_id[pending.entry_id]
            self.pushed = pending.entry_id
            if not self.deferred_sync:
                self.lac = pending.entry_id
            if len(pending_by_id) < PENDING_ENTRIES_MAX and not self._room.is_set():
                self._room.set()
            future = pending.future
            if future is not None and not future.done():
                future.set_result(pending.entry_id)
        if self.lac > lac:
            self._explicit.risen()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._room.set()  # appenders waiting for room see the error
        for pending in self._pending.values():
            future = pending.future
            if future is not None and not future.done():
                future.set_exception(self._error)
                future.exception()  # retrieved: its appender sees it

    async def force(self) -> int:
        """DS4: make every entry acknowledged so far durable (BookKeeper's WriteHandle.force):
        FORCE_LEDGER on every bookie of the ensemble, all of which must answer; then the LAC
        is the last entry acknowledged when it began, returned. Without deferred sync every
        acknowledged add is durable already, and this returns the LAC."""
        self._check_open()
        return await self._force()

    async def _force(self) -> int:
        target = self.pushed
        if not self.deferred_sync or target <= self.lac:
            return self.lac
        await asyncio.gather(*(asyncio.wait_for(
            self.bk.client(bookie_id).force(self.ledger_id, self.codec.master_key),
            self.bk.add_timeout_s) for bookie_id in dict.fromkeys(self.ensemble)))
        self.lac = max(self.lac, target)
        self._explicit.risen()
        return self.lac

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
        waiting = [p.future for p in self._pending.values() if p.future is not None]
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)
        if self._error is not None:
            raise self._error
        # DS4: a deferred-sync ledger closes forced, at its last acknowledged entry, so the
        # close never names an entry that is not durable nor drops one that was
        # acknowledged (BookKeeper's close takes the LAC as it is: call force() first).
        await self._force()
        self._explicit.cancel()
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
