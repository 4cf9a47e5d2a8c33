"""Reading many entries of one segment in a few requests (docs/cluster.md §3, "Batched
reads"): a plan of held reads, one per bookie and residue, and their execution.

Entry ``e`` of a segment with ensemble size E lives on the indices ``(e + i) mod E``, i < Qw
(api/client/distribution.py), so all ids of one residue ``e mod E`` share a write set. A
window ``[first, last]`` of a segment is read as one *held read* per residue class
(``GET .../entries?from&to&held=true&step=E``, docs/http-api.md), each from one replica of
that class, or one step-1 held read when a single bookie serves every class (E == Qw, or a
one-bookie ledger). The bookie answers the ids it holds among those asked, plus the last id
it examined; a short answer is asked again from there.

Invariants:
    BR1. Every id of the window is either returned (bytes from a bookie of its write set,
         not yet verified: the caller verifies) or listed as unresolved; never both, never
         neither. Unresolved ids are what the caller reads entry by entry (the next
         replica), so a failed, short or partial batch loses nothing, only speed.
    BR2. Only bookies of the id's write set are asked for it; ``avoid`` indices are asked
         for nothing unless a class has no other replica.
    BR3. Bytes are kept only for ids the plan asked that bookie for, whatever it returns.
"""

from __future__ import annotations

import asyncio
import dataclasses

from api import wire
from api.client.distribution import write_set
from bookie.entry import ENTRY_HEADER
from bookie.errors import IOFailure, NoLedger

#: Ids in one window of a batched read (a held read of one residue class holds ~1/E of it).
WINDOW_IDS = 512
#: Windows a streaming read keeps in flight ahead of the one it yields from.
WINDOWS_IN_FLIGHT = 4


@dataclasses.dataclass(frozen=True)
class HeldRead:
    """One held read: the ids ``first, first+step, ... <= last`` from ``index``."""

    index: int
    first: int
    last: int
    step: int


def plan(ensemble_size: int, write_quorum: int, first: int, last: int,
         wanted=None, avoid=frozenset()) -> list[HeldRead]:
    """The held reads that cover ``[first, last]`` of one segment (BR2). ``wanted``: the
    residues ``e mod E`` to read (default all); each class is read from the first index of
    its write set not in ``avoid`` (the class's first replica: reads spread over the
    ensemble), or from its first replica if all are avoided."""
    size = ensemble_size
    residues = range(size) if wanted is None else sorted(wanted)
    source: dict[int, int] = {}
    for residue in residues:
        replicas = write_set(residue, size, write_quorum)
        source[residue] = next((i for i in replicas if i not in avoid), replicas[0])
    by_index: dict[int, list[int]] = {}
    for residue, index in source.items():
        by_index.setdefault(index, []).append(residue)
    reads = []
    for index, classes in sorted(by_index.items()):
        if len(classes) == size:
            reads.append(HeldRead(index, first, last, 1))
            continue
        for residue in classes:
            start = first + (residue - first) % size
            if start <= last:
                reads.append(HeldRead(index, start, last, size))
    return reads


def ids_of(read: HeldRead) -> range:
    return range(read.first, read.last + 1, read.step)


def raw_frames(body: bytes) -> list[tuple[int, bytes]]:
    """(entry id, framed bytes) of each frame of a held read's reply, not verified: for a
    caller that copies entries on (recovery's write-back, re-replication) and checks them
    itself. An entry too short for its ids gets id -1, which no plan asks for."""
    unpack = ENTRY_HEADER.unpack_from
    return [(unpack(data, 0)[1] if len(data) >= ENTRY_HEADER.size else -1, data)
            for data in wire.decode_batch(body, 2**31 - 1, 2**31 - 1)]


async def held_read(client, ledger_id: int, read: HeldRead, timeout_s: float,
                    found: dict, decode=raw_frames) -> tuple[int, BaseException | None]:
    """Execute one held read to its end, asking again after each short reply; what
    ``decode`` makes of each reply's body ((entry id, value) pairs: by default the raw
    frames, or the reader's verified entries) goes into ``found`` by id as it arrives (only
    ids asked, BR3), so a read cancelled midway keeps what came. Returns (the last id
    covered, the error that stopped it or None). Ids up to the last covered that are not in
    ``found`` are not held by that bookie (or did not verify); a bookie that does not know
    the ledger holds none of them."""
    covered = read.first - read.step
    first, step = read.first, read.step
    try:
        while covered < read.last:
            body, scanned = await asyncio.wait_for(
                client.read_held_body(ledger_id, covered + step, read.last, step), timeout_s)
            if scanned < covered + step:
                raise IOFailure(f"bookie answered a held read with X-Last-Scanned "
                                f"{scanned} below its first id {covered + step}")
            if body:
                for entry_id, value in decode(body):
                    if covered < entry_id <= scanned and (entry_id - first) % step == 0:
                        found[entry_id] = value
            covered = min(scanned, read.last)
    except NoLedger:
        covered = read.last  # it holds nothing of this ledger
    except Exception as exc:  # noqa: BLE001 - any failure: the rest goes entry by entry
        return covered, exc
    return covered, None
