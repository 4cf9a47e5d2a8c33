"""Replicated ledgers over a cluster (docs/cluster.md §3): the client's front door, a writer that
writes each entry to Qw bookies and acknowledges it at Qa, and a reader with fallback.

    async with await BookKeeper.connect("zk://127.0.0.1:2181/ledgers") as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"pw")
        await writer.append(b"hello")
        await writer.close()
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)

Invariants (beside DS1 of distribution.py, DS2 of ensemble_writer.py and L1-L5 of writer.py):
    EN1. No entry is acknowledged before the segment that places it is committed to the
         metadata: completions stop while an ensemble change is being written, and an entry's
         acknowledgement from a replaced bookie is withdrawn and the entry re-sent to the
         replacement (BookKeeper's PendingAddOp.unsetSuccessAndSendWriteRequest).
    EN2. Completions, and the LAC, advance in entry order only.
    EN3. EFENCED, or metadata that is no longer OPEN, stops the writer: every pending and later
         append fails with that error.
    EN4. Recovery (``open_ledger``, docs/cluster.md §3) never truncates on uncertainty: it
         proceeds only when every write set has at most Qa-1 bookies that did not fence, reads
         only from bookies that fenced, calls an entry missing only after Qw-Qa+1 of them said
         ENOENTRY, and otherwise fails with RecoveryUndecided (retry later). Its ensemble
         changes reach the metadata only with its close (RC1 in ensemble_recovery.py).
    EN5. Once ``close()`` has begun, ``append`` fails with LedgerClosed; ``close()`` waits for
         every append that began before it, so the closed lastEntryId is at least every
         acknowledged entry and no acknowledgement comes after it (S2; BookKeeper's
         LedgerHandle fails such appends with BKLedgerClosedException).
    EN6. ``open_ledger`` with a password other than the one the metadata stores is refused
         (Unauthorized) before any bookie is asked, as BookKeeper's LedgerOpenOp refuses it
         (BKUnauthorizedAccessException): a wrong password must not fence, recover or close
         a ledger. Metadata without a password (none was given) takes any.
"""

from __future__ import annotations

import asyncio
import hmac

from api.client.bkport.transport import ProtocolTransport
from api.client.bookie_client import BookieClient
from api.client.bookies import (ADD_TIMEOUT_S, BOOKIE_FAILURES, READ_TIMEOUT_S,
                                SPECULATIVE_READ_S, HttpTransport, Transport)
from api.client.codec import LedgerCodec, digest_type_of
from api.client.ensemble_errors import LedgerClosed, NotEnoughBookies, RecoveryUndecided
from api.client.ensemble_reader import BeyondLastConfirmed, EnsembleReader
from api.client.ensemble_recovery import Recovery
from api.client.ensemble_writer import EnsembleWriter
from api.client.fragments import referenced_bookies
from api.client.metadata import LedgerMetadata, MetadataState
from api.client.placement import Placement
from api.client.topology import Location
from api.client.zookeeper import ZkMetadataStore
from api.tls import client_context_from_env
from bookie.entry import DigestType
from bookie.errors import Unauthorized

__all__ = ["BOOKIE_FAILURES", "BeyondLastConfirmed", "BookKeeper", "EnsembleReader",
           "EnsembleWriter", "HttpTransport", "LedgerClosed", "NotEnoughBookies", "Recovery",
           "RecoveryUndecided", "Transport"]


class BookKeeper:
    """The client's front door over a metadata service (BookKeeper's ``BookKeeper`` class)."""

    def __init__(self, store: ZkMetadataStore, add_timeout_s: float = ADD_TIMEOUT_S,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 speculative_read_s: float = SPECULATIVE_READ_S,
                 transport: "Transport | None" = None, tls=None,
                 placement: Placement | None = None, protocol: str = "auto") -> None:
        self.store = store
        #: Which bookies hold copies (api/client/placement.py): every caller places with it.
        self.placement = placement or Placement()
        self.add_timeout_s = add_timeout_s
        self.read_timeout_s = read_timeout_s
        self.speculative_read_s = speculative_read_s
        #: Where bookie clients and the cluster's membership come from: ZooKeeper, and per
        #: bookie HTTP or BookKeeper's protocol as ``protocol`` says (api/client/bkport/
        #: transport.py), unless injected (the simulator injects in-memory bookies).
        self.transport = transport or ProtocolTransport(store, tls, protocol)
        self._clients: dict[str, BookieClient] = {}

    @classmethod
    async def connect(cls, metadata_service_uri: str, tls=None, placement=None,
                      protocol: str = "auto", **timeouts) -> "BookKeeper":
        """``placement``: a Placement (api/client/placement.py; default rack-aware, not
        strict, as BookKeeper's client). ``add_timeout_s``/``read_timeout_s``: how long a bookie may keep an add or a read
        unanswered before it counts as failed (default 10 s each). ``tls``: the client TLS
        context for https bookies and for START_TLS on BookKeeper-protocol ones (api/tls.py
        ``client_context``: the cluster's CA, and a client certificate where bookies ask
        for one; transport.py PT1). ``protocol``: how bookies are
        reached, "auto" (default: HTTP where a bookie's registration names it, else
        BookKeeper's protocol), "bk" or "http" (api/client/bkport/transport.py)."""
        if tls is None:  # BOOKIE_TLS_TRUST_FILE and friends (docs/operations.md §6)
            tls = client_context_from_env()
        ProtocolTransport.check(protocol, tls)  # before ZooKeeper is dialled
        store = ZkMetadataStore(metadata_service_uri)
        await asyncio.to_thread(store.start)
        return cls(store, tls=tls, placement=placement, protocol=protocol, **timeouts)

    async def __aenter__(self) -> "BookKeeper":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        await self.store.close()

    def client(self, bookie_id: str) -> BookieClient:
        if bookie_id not in self._clients:
            self._clients[bookie_id] = self.transport.client(bookie_id)
        return self._clients[bookie_id]

    async def writable_bookies(self) -> list[str]:
        return await self.transport.writable_bookies()

    async def alive_bookies(self) -> set[str]:
        """Registered bookies, writable or read-only."""
        return await self.transport.alive_bookies()

    async def locations(self, bookie_ids) -> dict[str, Location]:
        """Where each bookie stands; not asked (all default) under the random policy."""
        if not self.placement.needs_topology:
            return {b: Location() for b in bookie_ids}
        return await self.transport.locations(bookie_ids)

    async def create_ledger(self, ensemble: int = 3, write_quorum: int = 2, ack_quorum: int = 2,
                            digest: DigestType | str = DigestType.CRC32C,
                            password: bytes | str = b"",
                            custom_metadata: dict[str, str] | None = None,
                            deferred_sync: bool = False,
                            explicit_lac_interval_ms: int = 0) -> "EnsembleWriter":
        """A new OPEN ledger at E/Qw/Qa. ``custom_metadata``: BookKeeper's customMetadata
        (Pulsar's managed ledgers name themselves there), stored in the ledger's metadata.
        ``deferred_sync``: BookKeeper's WriteFlag.DEFERRED_SYNC, ``writer.force()`` makes
        acknowledged adds durable and moves the LAC (api/client/ensemble_writer.py DS4).
        ``explicit_lac_interval_ms``: BookKeeper's explicitLacInterval, the LAC of an idle
        writer written to its bookies after this long (0, the default: never; EL1)."""
        if not ensemble >= write_quorum >= ack_quorum >= 1:
            raise ValueError(f"need E >= Qw >= Qa >= 1, got {ensemble}/{write_quorum}/"
                             f"{ack_quorum}")
        available = await self.writable_bookies()
        if len(available) < ensemble:
            raise NotEnoughBookies(f"{len(available)} writable bookies, the ensemble needs "
                                   f"{ensemble}")
        chosen = self.placement.new_ensemble(ensemble, write_quorum, available,
                                             await self.locations(available))
        secret = password.encode() if isinstance(password, str) else bytes(password)
        metadata = await self.store.create(LedgerMetadata(
            ledger_id=None, digest_type=digest_type_of(digest), ensemble_size=ensemble,
            write_quorum=write_quorum, ack_quorum=ack_quorum, password=secret,
            ensembles=((0, chosen),), custom=dict(custom_metadata or {})))
        codec = LedgerCodec.for_password(metadata.ledger_id, secret, metadata.digest_type)
        return EnsembleWriter(self, metadata, codec, deferred_sync=deferred_sync,
                              explicit_lac_interval_ms=explicit_lac_interval_ms)

    async def open_ledger(self, ledger_id: int, password: bytes | str = b"",
                          recover: bool = True) -> "EnsembleReader":
        """A reader; with ``recover`` (the default) an OPEN ledger is recovered and closed
        first (its writer may be dead: EN4), so the reader sees its final end."""
        metadata = await self.store.read(ledger_id)
        # The scheme of each bookie it names, from its registration (https or http).
        await self.transport.learn(referenced_bookies(metadata))
        secret = password.encode() if isinstance(password, str) else bytes(password)
        if metadata.password and not hmac.compare_digest(metadata.password, secret):  # EN6
            raise Unauthorized(f"ledger {ledger_id}: the password does not match the one "
                               f"in its metadata")
        codec = LedgerCodec.for_password(ledger_id, secret, metadata.digest_type)
        if recover and metadata.state is not MetadataState.CLOSED:
            metadata = await Recovery(self, metadata, codec).run()
        return EnsembleReader(self, metadata, codec)

    async def list_ledgers(self) -> list[int]:
        """Every ledger id the metadata service holds, in order (BookKeeper's
        LedgerManager iteration; `bookie shell listledgers`)."""
        return sorted(await self.store.ledger_ids())

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the metadata (CAS); every bookie's GC then reclaims the copies (§3)."""
        metadata = await self.store.read(ledger_id)
        await self.store.delete(ledger_id, metadata.version)
