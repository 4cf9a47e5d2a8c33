"""BookKeeper's v2 BATCH_READ_ENTRY (BP-62) for the client's catch-up reads: one more
connection per bookie, speaking v2, for batch reads only (docs/bookkeeper-protocol.md §3).
BookKeeper's own client reads in batches only over v2 and only where ensemble size equals
write quorum (every bookie holds every id): a batch runs from its first id and stops at the
first one the bookie does not hold, so over a striped ensemble it would stop at once.

Invariants:
    BV1. A batch answers consecutive ids from its first: the entries returned are
         ``first, first+1, ...``, at most ``max_count`` of them and about ``max_size``
         bytes; fewer means the next id is missing there, or the size bound was reached.
    BV2. Answers are matched by the request id the batch carries (v2 has no txnId), from
         one counter per connection, never reused; one that matches no pending request is
         dropped (its request timed out), one that is not a v2 answer loses the
         connection, failing every pending batch (as KC3 in connection.py).
    BV3. A bookie that answers EBADREQ, or closes the connection at a batch read before
         answering any, does not offer it (BookKeeper before 4.17): the caller stops
         asking it and reads entry by entry, as before.
"""

from __future__ import annotations

import asyncio
import itertools

from api.bkproto import v2
from api.client.bkport.connection import BkConnection, ConnectionLost, _Wire
from bookie import errors

#: The bound a batch asks for: BookKeeper's client asks for its frame size by default;
#: 4 MiB keeps one batch well inside our bookie's connection buffer (PB2/PB7).
BATCH_BYTES_MAX = 4 << 20
BATCH_ENTRIES_MAX = 1000


class BatchUnsupported(errors.BadRequest):
    """BV3: the bookie does not serve v2 BATCH_READ_ENTRY."""


def _rc_error(rc: int, what: str) -> errors.BookieError:
    kinds = {v2.ENOLEDGER: errors.NoLedger, v2.ENOENTRY: errors.NoEntry,
             v2.EBADREQ: BatchUnsupported, v2.EUA: errors.Unauthorized,
             v2.EFENCED: errors.Fenced, v2.ETOOMANYREQUESTS: errors.TooManyRequests}
    return kinds.get(rc, errors.IOFailure)(f"{what}: v2 rc {rc}")


class _V2Wire(_Wire):
    """BV2: v2 answers, matched by the batch's request id."""

    KIND = "v2 batch"

    @staticmethod
    def decode_answer(packet: bytes):
        return v2.decode_response(packet)

    @staticmethod
    def answer_key(answer) -> int:
        return answer.request_id


class V2BatchReader(BkConnection):
    """Batch reads of one bookie over a v2 connection of their own (plain: v2 has no
    START_TLS); connecting, sharing one attempt and losing it as BkConnection does (KC1,
    KC3, KC4). One event loop."""

    def __init__(self, host: str, port: int, connect_timeout_s: float,
                 request_timeout_s: float) -> None:
        super().__init__(host, port, connect_timeout_s, request_timeout_s)
        self.offered: bool | None = None   # BV3: None until a bookie answered or refused
        self._ids = itertools.count(1)     # BV2

    async def _open(self) -> _V2Wire:
        loop = asyncio.get_running_loop()
        _, wire = await loop.create_connection(lambda: _V2Wire(self), self.host, self.port)
        return wire

    async def read(self, ledger_id: int, first: int, max_count: int) -> list[bytes]:
        """The entries ``first, first+1, ...`` the bookie holds in a row (BV1), at most
        ``max_count``; [] when ``first`` itself is not there. NoLedger, BatchUnsupported
        (BV3), the other statuses' errors, ConnectionLost or a timeout otherwise."""
        wire = await self._connected()
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        wire.pending[request_id] = future
        wire.transport.write(v2.encode_batch_read(
            ledger_id, first, request_id, min(max_count, BATCH_ENTRIES_MAX), BATCH_BYTES_MAX))
        try:
            answer = await asyncio.wait_for(future, self.request_timeout_s)
        except ConnectionLost:
            if not wire.answered and self.offered is None:  # BV3: closed at our first
                self.offered = False  # batch ever: not offered
                raise BatchUnsupported(f"bookie {self.address} closed the connection at a "
                                       f"v2 batch read") from None
            raise
        finally:
            wire.pending.pop(request_id, None)
        if answer.rc == v2.ENOENTRY:
            self.offered = True
            return []
        if answer.rc != v2.EOK:
            error = _rc_error(answer.rc, f"BATCH_READ_ENTRY of ledger {ledger_id} from "
                                         f"{first} on {self.address}")
            if isinstance(error, BatchUnsupported):
                self.offered = False
            raise error
        self.offered = True
        return list(answer.entries)
