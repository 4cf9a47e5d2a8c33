"""BkBookieClient: one bookie over BookKeeper's v3 protocol, with the methods, arguments and
return shapes of ``BookieClient`` (api/client/bookie_client.py) that the replicated client,
recovery and autorecovery call, so either one serves ``Transport.client`` (api/client/
bookies.py). Each call is the request BookKeeper's own client sends for it (read, not
copied); where the HTTP answer says more than BookKeeper's, the missing part is asked with a
second request, named at each method.

Invariants:
    BC1. Errors are the ones HTTP raises (api/client/bkport/errors.py): a v3 status as the
         bookie error it names; a lost connection or a timeout as an OSError /
         asyncio.TimeoutError (a bookie failure, api/client/bookies.py BOOKIE_FAILURES);
         a START_TLS refused or a failed handshake as StartTlsFailed, an OSError too.
    BC2. A batch of adds is sent whole before any answer is awaited (pipelined on the one
         connection); its error is the most telling one: Fenced before any other bookie
         error, a bookie error before a transport failure. Entries other than the one
         reported may or may not be stored, as with any unacknowledged add (L1).
    BC3. A held read asks at most ``HELD_READS_MAX`` entries at once and answers the ids it
         asked up to the first one it got no answer for (that id's error, if it is the
         first); ENOENTRY leaves an id out, so the caller's plan goes on (BR1 in
         api/client/batch_read.py).
    BC5. A held read of every id in a row (step 1: a one-bookie read, or E == Qw) is one
         v2 BATCH_READ_ENTRY (batch_v2.py BV1-BV3): its run from the first id, then the
         caller asks again from the id after it. A bookie that does not offer batch reads
         (BookKeeper before 4.17) is read as in BC3 from then on. Striped reads (step > 1)
         stay BC3: a batch stops at the first id a bookie does not hold, as BookKeeper's
         client reads in batches only where every bookie holds every id.
    BC4. Operations BookKeeper's protocol has no request for raise
         ``NotOnBookKeeperProtocol`` naming the operation, never a silent substitute.
"""

from __future__ import annotations

import asyncio
import ssl
import struct

from api import wire
from api.bkproto import availability, v3
from api.client.bkport.batch_v2 import BatchUnsupported, V2BatchReader
from api.client.bkport.connection import BkConnection
from api.client.bkport.errors import OK, NotOnBookKeeperProtocol, status_error
from bookie.entry import parse_lac_body, piggybacked_lac
from bookie.errors import BookieError, Fenced, NoEntry, NoLedger, Unavailable

#: Reads one held read keeps in flight (BC3).
HELD_READS_MAX = 128
READ_FLAG_FENCE, READ_FLAG_PIGGYBACK = 1, 2
ADD_FLAG_RECOVERY = 1
WRITE_FLAG_DEFERRED_SYNC = 1
GET_INFO_TOTAL, GET_INFO_FREE = 1, 2
_IDS = struct.Struct(">qq")


def _split(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


def _entry_id(entry: bytes) -> int:
    return _IDS.unpack_from(entry, 0)[1]


def _rank(error: BaseException) -> int:
    """BC2: the lower, the more it tells the caller."""
    if isinstance(error, Fenced):
        return 0
    if isinstance(error, BookieError) and not isinstance(error, Unavailable):
        return 1
    return 2 if isinstance(error, BookieError) else 3


class BkBookieClient:
    """``BkBookieClient("host:port")``: the bookie's BookKeeper-protocol endpoint (its
    ``bookie-rpc`` registration, our bookies' ``bookie_port``). Thread-safety: one event
    loop; share one client among that loop's tasks (they share its one connection)."""

    def __init__(self, address: str, connect_timeout_s: float | None = None,
                 request_timeout_s: float | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        """``tls``: a client context (api/tls.py ``client_context``): every connection
        starts TLS with BookKeeper's START_TLS before any request (connection.py KC6)."""
        host, port = _split(address)
        timeouts = {k: v for k, v in (("connect_timeout_s", connect_timeout_s),
                                      ("request_timeout_s", request_timeout_s)) if v}
        self.address = address
        self.connection = BkConnection(host, port, tls=tls, **timeouts)
        #: BC5: catch-up reads of every id in a row go as v2 batch reads (BP-62); not
        #: with TLS: v2 has no START_TLS, and BookKeeper's client batches over v2 only.
        self.batches = None if tls is not None else V2BatchReader(
            host, port, self.connection.connect_timeout_s, self.connection.request_timeout_s)

    async def __aenter__(self) -> "BkBookieClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        self.connection.close()
        if self.batches is not None:
            self.batches.close()

    async def _call(self, operation: str, timeout_s: float | None = None, **fields):
        """The operation's response body, EOK; else the status's error (BC1)."""
        request_field, answer_field, _ = v3.BODY_FIELDS[operation]
        request = self.connection.request(operation)
        field = getattr(request, request_field)
        for name, value in fields.items():
            setattr(field, name, value)
        response = await self.connection.call(request, timeout_s)
        body = getattr(response, answer_field)
        status = body.status if response.HasField(answer_field) else response.status
        if response.status != OK or status != OK:
            raise status_error(response.status if response.status != OK else status,
                               f"{operation} of ledger {fields.get('ledgerId', '-')} on "
                               f"{self.address}")
        return body

    # -- adds ---------------------------------------------------------------------------

    async def add_entry(self, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes,
                        digest_type: str | None = None, recovery: bool = False,
                        deferred_sync: bool = False) -> dict:
        """``digest_type`` is not sent: BookKeeper's protocol does not carry it (the
        bookie infers it, docs/bookkeeper-protocol.md §4)."""
        extra = {"flag": ADD_FLAG_RECOVERY} if recovery else {}
        if deferred_sync:
            extra["writeFlags"] = WRITE_FLAG_DEFERRED_SYNC
        await self._call("ADD_ENTRY", ledgerId=ledger_id, entryId=entry_id,
                         masterKey=bytes(master_key), body=bytes(entry), **extra)
        return {"ledgerId": ledger_id, "entryId": entry_id}

    async def add_batch(self, ledger_id: int, entries: list[bytes], master_key: bytes,
                        digest_type: str | None = None, recovery: bool = False,
                        deferred_sync: bool = False) -> list[int]:
        """BC2: one ADD_ENTRY per entry, all in flight together; the entries' ids."""
        ids = [_entry_id(entry) for entry in entries]
        results = await asyncio.gather(
            *(self.add_entry(ledger_id, entry_id, entry, master_key, recovery=recovery,
                             deferred_sync=deferred_sync)
              for entry_id, entry in zip(ids, entries)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise min(errors, key=_rank)
        return ids

    async def add_batch_body(self, ledger_id: int, body: bytes, master_key: bytes,
                             digest_type: str | None = None, recovery: bool = False,
                             deferred_sync: bool = False) -> None:
        """``add_batch`` of a body already encoded (``wire.encode_batch``)."""
        await self.add_batch(ledger_id, wire.decode_batch(body, 2**31 - 1, 2**31 - 1),
                             master_key, digest_type, recovery, deferred_sync)

    # -- reads --------------------------------------------------------------------------

    async def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        read = await self._call("READ_ENTRY", ledgerId=ledger_id, entryId=entry_id)
        if not read.HasField("body"):
            raise NoEntry(f"entry {ledger_id}/{entry_id}: EOK without a body from "
                          f"{self.address}")
        return read.body

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """As HTTP's: from ``first`` up to the first entry missing; none is NoEntry."""
        entries, _ = await self.read_held(ledger_id, first, last)
        run = []
        for expected, entry in zip(range(first, last + 1), entries):
            if _entry_id(entry) != expected:
                break
            run.append(entry)
        if not run:
            raise NoEntry(f"entry {ledger_id}/{first} is not stored on {self.address}")
        return run

    async def read_held(self, ledger_id: int, first: int, last: int,
                        step: int = 1) -> tuple[list[bytes], int]:
        """(the entries held among first, first+step, ... <= last, the last id examined):
        BC5, every id in a row (step 1) as one v2 batch read where the bookie offers it;
        else BC3, one READ_ENTRY per id."""
        if step == 1 and self.batches is not None and self.batches.offered is not False \
                and first <= last:
            try:
                held = await self.batches.read(ledger_id, first, last - first + 1)
            except BatchUnsupported:
                pass  # BV3: entry by entry, from now on
            else:  # BV1: a run from first; the id after it is missing, or the bound hit
                return held, (first + len(held) - 1 if held else first)
        ids = list(range(first, last + 1, step))[:HELD_READS_MAX]
        if not ids:
            return [], last
        results = await asyncio.gather(*(self.read_entry(ledger_id, e) for e in ids),
                                       return_exceptions=True)
        held, scanned = [], ids[-1]
        for entry_id, result in zip(ids, results):
            if isinstance(result, NoEntry):
                continue
            if isinstance(result, BaseException):
                if entry_id == ids[0]:
                    raise result
                scanned = entry_id - step
                break
            held.append(result)
        return held, scanned

    async def read_held_body(self, ledger_id: int, first: int, last: int,
                             step: int = 1) -> tuple[bytes, int]:
        held, scanned = await self.read_held(ledger_id, first, last, step)
        return wire.encode_batch(held), scanned

    # -- fencing and the LAC ------------------------------------------------------------

    async def fence(self, ledger_id: int, master_key: bytes) -> dict:
        """BookKeeper's recovery fence: a fencing read of entry -1 (the last one), answered
        once the fence is durable; then READ_LAC for an explicit LAC above the last
        entry's, as HTTP's fence answers the bookie's LAC. ``{lac, lastEntryId}``."""
        last_entry_id = lac = -1
        try:
            read = await self._call("READ_ENTRY", ledgerId=ledger_id, entryId=-1,
                                    flag=READ_FLAG_FENCE, masterKey=bytes(master_key))
            if read.HasField("body"):
                last_entry_id, lac = _entry_id(read.body), piggybacked_lac(read.body)
        except NoEntry:
            pass  # fenced, and it holds no entry of the ledger
        lac = max(lac, await self.read_lac(ledger_id))
        return {"lac": lac, "lastEntryId": last_entry_id}

    async def _lac_and_last(self, ledger_id: int) -> tuple[int, int]:
        """(the bookie's LAC, its last entry id) from READ_LAC: the higher of the explicit
        LAC body's and the last entry's piggybacked one; -1 for what it has not."""
        lac = last = -1
        try:
            answer = await self._call("READ_LAC", ledgerId=ledger_id)
        except NoEntry:
            return lac, last  # neither an explicit LAC nor an entry
        if answer.HasField("lacBody"):
            lac = parse_lac_body(answer.lacBody)[1]
        if answer.HasField("lastEntryBody") and len(answer.lastEntryBody) >= 24:
            last = _entry_id(answer.lastEntryBody)
            lac = max(lac, piggybacked_lac(answer.lastEntryBody))
        return lac, last

    async def read_lac(self, ledger_id: int, wait_for_gt: int | None = None,
                       timeout_ms: int | None = None) -> int:
        """The bookie's LAC; with ``wait_for_gt``, BookKeeper's long poll (``read_lac_
        long_poll``) for up to ``timeout_ms``."""
        if wait_for_gt is None:
            return (await self._lac_and_last(ledger_id))[0]
        return (await self.read_lac_long_poll(ledger_id, wait_for_gt, timeout_ms or 0))[0]

    async def read_lac_long_poll(self, ledger_id: int, previous_lac: int,
                                 timeout_ms: int) -> tuple[int, bytes | None]:
        """(LAC, the entry ``previous_lac + 1`` or None): READ_ENTRY of entry -1 with
        ``previousLAC``, ``timeOut`` and ENTRY_PIGGYBACK, as BookKeeper's
        ``readLastAddConfirmedAndEntry``; the bookie answers when its LAC passes
        ``previous_lac`` or the time is up. The request's deadline is the poll's plus this
        connection's request timeout."""
        read = await self._call(
            "READ_ENTRY", timeout_s=timeout_ms / 1000 + self.connection.request_timeout_s,
            ledgerId=ledger_id, entryId=-1, previousLAC=previous_lac, timeOut=timeout_ms,
            flag=READ_FLAG_PIGGYBACK)
        lac = read.maxLAC if read.HasField("maxLAC") else previous_lac
        entry = read.body if read.HasField("body") and read.body else None
        return lac, entry

    async def write_lac(self, ledger_id: int, master_key: bytes, body: bytes) -> int:
        """WRITE_LAC of an explicit LAC body (bookie/entry.py ``parse_lac_body``), then the
        bookie's LAC (READ_LAC), as HTTP answers it."""
        await self._call("WRITE_LAC", ledgerId=ledger_id, lac=parse_lac_body(body)[1],
                         masterKey=bytes(master_key), body=bytes(body))
        return await self.read_lac(ledger_id)

    async def force(self, ledger_id: int, master_key: bytes) -> int:
        """FORCE_LEDGER (it carries no master key: BookKeeper's checks none, where HTTP's
        force checks it), then the last entry id (READ_LAC), as HTTP answers it; -1 where
        the bookie holds nothing of the ledger (its FORCE_LEDGER is EOK then, FL1 in
        bookie/node/writes.py, where HTTP's force is 404)."""
        await self._call("FORCE_LEDGER", ledgerId=ledger_id)
        try:
            return (await self._lac_and_last(ledger_id))[1]
        except NoLedger:  # ours answers READ_LAC so; BookKeeper's, ENOENTRY
            return -1

    # -- what the bookie holds, and the bookie ------------------------------------------

    async def entry_id_ranges(self, ledger_id: int) -> list[list[int]]:
        """``[[first, last], ...]`` from GET_LIST_OF_ENTRIES_OF_LEDGER."""
        answer = await self._call("GET_LIST_OF_ENTRIES_OF_LEDGER", ledgerId=ledger_id)
        runs: list[list[int]] = []
        for entry_id in availability.decode(answer.availabilityOfEntriesOfLedger):
            if runs and runs[-1][1] + 1 == entry_id:
                runs[-1][1] = entry_id
            else:
                runs.append([entry_id, entry_id])
        return runs

    async def info(self) -> dict:
        """GET_BOOKIE_INFO, in the part of HTTP's ``/v1/bookie/info`` shape it can fill."""
        answer = await self._call("GET_BOOKIE_INFO", requested=GET_INFO_TOTAL | GET_INFO_FREE)
        return {"disks": {"ledgers": {"freeBytes": answer.freeDiskSpace,
                                      "totalBytes": answer.totalDiskCapacity}}}

    async def ready(self) -> bool:
        """Whether the bookie answers GET_BOOKIE_INFO."""
        try:
            await self.info()
        except (BookieError, OSError, asyncio.TimeoutError):
            return False
        return True

    # -- BC4 ----------------------------------------------------------------------------

    async def ledger_info(self, ledger_id: int) -> dict:
        raise NotOnBookKeeperProtocol("ledger_info", self.address)

    async def list_ledgers(self, start: int = 0, limit: int | None = None) -> dict:
        raise NotOnBookKeeperProtocol("list_ledgers", self.address)

    async def delete_ledger(self, ledger_id: int) -> dict:
        raise NotOnBookKeeperProtocol("delete_ledger", self.address)

    async def checkpoint(self) -> dict:
        raise NotOnBookKeeperProtocol("checkpoint", self.address)

    async def health(self) -> dict:
        raise NotOnBookKeeperProtocol("health", self.address)

