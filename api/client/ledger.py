"""The ledger library: LedgerWriter, LedgerReader and recover_ledger over one bookie.

BookKeeper's client API as a Python programmer would use it (DESIGN.md §4, "The ledger
client"). Entries are framed and checked by ``bookie.entry``, the one framing module the
server shares (FORMATS.md §6); the master key is SHA1("ledger" || password) and a MAC ledger's
HMAC key SHA1("mac" || password), as BookKeeper derives them. Metadata (open, in recovery,
closed, where a ledger ends) lives in an optional LedgerMetadataStore, never on the bookie.

Writer pipeline (BookKeeper's PendingAddOp, for one bookie):

    append ─► queue ─► [frame with the current LAC] ─► PUT or POST batch ─► ack ─┐
      ▲        (unsent)   up to requests_in_flight_max requests at once          │
      └── futures complete in entry order as the LAC passes them ◄───────────────┘

Invariants:
    L1. Entry ids are assigned in the order appends enter the pipeline, and an entry is
        framed once and never changes: a retry re-sends identical bytes, which the bookie
        accepts as the same entry (API.md), so retries neither reorder nor duplicate.
    L2. The LAC (BookKeeper's lastAddConfirmed) is the largest id such that it and every
        entry before it are acknowledged (durable; with deferred sync, forced). It only
        rises, and append futures complete in entry order as it passes them.
    L3. An entry's piggybacked LAC is the writer's LAC when it is framed: below the entry's
        own id, and naming only entries the bookie has made durable.
    L4. An entry's length field is the ledger's total payload length including it.
    L5. After the first permanent failure at entry f (fenced, refused, retries spent) no
        entry >= f is acknowledged, and every later append fails with the same error.
    L6. Readers return only entries whose ids and digest verify; ``tail`` yields entries up
        to the bookie's LAC only, each exactly once, in id order.

Recovery of a ledger whose writer died (BookKeeper's LedgerRecoveryOp, one bookie):
    R1. Fence first: once the fence is durable no non-recovery add can land, so the entries
        the bookie holds are all there will ever be, and the writer that lost the race gets
        EFENCED on its next add.
    R2. Entries up to the fenced LAC were acknowledged; entries after it are checked one by
        one from the LAC: the first missing entry or failed digest ends the ledger before it.
    R3. Nothing needs a recovery add on a single bookie: the fence's journal record follows
        every add admitted before it, so when the fence is durable they all are.
    R4. The final LAC is published as an explicit LAC before the metadata says CLOSED, so a
        reader that sees the ledger closed finds the bookie's LAC at its end.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
from typing import AsyncIterator, Awaitable, Callable

import aiohttp

from api.client.bookie_client import BookieClient
from api.client.metadata import (BadVersion, LedgerExists, LedgerMetadata,
                                 LedgerMetadataStore, MetadataState)
from bookie import entry as framing
from bookie.entry import DigestType
from bookie.errors import (BookieError, Fenced, IOFailure, NoEntry, NoLedger, Unavailable)

log = logging.getLogger("api.client.ledger")

#: Failures after which a request may or may not have been applied: safe to re-send (L1).
TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError)


class DigestMismatch(IOFailure):
    """An entry read back does not verify: its digest or ids are not what was written.

    An IOFailure (EIO), not a BadDigest: BadDigest is a BadRequest, the bookie refusing a
    malformed add, a caller's mistake not worth retrying. Here the request was fine and the
    stored or transported bytes are damaged, the condition the bookie itself reports as
    CorruptRecord (an IOFailure) when its own scan finds it (BookKeeper: BKDigestMatchException).
    """

    def __init__(self, ledger_id: int, entry_id: int, reason: str) -> None:
        super().__init__(f"entry {ledger_id}/{entry_id}: {reason}")
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.reason = reason


class LedgerClosedError(Exception):
    """A write to a writer that is closed, or to a ledger its metadata says is closed."""


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One verified entry (FORMATS.md §6.1): ids, piggybacked LAC, ledger length, payload."""

    ledger_id: int
    entry_id: int
    lac: int
    length: int
    payload: bytes


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """Pipeline limits. Every queue and batch is bounded (DESIGN.md §10.1)."""

    batch_max_entries: int = 100          # queued adds sent as one POST batch; 1 = no batching
    batch_max_bytes: int = 4 * 1024 * 1024
    requests_in_flight_max: int = 8
    adds_in_flight_max: int = 2_000       # appended, not yet acknowledged: append waits
    adds_in_flight_bytes_max: int = 64 * 1024 * 1024
    # Acknowledged adds wait for earlier ones to complete in order (L2). They hold no bytes,
    # so they may outnumber the unacknowledged ones by this factor before append waits:
    # one slow request then stalls completions, not sending.
    unresolved_factor: int = 4
    retries_max: int = 10                 # per request, on 503 and transport errors
    retry_after_max_s: float = 5.0        # cap on the bookie's Retry-After and on backoff
    explicit_lac_interval_ms: int = 200   # idle time before an explicit LAC; 0 = never
    deferred_sync: bool = False           # BookKeeper's WriteFlag.DEFERRED_SYNC

    def __post_init__(self) -> None:
        for name in ("batch_max_entries", "batch_max_bytes", "requests_in_flight_max",
                     "adds_in_flight_max", "adds_in_flight_bytes_max", "unresolved_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"WriterOptions.{name} must be at least 1")
        if self.retries_max < 0 or self.retry_after_max_s < 0 \
                or self.explicit_lac_interval_ms < 0:
            raise ValueError("WriterOptions: retries and intervals cannot be negative")


@dataclasses.dataclass(frozen=True)
class RecoveryResult:
    """Where recovery closed a ledger: ``lac`` is its last entry (-1: empty)."""

    ledger_id: int
    lac: int
    length: int
    fenced_lac: int        # the bookie's LAC when fenced
    last_entry_id: int     # the last entry the bookie held; > lac if entries were cut
    cut: str | None        # why entries after lac were left out, if any were
    already_closed: bool = False


# -- framing of one ledger ------------------------------------------------------------------


def digest_type_of(value: DigestType | str) -> DigestType:
    """A DigestType from itself or API.md's header spelling (crc32c, crc32, mac, dummy)."""
    return value if isinstance(value, DigestType) else DigestType.from_header(value)


def _password_bytes(password: bytes | str) -> bytes:
    return password.encode() if isinstance(password, str) else bytes(password)


@dataclasses.dataclass(frozen=True)
class LedgerCodec:
    """A ledger's id, digest type and keys: frames and verifies its entries (pure)."""

    ledger_id: int
    digest_type: DigestType
    master_key: bytes
    mac_key: bytes | None

    @classmethod
    def for_password(cls, ledger_id: int, password: bytes | str,
                     digest_type: DigestType | str = DigestType.CRC32C) -> "LedgerCodec":
        secret = _password_bytes(password)
        dtype = digest_type_of(digest_type)
        return cls(ledger_id, dtype, framing.master_key(secret),
                   framing.mac_key(secret) if dtype is DigestType.MAC else None)

    def frame(self, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        return framing.frame_entry(self.ledger_id, entry_id, lac, length, payload,
                                   self.digest_type, self.mac_key)

    def lac_body(self, lac: int) -> bytes:
        return framing.frame_lac(self.ledger_id, lac, self.digest_type, self.mac_key)

    def decode(self, data: bytes, entry_id: int | None) -> LedgerEntry:
        """Verify ids and digest (L6); ``entry_id`` None accepts any id (a read of -1)."""
        shown = "?" if entry_id is None else entry_id
        need = framing.METADATA_LENGTH + self.digest_type.digest_length
        if len(data) < need:
            raise DigestMismatch(self.ledger_id, shown, f"{len(data)} bytes, shorter than "
                                 f"the {need}-byte header and digest")
        ledger_id, found_id, lac, length = framing.ENTRY_HEADER.unpack_from(data, 0)
        if ledger_id != self.ledger_id or (entry_id is not None and found_id != entry_id):
            raise DigestMismatch(self.ledger_id, shown,
                                 f"the bookie returned entry {ledger_id}/{found_id}")
        if not framing.entry_digest_ok(data, self.digest_type, self.mac_key):
            raise DigestMismatch(self.ledger_id, found_id,
                                 f"{self.digest_type.header_name} digest does not match "
                                 f"its bytes")
        return LedgerEntry(ledger_id, found_id, lac, length,
                           framing.payload_of(data, self.digest_type))


# -- retries --------------------------------------------------------------------------------


def _backoff_s(exc: BaseException, attempt: int, cap_s: float) -> float:
    """The bookie's Retry-After for a 503; exponential from 50 ms for transport errors."""
    if isinstance(exc, Unavailable):
        return min(float(exc.retry_after_s), cap_s)
    return min(0.05 * 2 ** (attempt - 1), cap_s)


async def _retrying(call: Callable[[], Awaitable], options: WriterOptions,
                    stop: Callable[[], BaseException | None] = lambda: None):
    """``call()``, re-sent on 503 and transport errors (L1), at most ``retries_max`` times.

    ``stop`` is asked before each retry: an error it returns ends the retries (the writer
    failed elsewhere, L5). Other BookieErrors (fenced, refused) are never retried.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except (Unavailable, *TRANSPORT_ERRORS) as exc:
            attempt += 1
            if attempt > options.retries_max:
                if isinstance(exc, BookieError):
                    raise
                raise IOFailure(f"bookie unreachable after {attempt} attempts: {exc!r}") \
                    from exc
            stopped = stop()
            if stopped is not None:
                raise stopped from exc
            await asyncio.sleep(_backoff_s(exc, attempt, options.retry_after_max_s))


def _client_for(bookie: BookieClient | str) -> tuple[BookieClient, bool]:
    """A BookieClient and whether this library owns (and so closes) it."""
    if isinstance(bookie, BookieClient):
        return bookie, False
    return BookieClient(bookie), True


# -- the writer -----------------------------------------------------------------------------


@dataclasses.dataclass(slots=True, eq=False)
class _PendingAdd:
    entry_id: int
    payload: bytes | None         # until framed
    size: int                     # payload bytes
    length: int                   # L4
    future: asyncio.Future
    framed: bytes | None = None   # set once, when first sent (L1, L3); dropped once acked
    acked: bool = False


class LedgerWriter:
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

    # -- construction ------------------------------------------------------------------------

    @classmethod
    async def create(cls, bookie: BookieClient | str, password: bytes | str = b"",
                     digest_type: DigestType | str = DigestType.CRC32C, *,
                     ledger_id: int | None = None,
                     metadata_store: LedgerMetadataStore | None = None,
                     options: WriterOptions | None = None,
                     custom: dict | None = None) -> "LedgerWriter":
        """A new ledger: ``ledger_id``, or one allocated by ``metadata_store`` (OPEN there).

        Raises LedgerExists (api.client.metadata) if the bookie or the store knows the id.
        """
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

    # -- state -------------------------------------------------------------------------------

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

    # -- appends -----------------------------------------------------------------------------

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

    # -- explicit LAC ------------------------------------------------------------------------

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

    # -- force and close ---------------------------------------------------------------------

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


async def _require_unknown(client: BookieClient, ledger_id: int,
                           store: LedgerMetadataStore | None,
                           metadata: LedgerMetadata | None) -> None:
    """LedgerExists if the bookie already holds ``ledger_id`` (metadata made for it goes)."""
    try:
        await client.ledger_info(ledger_id)
    except NoLedger:
        return
    if store is not None and metadata is not None:
        await store.delete(ledger_id, metadata.version)
    raise LedgerExists(f"ledger {ledger_id} already exists on {client.base_url}; open it to "
                       f"append, or recover it")


async def _open_point(client: BookieClient, codec: LedgerCodec) -> tuple[int, int, int]:
    """(last entry id, length, bookie LAC) for a writer reopening an unfenced ledger."""
    await client.force(codec.ledger_id, codec.master_key)  # checks the key; makes the tail
    info = await client.ledger_info(codec.ledger_id)       # of a dead writer durable
    if info["fenced"]:
        raise Fenced(f"ledger {codec.ledger_id} is fenced (recovered); it cannot be reopened")
    scan = await _scan_tail(client, codec, info["lac"], info["lastEntryId"])
    if scan.final != info["lastEntryId"]:
        raise NoEntry(f"ledger {codec.ledger_id}: {scan.cut}; entries up to "
                      f"{info['lastEntryId']} are stored: recover the ledger instead")
    return scan.final, scan.length, info["lac"]


# -- the reader -----------------------------------------------------------------------------


class LedgerReader:
    """Reads and follows one ledger (BookKeeper's ReadHandle), verifying every entry (L6).

    ``read_entry`` and ``read_range`` read what the bookie holds, confirmed or not (like
    readUnconfirmed); ``read_last`` and ``tail`` stay at or below the LAC.
    Thread-safety: one event loop; its tasks may share a reader.
    """

    def __init__(self, client: BookieClient, owns_client: bool, codec: LedgerCodec,
                 metadata_store: LedgerMetadataStore | None = None,
                 missing_ledger_poll_s: float = 0.1) -> None:
        self._client, self._owns_client = client, owns_client
        self.codec = codec
        self._store = metadata_store
        self.missing_ledger_poll_s = missing_ledger_poll_s

    @classmethod
    async def open(cls, bookie: BookieClient | str, ledger_id: int,
                   password: bytes | str = b"",
                   digest_type: DigestType | str = DigestType.CRC32C, *,
                   metadata_store: LedgerMetadataStore | None = None) -> "LedgerReader":
        """A reader; the password is needed to verify MAC digests only. With a metadata
        store the digest type comes from the ledger's metadata."""
        if metadata_store is not None:
            digest_type = (await metadata_store.read(ledger_id)).digest_type
        client, owned = _client_for(bookie)
        return cls(client, owned, LedgerCodec.for_password(ledger_id, password, digest_type),
                   metadata_store)

    async def __aenter__(self) -> "LedgerReader":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_client:
            await self._client.close()

    @property
    def ledger_id(self) -> int:
        return self.codec.ledger_id

    async def read_lac(self, wait_for_gt: int | None = None, timeout_ms: int = 0) -> int:
        """The bookie's LAC; with ``wait_for_gt`` long-poll until it passes that."""
        return await self._client.read_lac(self.ledger_id, wait_for_gt, timeout_ms)

    async def read_entry(self, entry_id: int) -> LedgerEntry:
        """One entry; -1 reads the last entry the bookie stored (maybe unconfirmed)."""
        data = await self._client.read_entry(self.ledger_id, entry_id)
        return self.codec.decode(data, None if entry_id == -1 else entry_id)

    async def read_last(self) -> LedgerEntry:
        """The last confirmed entry, the one at the LAC; NoEntry if nothing is confirmed."""
        lac = await self.read_lac()
        if lac < 0:
            raise NoEntry(f"ledger {self.ledger_id} has no confirmed entries")
        return await self.read_entry(lac)

    async def read_range(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries first..last, all of them (NoEntry names the first missing one)."""
        found = []
        async for batch in self.iter_range(first, last):
            found.extend(batch)
        return found

    async def iter_range(self, first: int, last: int) -> AsyncIterator[list[LedgerEntry]]:
        """Entries first..last as the bookie's range reads return them (each at most
        ``max_read_batch`` entries or 8 MiB), verified."""
        if first < 0 or last < first:
            raise ValueError(f"bad range {first}..{last}")
        next_id = first
        while next_id <= last:
            datas = await self._client.read_range(self.ledger_id, next_id, last)
            if not datas:
                raise NoEntry(f"entry {self.ledger_id}/{next_id} is not stored")
            yield [self.codec.decode(data, next_id + i) for i, data in enumerate(datas)]
            next_id += len(datas)

    async def tail(self, first: int = 0, until: int | None = None,
                   poll_timeout_ms: int = 10_000) -> AsyncIterator[LedgerEntry]:
        """Follow the ledger from ``first``: yield each confirmed entry once, in order (L6).

        Waits with the LAC long poll. Ends after ``until`` or, with a metadata store, at the
        end of a ledger its metadata says is closed; otherwise runs until the caller stops.
        """
        next_id, lac = first, first - 1
        while until is None or next_id <= until:
            if next_id <= lac:
                stop = lac if until is None else min(lac, until)
                async with contextlib.aclosing(self.iter_range(next_id, stop)) as batches:
                    async for batch in batches:
                        for entry in batch:
                            yield entry
                        next_id = batch[-1].entry_id + 1
                continue
            closed_at = await self._closed_at()
            if closed_at is not None:
                if next_id > closed_at:
                    return
                lac = closed_at
                continue
            lac = await self._poll_lac(next_id - 1, poll_timeout_ms)

    async def _closed_at(self) -> int | None:
        """The last entry of a ledger closed in metadata; None if open or no store."""
        if self._store is None:
            return None
        metadata = await self._store.read(self.ledger_id)
        return metadata.last_entry_id if metadata.closed else None

    async def _poll_lac(self, known: int, timeout_ms: int) -> int:
        try:
            return await self._client.read_lac(self.ledger_id, known, timeout_ms)
        except NoLedger:
            # The bookie learns of a ledger at its first add; there is nothing to long-poll
            # on before that, so poll at a fixed pace.
            await asyncio.sleep(self.missing_ledger_poll_s)
            return known


# -- recovery -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _TailScan:
    final: int          # the last entry that verified, contiguously from the start
    length: int         # its length field (0 if none)
    cut: str | None


async def _scan_tail(client: BookieClient, codec: LedgerCodec, lac: int,
                     last_entry_id: int) -> _TailScan:
    """R2: verify entries from the LAC (acknowledged, so it must verify) to the last one;
    the first gap or bad digest after the LAC ends the ledger before it."""
    final, length, next_id = -1, 0, max(lac, 0)
    while next_id <= last_entry_id:
        try:
            datas = await client.read_range(codec.ledger_id, next_id, last_entry_id)
        except NoEntry:
            if next_id <= lac:
                raise
            datas = []
        if not datas:
            return _TailScan(final, length, f"entry {next_id} is missing")
        for index, data in enumerate(datas):
            entry_id = next_id + index
            try:
                entry = codec.decode(data, entry_id)
            except DigestMismatch as exc:
                if entry_id <= lac:
                    raise  # an acknowledged entry is damaged: not ours to cut
                return _TailScan(final, length, str(exc))
            final, length = entry_id, entry.length
        next_id += len(datas)
    return _TailScan(final, length, None)


async def recover_ledger(bookie: BookieClient | str, ledger_id: int,
                         password: bytes | str = b"",
                         digest_type: DigestType | str = DigestType.CRC32C, *,
                         metadata_store: LedgerMetadataStore | None = None,
                         options: WriterOptions | None = None) -> RecoveryResult:
    """Close a ledger whose writer died (R1-R4) and return where it ends.

    Idempotent: a second recovery finds the same end. With a metadata store the ledger goes
    IN_RECOVERY, then CLOSED; a ledger already CLOSED there is returned as it is.
    """
    options = options or WriterOptions()
    client, owned = _client_for(bookie)
    try:
        metadata = None
        if metadata_store is not None:
            metadata = await _begin_recovery(metadata_store, ledger_id)
            if metadata.closed:
                return RecoveryResult(ledger_id, metadata.last_entry_id, metadata.length,
                                      metadata.last_entry_id, metadata.last_entry_id, None,
                                      already_closed=True)
            digest_type = metadata.digest_type
        codec = LedgerCodec.for_password(ledger_id, password, digest_type)
        fenced = await _retrying(lambda: client.fence(ledger_id, codec.master_key), options)
        scan = await _scan_tail(client, codec, fenced["lac"], fenced["lastEntryId"])
        if scan.final >= 0:  # R4
            await _retrying(lambda: client.write_lac(ledger_id, codec.master_key,
                                                     codec.lac_body(scan.final)), options)
        if metadata is not None:
            await _finish_recovery(metadata_store, metadata, scan)
        if scan.cut:
            log.info("ledger %d recovered at entry %d: %s", ledger_id, scan.final, scan.cut)
        return RecoveryResult(ledger_id, scan.final, scan.length, fenced["lac"],
                              fenced["lastEntryId"], scan.cut)
    finally:
        if owned:
            await client.close()


async def _begin_recovery(store: LedgerMetadataStore, ledger_id: int,
                          attempts_max: int = 10) -> LedgerMetadata:
    """OPEN -> IN_RECOVERY by compare-and-set; a CLOSED ledger comes back unchanged."""
    for _ in range(attempts_max):
        metadata = await store.read(ledger_id)
        if metadata.state is not MetadataState.OPEN:
            return metadata
        try:
            return await store.write(dataclasses.replace(metadata,
                                                         state=MetadataState.IN_RECOVERY))
        except BadVersion:
            continue  # a writer or another recoverer moved it: look again
    raise BadVersion(f"ledger {ledger_id}: metadata kept changing during recovery")


async def _finish_recovery(store: LedgerMetadataStore, metadata: LedgerMetadata,
                           scan: _TailScan) -> None:
    closed = dataclasses.replace(metadata, state=MetadataState.CLOSED,
                                 last_entry_id=scan.final, length=scan.length)
    try:
        await store.write(closed)
    except BadVersion:
        current = await store.read(metadata.ledger_id)
        # Two recoverers reach the same end (recovery is deterministic); anything else is a
        # conflict the caller must see.
        if not (current.closed and current.last_entry_id == scan.final):
            raise
