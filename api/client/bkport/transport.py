"""ProtocolTransport: which transport reaches each bookie, HTTP(S) or BookKeeper's protocol,
chosen from the bookie's registration (its ``BookieServiceInfo`` endpoints, docs/
bookkeeper-protocol.md §2) or forced for all (docs/ledger_client.md, "Transports").

    protocol="auto"  HTTP(S) when the registration names an http or https endpoint (this
                     project's bookies, api/client/metadata_format.py ``encode_service_info``);
                     else BookKeeper's protocol at its ``bookie-rpc`` endpoint, or at the
                     bookie id's host:port when it publishes none (Apache BookKeeper's
                     bookies; older ones register an empty znode). A bookie whose
                     registration was never read (not registered now) is asked over HTTP,
                     as before this transport existed.
    protocol="bk"    BookKeeper's protocol for every bookie: its ``bookie-rpc`` endpoint, else
                     the id's host:port (what BookKeeper's DefaultBookieAddressResolver does).
    protocol="http"  HTTP(S) for every bookie: HttpTransport as it was.

Invariants:
    PT1. With a TLS context every bookie is reached over TLS, never in the clear: HTTPS
         for a bookie registered with an http(s) endpoint under "auto" (and under "http"),
         BookKeeper's protocol with START_TLS (connection.py KC6) for the others under
         "auto" and for every bookie under "bk". A bookie that refuses START_TLS or whose
         handshake fails is a failed bookie, not one asked in plain.
    PT2. A bookie keeps the transport it was first given while its client lives (the
         front door caches clients, api/client/ensemble.py); its registration is read once
         (HttpTransport.learn's rule), so a bookie is never switched mid-request.
"""

from __future__ import annotations

import asyncio
import time

from api.client.bkport.client import BkBookieClient
from api.client.bookies import HttpTransport
from api.client.zookeeper import ZkMetadataStore, bookie_registration

PROTOCOLS = ("auto", "bk", "http")
BK_ENDPOINT = "bookie-rpc"


class ProtocolTransport(HttpTransport):
    def __init__(self, store: ZkMetadataStore, tls=None, protocol: str = "auto") -> None:
        self.check(protocol, tls)
        super().__init__(store, tls)
        self.protocol = protocol
        self._rpc: dict[str, str] = {}  # bookie id -> host:port of its bookie-rpc endpoint
        self._read: set[str] = set()    # bookie ids whose registration was read

    @staticmethod
    def check(protocol: str, tls=None) -> None:
        """ValueError for a protocol this transport does not know."""
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")

    def uses_bk(self, bookie_id: str) -> bool:
        """Whether ``bookie_id`` is reached over BookKeeper's protocol (see the module)."""
        if self.protocol != "auto":
            return self.protocol == "bk"
        return bookie_id in self._read and bookie_id not in self._schemes

    def bk_address(self, bookie_id: str) -> str:
        return self._rpc.get(bookie_id, bookie_id)

    def client(self, bookie_id: str):
        if self.uses_bk(bookie_id):
            return BkBookieClient(self.bk_address(bookie_id), tls=self.tls)  # PT1
        return super().client(bookie_id)

    async def learn(self, bookie_ids) -> None:
        """HttpTransport.learn's, and the bookie-rpc endpoint of each (one read each)."""
        for bookie_id in bookie_ids:
            if bookie_id in self._properties:
                continue
            endpoints, properties = await asyncio.to_thread(
                bookie_registration, self.store.client, self.store.root, bookie_id)
            if endpoints is None:
                continue  # not registered: asked again when next seen
            self._read.add(bookie_id)
            http = [(protocol, host, port) for _, host, port, protocol in endpoints
                    if protocol in ("http", "https")]
            if http:
                scheme, host, port = http[0]
                self._schemes[bookie_id] = scheme
                if host and port:  # its id is not its address when it was given one
                    self._addresses[bookie_id] = f"[{host}]:{port}" if ":" in host \
                        else f"{host}:{port}"
            rpc = [(host, port) for _, host, port, protocol in endpoints
                   if protocol == BK_ENDPOINT and host and port]
            if rpc:
                host, port = rpc[0]
                self._rpc[bookie_id] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            self._properties[bookie_id] = properties or {}
            self._learned_at[bookie_id] = time.monotonic()
