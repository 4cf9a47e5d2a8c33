"""BookKeeper-protocol operations (docs/bookkeeper-protocol.md §3): one decoded request ->
one ``Bookie`` call -> one framed answer, for v3 (protobuf) and v2 (packed) requests alike.

Each operation calls the same ``Bookie`` method its HTTP route calls (api/server/
routes_ledgers.py): no rule of the write path, fence or LAC has a second copy here. What
this module adds is BookKeeper's side of each exchange, as its ``*ProcessorV3`` and v2
processors answer (read there, written here):

    BK1. An answer's status comes only from ``api.bkproto.status`` (EOK, or the error's
         BookKeeper name); anything unexpected is EIO and logged, never a dropped request.
         Every non-EOK answer goes through ``refusals`` (counted by operation and status,
         logged with its reason and peer, api/server/refusals.py), the listener's adds too.
    BK2. A fencing read answers once the fence is durable (BookKeeper answers once its fence
         future completes), then carries the entry or ENOENTRY; without a master key it is
         EUA and fences nothing.
    BK3. Long-poll reads (``previousLAC``) wait on the bookie's own LAC waiters
         (``read_lac(wait_for_gt=...)``), then answer ``maxLAC``, and with ENTRY_PIGGYBACK
         the entry after ``previousLAC`` when the LAC passed it.
    BK4. The protocol carries no digest type. A ledger the bookie has no type for takes
         the one its first entry's bytes prove (CRC32C, else CRC32); an entry neither
         checksum matches makes the ledger DUMMY, whose entries the bookie stores without
         checking (Apache BookKeeper checks no digest at all). docs/bookkeeper-protocol.md §4.
         BK4a: the index it looks in is open only once replay ends; before, an add is
         answered EREADONLY ("replaying"), as the add itself would be.
    BK6. A request of a protocol version BookKeeper's bookie does not serve (v3: a header
         other than VERSION_THREE, adds too; v2: above version 2) is EBADVERSION and does
         nothing, as BookKeeper's ``isVersionCompatible``.
    BK5. An add that needs no read first (the ledger's runtime loaded, a new id) is begun
         in the listener's own callback and answered from its journal future's, with no
         task: ``Bookie.try_add_now``, the same admission, cache and journal steps as
         ``add_entry``. Anything else (recovery adds, re-adds, a ledger's first touch)
         takes the whole coroutine.
    BK7. A plain read (no fence, no long poll) is begun and answered by the listener itself,
         with no task (api/server/bk_reads.py PRD1-PRD5), through ``Bookie.begin_read``
         and ``lac_now``: the same checks and reads as ``_read_v3`` and ``_read_v2`` here.
"""

from __future__ import annotations

import logging
import struct

from api.bkproto import availability, v2, v3
from api.bkproto.status import bk_name, v2_code, v3_status
from api.server import bk_timing
from api.server.bk_room import read_entry as bounded  # bk_budget.py PB7
from api.server.refusals import RefusalLog
from bookie import entry as entry_mod
from bookie.entry import DigestType
from bookie.errors import BadRequest, BookieError, NoEntry, Unauthorized
from bookie.node import NOT_NOW

log = logging.getLogger("bookie.bkproto")

_OP = v3.OPERATIONS
_OK = v3.STATUS["EOK"]
DEFERRED_SYNC = 0x1  # WriteFlag.DEFERRED_SYNC
READ_FLAG_FENCE, READ_FLAG_PIGGYBACK = 1, 2
ADD_FLAG_RECOVERY = 1
GET_INFO_TOTAL, GET_INFO_FREE = 1, 2
_IDS = struct.Struct(">qq")
BATCH_HEAD = v2.RESPONSE_HEADERS_SIZE + 8 + 4  # a v2 batch answer's own: size, headers, id
#: Ledgers whose digest type is known, kept per bookie so the hot path looks it up once.
KNOWN_TYPES_MAX = 100_000


def unexpected(what: str, exc: BaseException) -> None:
    if not isinstance(exc, BookieError):
        log.error("%s failed unexpectedly: %r", what, exc)


class DigestTypes:
    """BK4: the digest type an add names to ``Bookie.add_entry`` for its ledger."""

    def __init__(self, bookie) -> None:
        self.bookie = bookie
        self.known: dict[int, bool] = {}

    def for_add(self, ledger_id: int, entry) -> DigestType | None:
        """None when the bookie knows the ledger's type; else the one ``entry`` proves."""
        if ledger_id in self.known:
            return None
        self.bookie.check_serving()  # BK4a
        state = self.bookie.storage.ledgers.get(ledger_id)
        if state is not None and state.digest_type:
            if len(self.known) >= KNOWN_TYPES_MAX:
                self.known.clear()
            self.known[ledger_id] = True
            return None
        return sniff_digest_type(entry)


def sniff_digest_type(entry) -> DigestType:
    for dtype in (DigestType.CRC32C, DigestType.CRC32):
        if len(entry) >= entry_mod.METADATA_LENGTH + dtype.digest_length \
                and entry_mod.entry_digest_ok(entry, dtype):
            return dtype
    return DigestType.DUMMY


class BkOperations:
    """The answers of one bookie; shared by every connection of its listener."""

    def __init__(self, bookie) -> None:
        self.bookie = bookie
        self.digests = DigestTypes(bookie)
        self.refusals = RefusalLog("bookie_port", bookie.stats.bk_refused)
        self.op_stats = bookie.stats.ops  # bk_timing.py BT1

    def refused(self, op: str, error: BaseException, peer, count: int = 1) -> None:
        self.refusals.refused((op, bk_name(error)), error, peer, count)

    # -- v3 ----------------------------------------------------------------------------

    def v3_response(self, request, status: int):
        response = v3.Response()
        response.header.CopyFrom(request.header)
        response.status = status
        return response

    async def v3(self, request, peer=None, arrived: float | None = None) -> bytes:
        """The framed answer to one v3 request other than an add (BK1); adds are begun with
        ``begin_add`` or ``begin_add_run`` and answered by the listener (BK5). Each handler
        returns its response and the error it answers, if any. ``arrived``: when its bytes
        came (bk_timing.py BT2), else now."""
        begun = bk_timing.now()
        header = request.header
        name = _OPERATION_NAMES.get(header.operation)
        handler = _V3_HANDLERS.get(name)
        if handler is None or not request.HasField(v3.BODY_FIELDS[name][0]):
            why = f"operation {header.operation} is not served" if handler is None else \
                f"{name} without its {v3.BODY_FIELDS[name][0]}"
            # UNKNOWN, not the number: a client's numbers must not make label values.
            self.refused(name or "UNKNOWN", BadRequest(why), peer)
            bk_timing.refused(self.op_stats, bk_timing.v3_op(name, request), arrived)
            return v3.frame(self.v3_response(request, v3.STATUS["EBADREQ"]))
        refused = self.v3_version_refused(request, name, peer, arrived)
        if refused is not None:
            return refused
        response, error = await handler(self, request)
        if error is not None:
            self.refused(name, error, peer)
        bk_timing.answered(self.op_stats, bk_timing.v3_op(name, request), error is None,
                           begun if arrived is None else arrived, begun)
        return v3.frame(response)

    def v3_version_refused(self, request, name: str, peer=None,
                           arrived: float | None = None) -> bytes | None:
        """BK6, v3 and adds too: EBADVERSION (the status alone, a client reads the body's
        only on EOK) and nothing done; None when the version is served."""
        if (version := request.header.version) == v3.PROTOCOL_VERSIONS["VERSION_THREE"]:
            return None
        self.refusals.refused((name, "EBADVERSION"), f"protocol version {version}", peer)
        bk_timing.refused(self.op_stats, bk_timing.v3_op(name, request), arrived)
        return v3.frame(self.v3_response(request, v3.STATUS["EBADVERSION"]))

    def begin_add(self, ledger_id: int, entry_id: int, data, master_key: bytes,
                  recovery: bool = False, deferred_sync: bool = False):
        """BK5: an add begun without a task where nothing must be read first. Returns the
        future of its durable record, None once acknowledged (deferred sync), or else the
        coroutine of the whole ``Bookie.add_entry``; raises for a refused add."""
        data = bytes(data)
        _check_key(master_key)
        if len(data) < _IDS.size or _IDS.unpack_from(data, 0) != (ledger_id, entry_id):
            raise BadRequest(f"entry bytes do not start with ledger {ledger_id}, entry "
                             f"{entry_id}")
        dtype = self.digests.for_add(ledger_id, data)
        if not recovery:
            outcome = self.bookie.try_add_now(ledger_id, entry_id, data, bytes(master_key),
                                              dtype, deferred_sync)
            if outcome is not NOT_NOW:
                return outcome
        return self.bookie.add_entry(ledger_id, entry_id, data, bytes(master_key),
                                     digest_type=dtype, recovery=recovery,
                                     deferred_sync=deferred_sync,
                                     room_wait_s=self.bookie.config.bookie_add_wait_ms / 1000)

    def begin_add_run(self, ledger_id: int, adds, master_key: bytes,
                      deferred_sync: bool = False):
        """BK5 for several adds of one ledger that arrived together (``adds``: (entry id,
        bytes) pairs): one admission, one journal item, one future, as a batch add over
        HTTP. Returns that future, None (deferred sync), or NOT_NOW when they must be
        added one by one (a read first, an id twice); raises when the run is refused as a
        whole, having stored nothing, so that each add can then get its own answer."""
        _check_key(master_key)
        # Every decoder gives bytes (api/bkproto: v2.plain_add, v3_add, protobuf), so the
        # entries are the pairs as they came; ids checked in one comprehension.
        entries, ids_of = adds, _IDS.unpack_from
        try:
            same = [ids_of(data, 0) for _, data in entries] == \
                [(ledger_id, entry_id) for entry_id, _ in entries]
        except struct.error:  # shorter than its ids
            same = False
        if not same:
            return NOT_NOW  # answered one by one, each with its own EBADREQ
        dtype = self.digests.for_add(ledger_id, entries[0][1])
        return self.bookie.try_add_run_now(ledger_id, entries, bytes(master_key), dtype,
                                           deferred_sync)

    async def _read_v3(self, request):
        read = request.readRequest
        response = self.v3_response(request, _OK)
        body = response.readResponse
        body.ledgerId, body.entryId = read.ledgerId, read.entryId
        try:
            await self._read_v3_into(read, body)
            error = None
        except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
            unexpected("READ_ENTRY", exc)
            error = exc
        body.status = response.status = v3_status(error)
        if error is not None:
            body.ClearField("body")
        return response, error

    async def _read_v3_into(self, read, body) -> None:
        bookie, ledger_id = self.bookie, read.ledgerId
        if _flag(read) == READ_FLAG_FENCE:
            await self.fence(ledger_id, read.masterKey if read.HasField("masterKey") else None)
            body.body = await bounded(bookie, ledger_id, read.entryId)
            return
        if not read.HasField("previousLAC"):
            body.body = await bounded(bookie, ledger_id, read.entryId)
            body.maxLAC = await bookie.read_lac(ledger_id)
            return
        previous = read.previousLAC  # BK3: a long poll
        timeout_ms = max(0, min(read.timeOut, 600_000)) if read.HasField("timeOut") else 0
        lac = await bookie.read_lac(ledger_id, previous, timeout_ms)
        if _flag(read) != READ_FLAG_PIGGYBACK:
            body.body = await bounded(bookie, ledger_id, read.entryId)
            body.maxLAC = lac
            return
        if read.entryId != v2.LAST_ADD_CONFIRMED:
            raise BadRequest("ENTRY_PIGGYBACK needs entry id -1 (LAST_ADD_CONFIRMED)")
        body.maxLAC = lac
        if lac > previous:
            body.entryId = previous + 1
            try:
                body.body = await bounded(bookie, ledger_id, previous + 1)
            except NoEntry:
                pass  # EOK without the entry, as BookKeeper answers

    async def fence(self, ledger_id: int, master_key) -> None:
        if master_key is None:
            raise Unauthorized(f"a fencing read of ledger {ledger_id} carries no master key")
        _check_key(master_key)
        await self.bookie.fence(ledger_id, bytes(master_key))

    async def _read_lac_v3(self, request):
        ledger_id = request.readLacRequest.ledgerId
        return await self._answer(request, "readLacResponse", ledger_id,
                                  lambda body: self._read_lac_into(ledger_id, body))

    async def _read_lac_into(self, ledger_id: int, body) -> None:
        explicit = self.bookie.ledger_state(ledger_id).explicit_lac
        if explicit is not None:
            body.lacBody = bytes(explicit)
        try:
            body.lastEntryBody = await bounded(self.bookie, ledger_id, -1)
        except NoEntry:
            if explicit is None:
                raise

    async def _write_lac_v3(self, request):
        write = request.writeLacRequest
        return await self._answer(
            request, "writeLacResponse", write.ledgerId,
            lambda _body: self._write_lac(write.ledgerId, write.masterKey, write.body))

    async def _write_lac(self, ledger_id: int, master_key: bytes, lac_body: bytes) -> None:
        _check_key(master_key)
        await self.bookie.write_lac(ledger_id, bytes(master_key), bytes(lac_body))

    async def _force_v3(self, request):
        ledger_id = request.forceLedgerRequest.ledgerId
        # BookKeeper's FORCE_LEDGER carries no master key and checks none.
        return await self._answer(request, "forceLedgerResponse", ledger_id,
                                  lambda _body: self.bookie.force(ledger_id, None))

    async def _bookie_info_v3(self, request):
        requested = request.getBookieInfoRequest.requested
        return await self._answer(request, "getBookieInfoResponse", None,
                                  lambda body: self._bookie_info_into(requested, body))

    async def _bookie_info_into(self, requested: int, body) -> None:
        total, free = self.bookie.ledger_space()
        if requested & GET_INFO_FREE:
            body.freeDiskSpace = free
        if requested & GET_INFO_TOTAL:
            body.totalDiskCapacity = total

    async def _list_entries_v3(self, request):
        ledger_id = request.getListOfEntriesOfLedgerRequest.ledgerId
        return await self._answer(request, "getListOfEntriesOfLedgerResponse", ledger_id,
                                  lambda body: self._list_entries_into(ledger_id, body))

    async def _list_entries_into(self, ledger_id: int, body) -> None:
        ranges = await self.bookie.entry_id_ranges(ledger_id)
        body.availabilityOfEntriesOfLedger = availability.encode_runs(ranges)

    async def _answer(self, request, field: str, ledger_id: int | None, fill):
        """BK1 for the v3 calls answered with one body: ``fill(body)`` fills it, and
        whatever it raises becomes the status of the body and of the response."""
        response = self.v3_response(request, _OK)
        body = getattr(response, field)
        if ledger_id is not None:
            body.ledgerId = ledger_id
        try:
            await fill(body)
            error = None
        except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
            unexpected(field, exc)
            error = exc
        body.status = response.status = v3_status(error)
        return response, error

    # -- v2 ----------------------------------------------------------------------------

    def v2_version_refused(self, request: v2.Request, peer=None) -> bytes | None:
        """BK6: a v2 request of a protocol version BookKeeper's bookie does not serve
        (above CURRENT_PROTOCOL_VERSION, 2; its signed byte makes 0x80-0xFF negative, so
        those too) is answered EBADVERSION and does nothing; None when it is served."""
        if request.version <= v2.CURRENT_PROTOCOL_VERSION or request.opcode == v2.AUTH:
            return None
        name = _V2_NAMES.get(request.opcode, "ADD_ENTRY")
        self.refusals.refused((name, "EBADVERSION"), f"protocol version {request.version}",
                              peer)
        bk_timing.refused(self.op_stats, "ADD_ENTRY" if name == "ADD_ENTRY" else
                          bk_timing.v2_op(request))
        if request.opcode == v2.BATCH_READ_ENTRY:
            return v2.encode_batch_response(request.version, v2.EBADVERSION, request.ledger_id,
                                            request.entry_id, request.request_id, ())
        return v2.encode_response(request.version, request.opcode, v2.EBADVERSION,
                                  request.ledger_id, request.entry_id)

    async def v2(self, request: v2.Request, peer=None, arrived=None, first_max=None):
        """The framed answer to one v2 request (BK1), or a batch's Oversize (PB7)."""
        begun = bk_timing.now()
        opcode, version = request.opcode, request.version
        error, data, body = None, b"", b""
        try:
            if opcode == v2.READENTRY:
                data = await self._read_v2(request)
            else:
                body = await self._batch_read_v2(request, first_max)
                if body.__class__ is not bytes:
                    return body  # Oversize: larger than first_max
        except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
            unexpected(f"v2 opcode {opcode}", exc)
            error = exc
        code = v2_code(error)
        if error is not None:
            self.refused(_V2_NAMES[opcode], error, peer)
        bk_timing.answered(self.op_stats, bk_timing.v2_op(request), error is None,
                           begun if arrived is None else arrived, begun)
        if opcode == v2.BATCH_READ_ENTRY:
            return v2.encode_batch_body_response(version, code, request.ledger_id,
                                                 request.entry_id, request.request_id,
                                                 body if error is None else b"")
        return v2.encode_response(version, opcode, code, request.ledger_id, request.entry_id,
                                  data if error is None else b"")

    async def _read_v2(self, request: v2.Request) -> bytes:
        if request.fencing:
            await self.fence(request.ledger_id, request.master_key)
        return await bounded(self.bookie, request.ledger_id, request.entry_id)

    async def _batch_read_v2(self, request: v2.Request, first_max: int | None = None):
        """BP-62: entries from ``entry_id`` within maxCount and maxSize (the frame counted as
        BookKeeper counts it), framed as the answer's body; the first always, or its error."""
        if request.fencing:
            await self.fence(request.ledger_id, request.master_key)
        first = request.entry_id
        if first < 0:
            raise BadRequest(f"batch read from entry {first}")
        count = request.max_count if request.max_count > 0 else self.bookie.config.max_read_batch
        return await self.bookie.read_batch_framed(request.ledger_id, first, first + count - 1,
                                                   request.max_size - BATCH_HEAD, first_max)


def _flag(body) -> int:
    """A request's ``flag``, 0 when unset: proto2 reads an unset enum as its first value
    (FENCE_LEDGER, RECOVERY_ADD), which would fence every read and privilege every add."""
    return body.flag if body.HasField("flag") else 0


def _check_key(master_key) -> None:
    if master_key is None or len(master_key) != v2.MASTER_KEY_LENGTH:
        raise BadRequest(f"a master key is {v2.MASTER_KEY_LENGTH} bytes")


_OPERATION_NAMES = {number: name for name, number in _OP.items()}
#: BookKeeper's names of the v2 requests answered here (BookieProtocol's opcodes).
_V2_NAMES = {v2.READENTRY: "READ_ENTRY", v2.BATCH_READ_ENTRY: "BATCH_READ_ENTRY"}
_V3_HANDLERS = {"READ_ENTRY": BkOperations._read_v3,
                "READ_LAC": BkOperations._read_lac_v3, "WRITE_LAC": BkOperations._write_lac_v3,
                "FORCE_LEDGER": BkOperations._force_v3,
                "GET_BOOKIE_INFO": BkOperations._bookie_info_v3,
                "GET_LIST_OF_ENTRIES_OF_LEDGER": BkOperations._list_entries_v3}
# AUTH and START_TLS change the connection, not the bookie: bk_tls.py answers them.
