"""A bookie's duties as a cluster member (REPLICATION.md §2): registration in ZooKeeper.

Wired by the composition root (``bookie serve`` with ``metadata_service_uri``): ``start``
runs after replay and before READY=1, registering ``available/<host:port>`` (or
``available/readonly/<host:port>``); every change of the bookie's state moves the node;
``stop`` removes it before the bookie drains (ZR3 in api/client/zookeeper.py).
"""

from __future__ import annotations

import asyncio
import logging

from api.client.metadata_format import encode_service_info
from api.client.zookeeper import ZkRegistration
from bookie.node import Bookie, BookieState

log = logging.getLogger("bookie.cluster")


class ClusterMember:
    def __init__(self, bookie: Bookie, uri: str, host: str, port: int) -> None:
        self.bookie = bookie
        self.bookie_id = f"{host}:{port}"
        self.registration = ZkRegistration(uri, self.bookie_id, encode_service_info(host, port),
                                           on_change=self._changed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moves: asyncio.Lock | None = None

    def _changed(self, path: str | None) -> None:
        """From any thread: what /ready, /v1/bookie/info and the metrics say."""
        self.bookie.registration = path
        if path is None:
            log.warning("bookie %s is not registered in ZooKeeper", self.bookie_id)
        else:
            log.info("bookie registered as %s", path)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._moves = asyncio.Lock()
        await asyncio.to_thread(self.registration.start)
        await self._register()
        self.bookie.add_state_listener(self._on_state)

    def _on_state(self, state: BookieState) -> None:
        if state in (BookieState.WRITABLE, BookieState.READ_ONLY):
            self._loop.create_task(self._register(), name="zk-registration")

    async def _register(self) -> None:
        async with self._moves:  # one move at a time, in the order the states came
            readonly = self.bookie.state is not BookieState.WRITABLE
            if self.registration.path is not None and readonly == self.registration.readonly:
                return
            try:
                await asyncio.to_thread(self.registration.register, readonly)
            except Exception:  # noqa: BLE001 - reported; the session listener retries
                log.exception("registering bookie %s in ZooKeeper failed", self.bookie_id)

    async def stop(self) -> None:
        """SIGTERM, before draining: clients stop choosing this bookie (ZR3)."""
        try:
            await asyncio.to_thread(self.registration.unregister)
        finally:
            await asyncio.to_thread(self.registration.stop)
