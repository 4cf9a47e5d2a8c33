"""Replicated ledgers over a cluster (REPLICATION.md §3): the client's front door, a writer that
writes each entry to Qw bookies and acknowledges it at Qa, and a reader with fallback.

    async with await BookKeeper.connect("zk://127.0.0.1:2181/ledgers") as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"pw")
        await writer.append(b"hello")
        await writer.close()
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)

Invariants (beside DS1-DS2 of distribution.py and L1-L5 of writer.py, which hold here too):
    EN1. No entry is acknowledged before the segment that places it is committed to the
         metadata: completions stop while an ensemble change is being written, and an entry's
         acknowledgement from a replaced bookie is withdrawn and the entry re-sent to the
         replacement (BookKeeper's PendingAddOp.unsetSuccessAndSendWriteRequest).
    EN2. Completions, and the LAC, advance in entry order only.
    EN3. EFENCED, or metadata that is no longer OPEN, stops the writer: every pending and later
         append fails with that error.
    EN4. Recovery (``open_ledger``, REPLICATION.md §3) never truncates on uncertainty: it
         proceeds only when every write set has at most Qa-1 bookies that did not fence, reads
         only from bookies that fenced, calls an entry missing only after Qw-Qa+1 of them said
         ENOENTRY, and otherwise fails with RecoveryUndecided (retry later). Its ensemble
         changes reach the metadata only with its close (RC1 in ensemble_recovery.py).
    EN5. Once ``close()`` has begun, ``append`` fails with LedgerClosed; ``close()`` waits for
         every append that began before it, so the closed lastEntryId is at least every
         acknowledged entry and no acknowledgement comes after it (S2; BookKeeper's
         LedgerHandle fails such appends with BKLedgerClosedException).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from typing import Protocol

from api.client.bookie_client import BookieClient
from api.client.codec import LedgerCodec, digest_type_of
from api.client.distribution import AckSet, segment_for, with_segment, write_set
from api.client.ensemble_reader import (BOOKIE_FAILURES, READ_TIMEOUT_S, SPECULATIVE_READ_S,
                                        EnsembleReader)
from api.client.metadata import BadVersion, LedgerMetadata, MetadataState
from api.client.zookeeper import ZkMetadataStore, alive_bookies, writable_bookies
from bookie.entry import DigestType
from bookie.errors import BookieError, Fenced, IOFailure

log = logging.getLogger("api.client.ensemble")

#: A bookie that answers no add within this is treated as failed (an ensemble change).
ADD_TIMEOUT_S = 10.0
#: A writer's per-bookie pipeline: entries sent in one POST batch, batches in flight at once.
BATCH_ENTRIES_MAX = 64
BATCHES_IN_FLIGHT_MAX = 4


class RecoveryUndecided(IOFailure):
    """EN4: recovery could not decide where the ledger ends; nothing was changed but the
    state IN_RECOVERY and the fences. Retry later."""


class LedgerClosed(BookieError):
    """EN5: an append to a writer that is closing or closed (BKLedgerClosedException)."""

    code = "ELEDGERCLOSED"


class NotEnoughBookies(IOFailure):
    """Fewer writable bookies than the ensemble needs (BookKeeper's BKNotEnoughBookiesException)."""


def _url(bookie_id: str) -> str:
    return f"http://{bookie_id}"  # a bookie id is host:port of its HTTP endpoint (§1)


class Transport(Protocol):
    """What the client needs of the world besides the metadata store: a client per bookie
    and the registered bookies. The simulator's in-memory cluster implements it too."""

    def client(self, bookie_id: str) -> BookieClient: ...

    async def writable_bookies(self) -> list[str]: ...

    async def alive_bookies(self) -> set[str]: ...


class HttpTransport:
    """Bookies over HTTP, membership from ZooKeeper's ``available/`` (REPLICATION.md §1)."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self.store = store

    def client(self, bookie_id: str) -> BookieClient:
        return BookieClient(_url(bookie_id))

    async def writable_bookies(self) -> list[str]:
        return await asyncio.to_thread(writable_bookies, self.store.client, self.store.root)

    async def alive_bookies(self) -> set[str]:
        return await asyncio.to_thread(alive_bookies, self.store.client, self.store.root)


class BookKeeper:
    """The client's front door over a metadata service (BookKeeper's ``BookKeeper`` class)."""

    def __init__(self, store: ZkMetadataStore, add_timeout_s: float = ADD_TIMEOUT_S,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 speculative_read_s: float = SPECULATIVE_READ_S,
                 transport: "Transport | None" = None) -> None:
        self.store = store
        self.add_timeout_s = add_timeout_s
        self.read_timeout_s = read_timeout_s
        self.speculative_read_s = speculative_read_s
        #: Where bookie clients and the cluster's membership come from: HTTP and ZooKeeper
        #: unless injected (the deterministic simulator injects in-memory bookies).
        self.transport = transport or HttpTransport(store)
        self._clients: dict[str, BookieClient] = {}

    @classmethod
    async def connect(cls, metadata_service_uri: str, **timeouts) -> "BookKeeper":
        """``add_timeout_s``/``read_timeout_s``: how long a bookie may keep an add or a read
        unanswered before it counts as failed (default 10 s each)."""
        store = ZkMetadataStore(metadata_service_uri)
        await asyncio.to_thread(store.start)
        return cls(store, **timeouts)

    async def __aenter__(self) -> "BookKeeper":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        await self.store.close()

    def client(self, bookie_id: str) -> BookieClient:
        if bookie_id not in self._clients:
            self._clients[bookie_id] = self.transport.client(bookie_id)
        return self._clients[bookie_id]

    async def writable_bookies(self) -> list[str]:
        return await self.transport.writable_bookies()

    async def alive_bookies(self) -> set[str]:
        """Registered bookies, writable or read-only."""
        return await self.transport.alive_bookies()

    async def create_ledger(self, ensemble: int = 3, write_quorum: int = 2, ack_quorum: int = 2,
                            digest: DigestType | str = DigestType.CRC32C,
                            password: bytes | str = b"") -> "EnsembleWriter":
        if not ensemble >= write_quorum >= ack_quorum >= 1:
            raise ValueError(f"need E >= Qw >= Qa >= 1, got {ensemble}/{write_quorum}/"
                             f"{ack_quorum}")
        available = await self.writable_bookies()
        if len(available) < ensemble:
            raise NotEnoughBookies(f"{len(available)} writable bookies, the ensemble needs "
                                   f"{ensemble}")
        secret = password.encode() if isinstance(password, str) else bytes(password)
        metadata = await self.store.create(LedgerMetadata(
            ledger_id=None, digest_type=digest_type_of(digest), ensemble_size=ensemble,
            write_quorum=write_quorum, ack_quorum=ack_quorum, password=secret,
            ensembles=((0, tuple(random.sample(available, ensemble))),)))
        codec = LedgerCodec.for_password(metadata.ledger_id, secret, metadata.digest_type)
        return EnsembleWriter(self, metadata, codec)

    async def open_ledger(self, ledger_id: int, password: bytes | str = b"",
                          recover: bool = True) -> "EnsembleReader":
        """A reader; with ``recover`` (the default) an OPEN ledger is recovered and closed
        first (its writer may be dead: EN4), so the reader sees its final end."""
        metadata = await self.store.read(ledger_id)
        secret = password.encode() if isinstance(password, str) else bytes(password)
        codec = LedgerCodec.for_password(ledger_id, secret, metadata.digest_type)
        if recover and metadata.state is not MetadataState.CLOSED:
            from api.client.ensemble_recovery import Recovery  # noqa: PLC0415 (a cycle)

            metadata = await Recovery(self, metadata, codec).run()
        return EnsembleReader(self, metadata, codec)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the metadata (CAS); every bookie's GC then reclaims the copies (§3)."""
        metadata = await self.store.read(ledger_id)
        await self.store.delete(ledger_id, metadata.version)


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

    def __init__(self, bk: BookKeeper, metadata: LedgerMetadata, codec: LedgerCodec) -> None:
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
