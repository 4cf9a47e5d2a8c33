"""How the replicated client reaches bookies (docs/cluster.md §1, §3): the Transport seam (a
client per bookie and the registered bookies: HTTP and ZooKeeper here, in-memory bookies in
the deterministic simulator), what counts as a bookie failing, and the timeouts.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

import aiohttp

from api.client.bookie_client import BookieClient
from api.client.metadata import LedgerMetadataStore
from api.client.topology import Location, decode_rack_map, locate
from api.client.zookeeper import (ZkMetadataStore, alive_bookies, bookie_service_info,
                                  read_rack_map, writable_bookies)
from bookie.errors import IOFailure, ReadOnly

if TYPE_CHECKING:
    from api.client.placement import Placement

#: A bookie that answers no add within this is treated as failed (an ensemble change).
ADD_TIMEOUT_S = 10.0
#: A bookie that answers no read within this is passed over (the next replica).
READ_TIMEOUT_S = 10.0
#: A read unanswered this long also goes to the next replica (BookKeeper's speculative read).
SPECULATIVE_READ_S = 0.5
#: A bookie's published place is read again when this old (api/client/topology.py TP1).
LOCATION_TTL_S = 60.0
#: Failures after which a bookie is passed over (a reader) or replaced (a writer): refused
#: connections, timeouts, 5xx, EREADONLY.
BOOKIE_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError, IOFailure, ReadOnly)




class Transport(Protocol):
    """What the client needs of the world besides the metadata store: a client per bookie
    and the registered bookies. The simulator's in-memory cluster implements it too."""

    def client(self, bookie_id: str) -> BookieClient: ...

    async def writable_bookies(self) -> list[str]: ...

    async def alive_bookies(self) -> set[str]: ...

    async def learn(self, bookie_ids) -> None:
        """Look up how to reach these bookies (their scheme) before clients are made."""

    async def locations(self, bookie_ids) -> dict[str, Location]:
        """Where each of these bookies stands (api/client/topology.py TP1)."""


class HttpTransport:
    """Bookies over HTTP or HTTPS, membership from ZooKeeper's ``available/``
    (docs/cluster.md §1). A bookie's address and scheme are those of the HTTP endpoint its
    registration's service info names (learned when membership is read): its id is that
    host:port unless the bookie was given one (bookie_id); without service info, the id is
    taken as the address, https when this client has a TLS context (``tls``, api/tls.py)
    and http when not."""

    def __init__(self, store: ZkMetadataStore, tls=None) -> None:
        self.store = store
        self.tls = tls
        self._schemes: dict[str, str] = {}
        self._addresses: dict[str, str] = {}  # bookie id -> host:port of its HTTP endpoint
        self._properties: dict[str, dict[str, str]] = {}
        self._learned_at: dict[str, float] = {}  # when each bookie's properties were read

    def client(self, bookie_id: str) -> BookieClient:
        scheme = self._schemes.get(bookie_id) or ("https" if self.tls is not None else "http")
        address = self._addresses.get(bookie_id, bookie_id)
        return BookieClient(f"{scheme}://{address}", ssl_context=self.tls)

    async def writable_bookies(self) -> list[str]:
        found = await asyncio.to_thread(writable_bookies, self.store.client, self.store.root)
        await self.learn(found)
        return found

    async def alive_bookies(self) -> set[str]:
        found = await asyncio.to_thread(alive_bookies, self.store.client, self.store.root)
        await self.learn(found)
        return found

    async def learn(self, bookie_ids) -> None:
        """The scheme and published place of each bookie not seen before, from its service
        info (one read each: a bookie id's listener does not change scheme while it is
        registered; its place is read again by ``locations`` once LOCATION_TTL_S old)."""
        for bookie_id in bookie_ids:
            if bookie_id not in self._properties:
                scheme, properties, address = await asyncio.to_thread(
                    bookie_service_info, self.store.client, self.store.root, bookie_id)
                if scheme is not None:
                    self._schemes[bookie_id] = scheme
                if address is not None:
                    self._addresses[bookie_id] = address
                if properties is not None:
                    self._properties[bookie_id] = properties
                    self._learned_at[bookie_id] = time.monotonic()

    def published(self, bookie_id: str) -> dict[str, str] | None:
        """What a bookie's registration said when it was first seen (its properties)."""
        return self._properties.get(bookie_id)

    async def locations(self, bookie_ids) -> dict[str, Location]:
        """TP1: Pulsar's rack map (read each time: an operator's change counts at once),
        else each bookie's registration (read again once LOCATION_TTL_S old, so that a
        long-lived auditor or worker sees a bookie restarted with a new place), else the
        default rack."""
        bookie_ids = list(bookie_ids)
        now = time.monotonic()
        for bookie_id in bookie_ids:
            if now - self._learned_at.get(bookie_id, now) > LOCATION_TTL_S:
                self._properties.pop(bookie_id, None)
        await self.learn(bookie_ids)
        rack_map = decode_rack_map(await asyncio.to_thread(read_rack_map, self.store.client,
                                                         self.store.root))
        return {b: locate(b, rack_map, self._properties.get(b)) for b in bookie_ids}


class Bookies(Protocol):
    """What the writer, reader and recovery use of the front door (``BookKeeper`` in
    api/client/ensemble.py, which composes them): named here, below all of them, so none of
    them imports the door."""

    store: LedgerMetadataStore
    add_timeout_s: float
    read_timeout_s: float
    speculative_read_s: float
    placement: "Placement"

    def client(self, bookie_id: str) -> BookieClient: ...

    async def writable_bookies(self) -> list[str]: ...

    async def alive_bookies(self) -> set[str]: ...

    async def locations(self, bookie_ids) -> dict[str, Location]: ...
