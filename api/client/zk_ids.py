"""New ledger ids from ZooKeeper, laid out as BookKeeper's HierarchicalLedgerManagerFactory
makes them (LongZkLedgerIdGenerator over ZkLedgerIdGenerator; Pulsar's
PulsarLedgerIdGenerator keeps the same layout), so BookKeeper's clients, Pulsar's and ours
can share one cluster's id space (docs/cluster.md §1):

    <root>/idgen/ID-<seq>                     31-bit ids: the sequence number ZooKeeper gave an
                                              ephemeral sequential znode, deleted at once
    <root>/idgen-long                         present once the cluster moved to 63-bit ids
    <root>/idgen-long/HOB-<high>/ID-<seq>     (high << 32) | seq; <high> is %010d

ZooKeeper numbers a sequential child from its parent's child-change counter, a signed 32-bit
int printed %010d: past 2^31-1 it prints negative, which is where the 31-bit ids end.

Invariants:
    ID1. A sequence number is an id (or an id's low half) only if 0 <= seq < 2^31-1:
         ZkLedgerIdGenerator counts 2^31-1 itself, and anything negative, as exhausted.
    ID2. While ``idgen-long`` is absent, ids come from ``idgen``; once it exists every id
         comes from it, whoever created it (checked before each id, as Pulsar's generator
         does). It is created when ``idgen`` gives an exhausted number (ID1): the cutover,
         never undone.
    ID3. A long id is (high << 32) | low, high the largest HOB- number under ``idgen-long``
         (HOB-0000000001 is created when there is none) and low a sequence number under it
         (ID1); when a HOB's counter is exhausted, HOB-<high+1> is created and ids come from
         it. So a long id is >= 2^32: never one a 31-bit id could be.
    ID4. After taking a long id, as BookKeeper does, every HOB- znode but the 3 largest is
         deleted if empty and never written (version 0); a failure there is ignored (the id
         is taken; a later one tries again).
"""

from __future__ import annotations

import re

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NodeExistsError, NoNodeError

from api.client.metadata import MetadataError
from api.client.zk_auth import refused
from api.client.zk_bound import ZkUnavailable, zk_call, zk_read

#: Integer.MAX_VALUE: a sequence number must stay below it (ID1).
SEQUENCE_LIMIT = 2**31 - 1
SHORT, LONG, HOB, ID = "idgen", "idgen-long", "HOB-", "ID-"
#: HOB- znodes kept by the clean-up (ID4): BookKeeper's "3 should be plenty to prevent races".
HOBS_KEPT = 3
#: What Java's Long.parseLong accepts (a HOB- name with "HOB-" taken out).
_NUMBER = re.compile(r"[+-]?[0-9]+")


def usable(sequence: int) -> bool:
    """Whether a sequence number is a 31-bit id or a long id's low half (ID1)."""
    return 0 <= sequence < SEQUENCE_LIMIT


def hob_numbers(children: list[str]) -> list[int]:
    """The numbers of ``idgen-long``'s HOB- children; other names are skipped, as
    BookKeeper skips what Long.parseLong refuses."""
    numbers = (name.replace(HOB, "") for name in children)
    return [int(number) for number in numbers if _NUMBER.fullmatch(number)]


class LedgerIds:
    """Takes new ledger ids under one cluster's ``root``; stateless between calls, so any
    number of these, in one process or many, share the space (ZK1)."""

    def __init__(self, client: KazooClient, root: str) -> None:
        self.client = client
        self.short = f"{root}/{SHORT}"
        self.long = f"{root}/{LONG}"

    def next(self) -> int:
        """One new id (ID2)."""
        if zk_read(self.client.exists_async, self.long) is None:
            sequence = self._sequence(self.short)
            if usable(sequence):
                return sequence
            try:  # ID2: the 31-bit counter is spent; another creator may cut over too
                zk_call(self.client.ensure_path_async, self.long)
            except NoAuthError:
                raise refused("create", self.long) from None
        return self._long_id()

    def _long_id(self) -> int:
        while True:  # each turn either returns or adds a HOB- znode (ID3)
            children = self._children()
            highs = hob_numbers(children)
            if not highs:
                self._add_hob(1)
                continue
            high = max(highs)
            if high >= SEQUENCE_LIMIT:  # (high << 32) would pass 2^63-1
                raise MetadataError(f"{self.long}: HOB-{high} leaves no ledger ids")
            low = self._sequence(f"{self.long}/{HOB}{high:010d}")
            if not usable(low):
                self._add_hob(high + 1)
                continue
            if len(children) > HOBS_KEPT:
                self._clean_up(sorted(highs)[:len(highs) - HOBS_KEPT])
            return (high << 32) | low

    def _sequence(self, parent: str) -> int:
        """The sequence number ZooKeeper gives a new ephemeral sequential ``parent/ID-``
        (which is deleted again: only its number is wanted); may be exhausted (ID1)."""
        try:
            path = zk_call(self.client.create_async, f"{parent}/{ID}", b"", ephemeral=True,
                           sequence=True, makepath=True)
        except NoAuthError:
            raise refused("create a ledger id under", parent) from None
        try:
            zk_call(self.client.delete_async, path)
        except NoNodeError:
            pass
        # The number may be negative (the counter wrapped): "-2147483648" after "ID-".
        return int(path.rsplit(ID, 1)[1])

    def _children(self) -> list[str]:
        try:
            return zk_read(self.client.get_children_async, self.long)
        except NoNodeError:  # removed under us (a cluster being formatted): _add_hob makes it
            return []

    def _add_hob(self, high: int) -> None:
        """HOB-<high>, unless a racing creator made it first (then theirs serves)."""
        path = f"{self.long}/{HOB}{high:010d}"
        try:
            zk_call(self.client.create_async, path, b"", makepath=True)
        except NodeExistsError:
            pass
        except NoAuthError:
            raise refused("create", path) from None

    def _clean_up(self, highs: list[int]) -> None:
        for high in highs:  # ID4
            try:
                zk_call(self.client.delete_async, f"{self.long}/{HOB}{high:010d}", version=0)
            except (KazooException, ZkUnavailable):
                pass  # in use (not empty), written, gone, or no answer: the id stands
