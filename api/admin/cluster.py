"""The admin listener's way into the cluster: one BookKeeper client of api/client (its own
ZooKeeper session, as BookKeeper's BKHttpServiceProvider holds a BookKeeperAdmin of its
own), opened at the first request that needs it, and autorecovery's tree through
api/cluster/underreplication.py on that session.

Invariants:
    AC1. A standalone bookie (no ``metadata_service_uri``) never opens a session: its
         cluster paths raise ``NotCluster``, which the app answers 404 (AD1).
    AC2. The session is opened once; a failed open is retried by the next request, so a
         ZooKeeper that was down at the bookie's start does not leave the paths dead.
"""

from __future__ import annotations

import asyncio

from api.client.ensemble import BookKeeper
from api.cluster.underreplication import Underreplication
from api.tls import bookie_client_context


class NotCluster(Exception):
    """AC1: the path needs a cluster and this bookie is standalone."""


class AdminCluster:
    def __init__(self, config, bookie_id: str) -> None:
        self.config = config
        self.bookie_id = bookie_id
        self._bk: BookKeeper | None = None
        self._lock = asyncio.Lock()

    @property
    def standalone(self) -> bool:
        return not self.config.metadata_service_uri

    async def bk(self, what: str) -> BookKeeper:
        """The client (AC2); ``what`` names the path's need in the refusal (AC1)."""
        if self.standalone:
            raise NotCluster(f"{what}: metadata_service_uri is not set, this is a standalone "
                             f"bookie with no cluster")
        async with self._lock:
            if self._bk is None:
                self._bk = await BookKeeper.connect(
                    self.config.metadata_service_uri, tls=bookie_client_context(self.config))
            return self._bk

    async def underreplication(self, what: str) -> Underreplication:
        bk = await self.bk(what)
        ur = Underreplication(bk.store.client, bk.store.root, self.bookie_id)
        await asyncio.to_thread(ur.ensure)
        return ur

    async def close(self) -> None:
        async with self._lock:
            if self._bk is not None:
                await self._bk.close()
                self._bk = None
