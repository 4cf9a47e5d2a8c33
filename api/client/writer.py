"""LedgerWriter: appends to one ledger over one bookie (BookKeeper's WriteHandle).

Metadata (open, in recovery, closed, where a ledger ends) lives in an optional
LedgerMetadataStore, never on the bookie. The add pipeline is ``pipeline.py``.

Invariants:
    L1. Entry ids are assigned in the order appends enter the pipeline, and an entry is
        framed once and never changes: a retry re-sends identical bytes, which the bookie
        accepts as the same entry (docs/http-api.md), so retries neither reorder nor duplicate.
    L2. The LAC (BookKeeper's lastAddConfirmed) is the largest id such that it and every
        entry before it are acknowledged (durable; with deferred sync, forced). It only
        rises, and append futures complete in entry order as it passes them.
    L3. An entry's piggybacked LAC is the writer's LAC when it is framed: below the entry's
        own id, and naming only entries the bookie has made durable.
    L4. An entry's length field is the ledger's total payload length including it.
    L5. After the first permanent failure at entry f (fenced, refused, retries spent) no
        entry >= f is acknowledged, and every later append fails with the same error.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging

from api.client.bookie_client import BookieClient
from api.client.codec import LedgerCodec, digest_type_of
from api.client.ensemble_errors import LedgerClosed
from api.client.ledger_end import _open_point, _require_unknown
from api.client.metadata import BadVersion, LedgerMetadata, LedgerMetadataStore, MetadataState
from api.client.pipeline import AddPipeline, _PendingAdd
from api.client.retry import WriterOptions, _client_for, _retrying
from bookie.entry import DigestType
from bookie.errors import BookieError, Fenced

log = logging.getLogger("api.client.ledger")


#: One closed-ledger error for both clients (issue 55): a write to a writer that is closed,
#: or to a ledger its metadata says is closed, raises the replicated client's LedgerClosed
#: (a BookieError, code ELEDGERCLOSED). The old name stays as an alias.
LedgerClosedError = LedgerClosed


class LedgerWriter(AddPipeline):
    """Appends to one ledger (BookKeeper's WriteHandle). Build with ``create`` or ``open``.

    Thread-safety: one event loop; any number of that loop's tasks may append at once.
    """

    def __init__(self, client: BookieClient, owns_client: bool, codec: LedgerCodec,
                 options: WriterOptions, metadata_store: LedgerMetadataStore | None = None,
                 metadata: LedgerMetadata | None = None, last_entry_id: int = -1,
                 length: int = 0, bookie_lac: int = -1) -> None:
        self._client, self._owns_client = client, owns_client
        self.codec, self.options = codec, options
        self._store, self.metadata = metadata_store, metadata
        self._next_entry_id = last_entry_id + 1
        self._length_pushed = length
        self._lac, self._length_confirmed = last_entry_id, length   # L2
        # Acknowledged contiguously; ahead of the LAC only with deferred sync.
        self._acked_contiguous, self._length_acked = last_entry_id, length
        self._lac_published = bookie_lac        # the largest LAC the bookie has been sent
        self._queue: collections.deque[_PendingAdd] = collections.deque()       # unsent
        self._unresolved: collections.deque[_PendingAdd] = collections.deque()  # unacked
        self._unacked = self._unacked_bytes = 0   # appended adds not yet acknowledged
        self._sending = 0
        self._tasks: set[asyncio.Task] = set()
        self._room = asyncio.Event()
        self._room.set()
        self._error: BaseException | None = None
        self._failed_from = 2**63               # L5: the first entry id that failed
        self._closing = self._closed = False
        self._lac_timer: asyncio.TimerHandle | None = None

    @classmethod
    async def create(cls, bookie: BookieClient | str, ledger_id: int | None = None,
                     password: bytes | str = b"",
                     digest_type: DigestType | str = DigestType.CRC32C, *,
                     metadata_store: LedgerMetadataStore | None = None,
                     options: WriterOptions | None = None,
                     custom: dict | None = None) -> "LedgerWriter":
        """A new ledger: ``ledger_id``, or one allocated by ``metadata_store`` (OPEN there).

        The arguments come in ``open``'s order (bookie, ledger_id, password, digest_type);
        before issue 55 the password came second, so ``create(url, b"pw")`` from older code
        is refused with a TypeError that says so, never taken as a ledger id.
        Raises LedgerExists (api.client.metadata) if the bookie or the store knows the id.
        """
        if ledger_id is not None and (isinstance(ledger_id, bool)
                                      or not isinstance(ledger_id, int)):
            raise TypeError(f"LedgerWriter.create(bookie, ledger_id, password, ...): ledger_id "
                            f"must be an int or None, got {type(ledger_id).__name__} (the "
                            "password came second before issue 55; pass password=...)")
        dtype = digest_type_of(digest_type)
        client, owned = _client_for(bookie)
        try:
            metadata = None
            if metadata_store is not None:
                metadata = await metadata_store.create(
                    LedgerMetadata(ledger_id, dtype, custom=dict(custom or {})))
                ledger_id = metadata.ledger_id
            elif ledger_id is None:
                raise ValueError("create needs a ledger_id, or a metadata_store to allocate one")
            await _require_unknown(client, ledger_id, metadata_store, metadata)
        except BaseException:
            if owned:
                await client.close()
            raise
        codec = LedgerCodec.for_password(ledger_id, password, dtype)
        return cls(client, owned, codec, options or WriterOptions(), metadata_store, metadata)

    @classmethod
    async def open(cls, bookie: BookieClient | str, ledger_id: int,
                   password: bytes | str = b"",
                   digest_type: DigestType | str = DigestType.CRC32C, *,
                   metadata_store: LedgerMetadataStore | None = None,
                   options: WriterOptions | None = None) -> "LedgerWriter":
        """Append to an existing, unfenced ledger after its last stored entry.

        For a writer that knows no other writer holds the ledger (its own earlier process,
        stopped). The stored tail past the LAC is verified first; a gap or a bad digest
        there raises NoEntry or DigestMismatch: recover the ledger instead.
        """
        client, owned = _client_for(bookie)
        try:
            metadata = None
            if metadata_store is not None:
                metadata = await metadata_store.read(ledger_id)
                if metadata.state is not MetadataState.OPEN:
                    raise LedgerClosedError(f"ledger {ledger_id} is {metadata.state.value}")
                digest_type = metadata.digest_type
            codec = LedgerCodec.for_password(ledger_id, password, digest_type)
            start = await _open_point(client, codec)
        except BaseException:
            if owned:
                await client.close()
            raise
        return cls(client, owned, codec, options or WriterOptions(), metadata_store, metadata,
                   *start)

    async def __aenter__(self) -> "LedgerWriter":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    @property
    def ledger_id(self) -> int:
        return self.codec.ledger_id

    @property
    def lac(self) -> int:
        """The last add confirmed (L2)."""
        return self._lac

    @property
    def length(self) -> int:
        """The ledger's length through the LAC (L4)."""
        return self._length_confirmed

    @property
    def last_add_pushed(self) -> int:
        return self._next_entry_id - 1

    @property
    def error(self) -> BaseException | None:
        """The permanent failure that stopped this writer (L5), if any."""
        return self._error

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing:
            raise LedgerClosedError(f"writer of ledger {self.ledger_id} is closed")

    async def append(self, data: bytes) -> int:
        """Append one entry; return its id once acknowledged (after every earlier one)."""
        future = await self.append_async(data)
        return await asyncio.shield(future)  # a cancelled caller leaves the add in flight

    async def append_async(self, data: bytes) -> asyncio.Future:
        """BookKeeper's appendAsync: wait only for room in the pipeline, then return a
        future of the entry id that completes when the add is acknowledged (L2)."""
        self._check_usable()
        payload = bytes(data)
        while not self._has_room(len(payload)):
            self._room.clear()
            await self._room.wait()
            self._check_usable()
        add = _PendingAdd(self._next_entry_id, payload, len(payload),
                          self._length_pushed + len(payload),
                          asyncio.get_running_loop().create_future())
        self._next_entry_id += 1    # L1: no await between the id and the queue
        self._length_pushed = add.length
        self._queue.append(add)
        self._unresolved.append(add)
        self._unacked += 1
        self._unacked_bytes += add.size
        self._pump()
        return add.future

    def _arm_lac_timer(self) -> None:
        """After the LAC rises, publish it if no add carries it within the interval."""
        interval_ms = self.options.explicit_lac_interval_ms
        if interval_ms and self._lac_timer is None and not self._closing \
                and self._lac > self._lac_published:
            self._lac_timer = asyncio.get_running_loop().call_later(
                interval_ms / 1000.0, self._on_lac_timer)

    def _on_lac_timer(self) -> None:
        self._lac_timer = None
        # Adds in flight will carry the LAC (or re-arm the timer when they are acked).
        if self._error is None and not self._closing and not self._queue \
                and not self._sending and self._lac > self._lac_published:
            task = asyncio.get_running_loop().create_task(self._publish_lac())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _publish_lac(self) -> None:
        """The idle timer's explicit LAC: a failure is only logged, as the next add or the
        close publishes the LAC again."""
        try:
            await self._write_lac(self._lac)
        except BookieError as exc:
            log.warning("ledger %d: explicit LAC not written: %s", self.ledger_id, exc)

    async def _write_lac(self, lac: int) -> None:
        """Write ``lac`` as an explicit LAC (BookKeeper's explicitLacInterval), so tailing
        readers see the last entries of an idle ledger."""
        await _retrying(lambda: self._client.write_lac(
            self.ledger_id, self.codec.master_key, self.codec.lac_body(lac)), self.options)
        self._lac_published = max(self._lac_published, lac)

    async def _wait_unresolved(self) -> None:
        """Wait for every add appended so far to be acknowledged or failed."""
        futures = [add.future for add in self._unresolved]
        if futures:
            await asyncio.wait(futures)  # wait() never cancels them, unlike gather()

    async def force(self) -> int:
        """Wait for every earlier append, make it durable on the bookie (deferred-sync adds
        too), and return the LAC, which now covers them all (BookKeeper's force)."""
        self._check_usable()
        return await self._force()

    async def _force(self) -> int:
        await self._wait_unresolved()
        if self._error is not None:
            raise self._error
        target, length = self._acked_contiguous, self._length_acked
        await _retrying(lambda: self._client.force(self.ledger_id, self.codec.master_key),
                        self.options)
        if target > self._lac:  # deferred sync: the LAC moves only here (L2)
            self._lac, self._length_confirmed = target, length
            self._arm_lac_timer()
        return self._lac

    async def close(self) -> int:
        """Drain, make durable, publish the final LAC, mark the ledger CLOSED in metadata.

        Returns the final LAC. A writer stopped by an error (fenced, refused) releases its
        resources without further requests: the error went to its appends, and is
        ``self.error``. Raises Fenced if recovery closed the ledger in metadata first.
        """
        if self._closed:
            return self._lac
        self._closing = True
        try:
            await self._wait_unresolved()
            if self._error is None:
                if self.options.deferred_sync:
                    await self._force()
                if self._lac > self._lac_published:
                    await self._write_lac(self._lac)
                await self._close_metadata()
        finally:
            await self._release()
        return self._lac

    async def _release(self) -> None:
        self._closed = True
        if self._lac_timer is not None:
            self._lac_timer.cancel()
            self._lac_timer = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        if self._owns_client:
            await self._client.close()

    async def _close_metadata(self) -> None:
        if self._store is None or self.metadata is None:
            return
        closed = dataclasses.replace(self.metadata, state=MetadataState.CLOSED,
                                     last_entry_id=self._lac, length=self._length_confirmed)
        try:
            self.metadata = await self._store.write(closed)
        except BadVersion:
            current = await self._store.read(self.ledger_id)
            if current.closed and (current.last_entry_id, current.length) == (
                    self._lac, self._length_confirmed):
                self.metadata = current
                return
            raise Fenced(f"ledger {self.ledger_id} was taken over by recovery (metadata "
                         f"{current.state.value} at entry {current.last_entry_id}); this "
                         f"writer's close at entry {self._lac} lost") from None
