"""The ledger operations of ``BookieClient`` over BookKeeper's binary protocol (v3), for the
drills and tests/support/checker.py: one TCP connection to a bookie's ``bookie_port``
shared by concurrent callers, answers matched by txnId, each non-EOK status raised as the
bookie error it names. Deletes (an admin operation BookKeeper's protocol has not) and
ledger info go over HTTP through ``http``."""

from __future__ import annotations

import asyncio
import itertools
import struct

from api.bkproto import v3
from bookie import errors
from bookie.entry import piggybacked_lac

_I32 = struct.Struct(">i")
_ERRORS = {"ENOLEDGER": errors.NoLedger, "ENOENTRY": errors.NoEntry,
           "EBADREQ": errors.BadRequest, "EUA": errors.Unauthorized,
           "EFENCED": errors.Fenced, "EREADONLY": errors.ReadOnly,
           "ETOOMANYREQUESTS": errors.TooManyRequests, "EIO": errors.IOFailure,
           "EBADVERSION": errors.BadRequest, "EUNKNOWNLEDGERSTATE": errors.IOFailure}
_NAMES = {number: name for name, number in v3.STATUS.items()}
FAR_LAC = 2**62  # a previousLAC no ledger reaches: the read answers maxLAC alone
_LIVE: set = set()


class BkApi:
    def __init__(self, reader, writer, http) -> None:
        self.reader, self.writer, self.http = reader, writer, http
        self.txn = itertools.count(1)
        self.waiting: dict[int, asyncio.Future] = {}
        self.answered = 0  # calls answered EOK
        self.pump = asyncio.ensure_future(self._read_answers())
        # Held until its connection ends: a caller cancelled between connect and keeping
        # the object (a drill's timeout) must not leave a pending task to the collector.
        _LIVE.add(self)
        self.pump.add_done_callback(lambda _done: _LIVE.discard(self))

    @classmethod
    async def connect(cls, port: int, http, host: str = "127.0.0.1") -> "BkApi":
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, http)

    async def close(self) -> None:
        self.pump.cancel()
        await asyncio.gather(self.pump, return_exceptions=True)
        self.writer.close()
        try:  # bounded: a paused bookie (SIGSTOP) never reads what is left to flush
            await asyncio.wait_for(self.writer.wait_closed(), 2.0)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass

    async def _read_answers(self) -> None:
        try:
            while True:
                length = _I32.unpack(await self.reader.readexactly(4))[0]
                response = v3.decode_response(await self.reader.readexactly(length))
                future = self.waiting.pop(response.header.txnId, None)
                if future is not None and not future.done():
                    future.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            lost = ConnectionResetError(f"bookie connection lost: {exc!r}")
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(lost)
            self.waiting.clear()

    async def call(self, operation: str, **body):
        request = v3.Request()
        request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
        request.header.operation = v3.OPERATIONS[operation]
        request.header.txnId = txn = next(self.txn)
        field = getattr(request, v3.BODY_FIELDS[operation][0])
        field.SetInParent()
        for name, value in body.items():
            setattr(field, name, value)
        if self.pump.done():
            raise ConnectionResetError("bookie connection lost")
        future = asyncio.get_running_loop().create_future()
        self.waiting[txn] = future
        self.writer.write(v3.frame(request))
        response = await future
        if response.status != v3.STATUS["EOK"]:
            name = _NAMES.get(response.status, "EIO")
            raise _ERRORS.get(name, errors.IOFailure)(f"{operation}: {name}")
        self.answered += 1
        return response

    # -- BookieClient's operations ------------------------------------------------------

    async def add_entry(self, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes,
                        digest_type=None, recovery: bool = False,
                        deferred_sync: bool = False) -> None:
        extra = {"flag": 1} if recovery else {}
        await self.call("ADD_ENTRY", ledgerId=ledger_id, entryId=entry_id,
                        masterKey=master_key, body=entry,
                        writeFlags=1 if deferred_sync else 0, **extra)

    async def add_batch(self, ledger_id: int, entries: list[bytes], master_key: bytes,
                        digest_type=None, recovery: bool = False,
                        deferred_sync: bool = False) -> list[int]:
        """Pipelined adds, all sent before any answer; the first refusal is raised (others
        may be stored: in doubt, as any unacknowledged add)."""
        ids = [struct.unpack_from(">qq", entry)[1] for entry in entries]
        results = await asyncio.gather(
            *(self.add_entry(ledger_id, entry_id, entry, master_key, recovery=recovery,
                             deferred_sync=deferred_sync)
              for entry_id, entry in zip(ids, entries)), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return ids

    async def fence(self, ledger_id: int, master_key: bytes) -> dict:
        """A fencing read of the last entry, as BookKeeper's recovery sends it: the LAC is
        the one that entry carries."""
        try:
            response = await self.call("READ_ENTRY", ledgerId=ledger_id, entryId=-1, flag=1,
                                       masterKey=master_key)
        except errors.NoEntry:
            return {"lac": -1, "lastEntryId": -1}
        body = response.readResponse.body
        return {"lac": piggybacked_lac(body), "lastEntryId": struct.unpack_from(">q", body, 8)[0]}

    async def read_lac(self, ledger_id: int) -> int:
        response = await self.call("READ_ENTRY", ledgerId=ledger_id, entryId=-1,
                                   previousLAC=FAR_LAC, timeOut=0, flag=2)
        return response.readResponse.maxLAC

    async def write_lac(self, ledger_id: int, master_key: bytes, body: bytes) -> int:
        lac = struct.unpack_from(">q", body, 8)[0]
        await self.call("WRITE_LAC", ledgerId=ledger_id, lac=lac, masterKey=master_key,
                        body=body)
        return await self.read_lac(ledger_id)

    async def force(self, ledger_id: int, master_key: bytes) -> int:
        await self.call("FORCE_LEDGER", ledgerId=ledger_id)
        return -1

    async def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        response = await self.call("READ_ENTRY", ledgerId=ledger_id, entryId=entry_id)
        return response.readResponse.body

    async def delete_ledger(self, ledger_id: int) -> None:
        await self.http.delete_ledger(ledger_id)

    async def ledger_info(self, ledger_id: int) -> dict:
        return await self.http.ledger_info(ledger_id)
