"""How the replicated client reaches bookies (docs/cluster.md §1, §3): the Transport seam (a
client per bookie and the registered bookies: HTTP and ZooKeeper here, in-memory bookies in
the deterministic simulator), what counts as a bookie failing, and the timeouts.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp

from api.client.bookie_client import BookieClient
from api.client.metadata import LedgerMetadataStore
from api.client.zookeeper import ZkMetadataStore, alive_bookies, writable_bookies
from bookie.errors import IOFailure, ReadOnly

#: A bookie that answers no add within this is treated as failed (an ensemble change).
ADD_TIMEOUT_S = 10.0
#: A bookie that answers no read within this is passed over (the next replica).
READ_TIMEOUT_S = 10.0
#: A read unanswered this long also goes to the next replica (BookKeeper's speculative read).
SPECULATIVE_READ_S = 0.5
#: Failures after which a bookie is passed over (a reader) or replaced (a writer): refused
#: connections, timeouts, 5xx, EREADONLY.
BOOKIE_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError, IOFailure, ReadOnly)


def _url(bookie_id: str) -> str:
    return f"http://{bookie_id}"  # a bookie id is host:port of its HTTP endpoint (§1)


class Transport(Protocol):
    """What the client needs of the world besides the metadata store: a client per bookie
    and the registered bookies. The simulator's in-memory cluster implements it too."""

    def client(self, bookie_id: str) -> BookieClient: ...

    async def writable_bookies(self) -> list[str]: ...

    async def alive_bookies(self) -> set[str]: ...


class HttpTransport:
    """Bookies over HTTP, membership from ZooKeeper's ``available/`` (docs/cluster.md §1)."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self.store = store

    def client(self, bookie_id: str) -> BookieClient:
        return BookieClient(_url(bookie_id))

    async def writable_bookies(self) -> list[str]:
        return await asyncio.to_thread(writable_bookies, self.store.client, self.store.root)

    async def alive_bookies(self) -> set[str]:
        return await asyncio.to_thread(alive_bookies, self.store.client, self.store.root)


class Bookies(Protocol):
    """What the writer, reader and recovery use of the front door (``BookKeeper`` in
    api/client/ensemble.py, which composes them): named here, below all of them, so none of
    them imports the door."""

    store: LedgerMetadataStore
    add_timeout_s: float
    read_timeout_s: float
    speculative_read_s: float

    def client(self, bookie_id: str) -> BookieClient: ...

    async def writable_bookies(self) -> list[str]: ...

    async def alive_bookies(self) -> set[str]: ...
