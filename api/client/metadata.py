"""Ledger metadata for the client: the LedgerMetadataStore protocol and FileMetadataStore.

The bookie keeps no ledger metadata (BookKeeper's ``null://`` driver, docs/design.md §4): which
ledgers exist, their digest type, whether they are open, in recovery or closed, and where a
closed ledger ends belong to the clients. Writers and recoverers race on that record, so every
update is a compare-and-set on its version, as BookKeeper's ``LedgerManager`` does over
ZooKeeper or etcd. FileMetadataStore is the single-machine driver: one JSON file, read-modify-
written under an advisory lock and replaced by ``bookie.disk.atomic_replace``.

File layout (JSON, one object):
    {"format": 1, "nextLedgerId": N,
     "ledgers": {"<id>": {"version": V, "digestType": "crc32c", "state": "OPEN",
                          "lastEntryId": -1, "length": 0, "ctimeMs": T, "custom": {}}}}

Invariants:
    MD1. A write succeeds only if the stored version equals the version the caller read, and
        stores version + 1: of two racing writers exactly one wins (BookKeeper's
        BadVersionException for the other).
    MD2. The file is replaced whole (temp file, fsync, rename, fsync dir): after a crash it
        holds the old or the new metadata of every ledger, never a mix.
    MD3. Ledger ids are allocated from ``nextLedgerId`` under the same lock and it only grows
        (past explicit ids too), so an allocated id is never handed out twice, even after a
        delete.

Thread-safety: the store holds no mutable state besides its path; each call takes the file
lock (``fcntl.flock``), so any number of tasks, threads and processes may share the file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import fcntl
import json
import os
import time
from typing import Protocol

from bookie.disk import OsDisk, atomic_replace
from bookie.entry import DigestType
from bookie.errors import NoLedger

FORMAT_VERSION = 1


class MetadataError(Exception):
    """Base of the metadata store's errors (not docs/http-api.md codes: the bookie never sees them)."""


class BadVersion(MetadataError):
    """Compare-and-set lost (MD1): someone else updated the ledger's metadata first."""


class LedgerExists(MetadataError):
    """``create`` of a ledger id that is already taken."""


class MetadataState(enum.Enum):
    """BookKeeper's ``LedgerMetadata.State``."""

    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclasses.dataclass(frozen=True)
class LedgerMetadata:
    """One ledger's metadata. ``version`` 0 means "not stored yet"."""

    ledger_id: int | None
    digest_type: DigestType = DigestType.CRC32C
    state: MetadataState = MetadataState.OPEN
    last_entry_id: int = -1
    length: int = 0
    ctime_ms: int = 0
    custom: dict = dataclasses.field(default_factory=dict)
    version: int = 0
    #: The cluster's fields (docs/cluster.md §1): E, Qw, Qa, the ensembles as
    #: ((firstEntryId, (bookieId, ...)), ...) ascending, and the password the master key
    #: comes from. A single-bookie ledger keeps the defaults.
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    ensembles: tuple = ()
    password: bytes = b""
    #: BookKeeper's creator token (LedgerMetadataFormat.cToken): a random number the
    #: creator stores, so a create retried after a lost answer can tell its own metadata
    #: from another's (api/client/zookeeper.py ZK2). Kept across every rewrite; 0: none.
    ctoken: int = 0

    @property
    def closed(self) -> bool:
        return self.state is MetadataState.CLOSED

    def to_json(self) -> dict:
        return {"version": self.version, "digestType": self.digest_type.header_name,
                "state": self.state.value, "lastEntryId": self.last_entry_id,
                "length": self.length, "ctimeMs": self.ctime_ms, "custom": dict(self.custom),
                "ensembleSize": self.ensemble_size, "writeQuorum": self.write_quorum,
                "ackQuorum": self.ack_quorum, "password": self.password.hex(),
                "ensembles": [[first, list(members)] for first, members in self.ensembles],
                "cToken": self.ctoken}

    @classmethod
    def from_json(cls, ledger_id: int, data: dict) -> "LedgerMetadata":
        """Also reads format-1 files written before the cluster fields (defaults then)."""
        return cls(ledger_id=ledger_id, digest_type=DigestType.from_header(data["digestType"]),
                   state=MetadataState(data["state"]), last_entry_id=int(data["lastEntryId"]),
                   length=int(data["length"]), ctime_ms=int(data.get("ctimeMs", 0)),
                   custom=dict(data.get("custom", {})), version=int(data["version"]),
                   ensemble_size=int(data.get("ensembleSize", 1)),
                   write_quorum=int(data.get("writeQuorum", 1)),
                   ack_quorum=int(data.get("ackQuorum", 1)),
                   password=bytes.fromhex(data.get("password", "")),
                   ensembles=tuple((int(first), tuple(members))
                                   for first, members in data.get("ensembles", ())),
                   ctoken=int(data.get("cToken", 0)))


class LedgerMetadataStore(Protocol):
    """What the ledger library needs of a metadata driver; every update is a CAS (MD1)."""

    async def create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        """Store new metadata (allocating an id if ``ledger_id`` is None); LedgerExists."""

    async def read(self, ledger_id: int) -> LedgerMetadata:
        """The current metadata with its version; NoLedger if there is none."""

    async def write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        """Replace metadata read at ``metadata.version``; BadVersion if it moved on."""

    async def delete(self, ledger_id: int, version: int) -> None:
        """Remove the metadata if still at ``version``; BadVersion or NoLedger otherwise."""

    async def ledger_ids(self) -> list[int]:
        """Every ledger id with metadata, ascending."""


class FileMetadataStore:
    """Ledger metadata in one local JSON file (MD1-MD3). See the module docstring."""

    def __init__(self, path: str, disk: OsDisk | None = None) -> None:
        self.path = os.path.abspath(path)
        self.disk = disk or OsDisk()

    # The file I/O is small but fsyncs; it runs on a worker thread to keep the loop free.
    async def create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await asyncio.to_thread(self._locked, self._create, metadata)

    async def read(self, ledger_id: int) -> LedgerMetadata:
        return await asyncio.to_thread(self._locked, self._read, ledger_id)

    async def write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await asyncio.to_thread(self._locked, self._write, metadata)

    async def delete(self, ledger_id: int, version: int) -> None:
        await asyncio.to_thread(self._locked, self._delete, ledger_id, version)

    async def ledger_ids(self) -> list[int]:
        return await asyncio.to_thread(self._locked, self._ledger_ids)

    # -- under the lock ---------------------------------------------------------------------

    def _locked(self, fn, *args):
        """Run ``fn(document, *args)`` holding an exclusive lock on ``<path>.lock``."""
        directory = os.path.dirname(self.path)
        self.disk.makedirs(directory)
        with open(self.path + ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                return fn(self._load(), *args)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _load(self) -> dict:
        if not self.disk.exists(self.path):
            return {"format": FORMAT_VERSION, "nextLedgerId": 0, "ledgers": {}}
        with open(self.path, "rb") as handle:
            document = json.loads(handle.read())
        if document.get("format") != FORMAT_VERSION:
            raise MetadataError(f"{self.path}: metadata format {document.get('format')!r}, "
                                f"expected {FORMAT_VERSION}")
        return document

    def _store(self, document: dict) -> None:
        data = json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"
        atomic_replace(self.disk, self.path, data)  # MD2

    def _create(self, document: dict, metadata: LedgerMetadata) -> LedgerMetadata:
        ledger_id = metadata.ledger_id
        if ledger_id is None:
            ledger_id = document["nextLedgerId"]  # MD3
        if ledger_id < 0:
            raise ValueError(f"ledger id {ledger_id} is negative")
        if str(ledger_id) in document["ledgers"]:
            raise LedgerExists(f"ledger {ledger_id} already has metadata in {self.path}")
        stored = dataclasses.replace(metadata, ledger_id=ledger_id, version=1,
                                     ctime_ms=metadata.ctime_ms or int(time.time() * 1000))
        document["ledgers"][str(ledger_id)] = stored.to_json()
        document["nextLedgerId"] = max(document["nextLedgerId"], ledger_id + 1)
        self._store(document)
        return stored

    def _read(self, document: dict, ledger_id: int) -> LedgerMetadata:
        data = document["ledgers"].get(str(ledger_id))
        if data is None:
            raise NoLedger(f"ledger {ledger_id} has no metadata in {self.path}")
        return LedgerMetadata.from_json(ledger_id, data)

    def _write(self, document: dict, metadata: LedgerMetadata) -> LedgerMetadata:
        current = self._read(document, metadata.ledger_id)
        if current.version != metadata.version:  # MD1
            raise BadVersion(f"ledger {metadata.ledger_id}: metadata is at version "
                             f"{current.version}, the update was based on {metadata.version}")
        stored = dataclasses.replace(metadata, version=current.version + 1)
        document["ledgers"][str(metadata.ledger_id)] = stored.to_json()
        self._store(document)
        return stored

    def _delete(self, document: dict, ledger_id: int, version: int) -> None:
        current = self._read(document, ledger_id)
        if current.version != version:
            raise BadVersion(f"ledger {ledger_id}: metadata is at version {current.version}, "
                             f"the delete was based on {version}")
        del document["ledgers"][str(ledger_id)]
        self._store(document)

    def _ledger_ids(self, document: dict) -> list[int]:
        return sorted(int(key) for key in document["ledgers"])
