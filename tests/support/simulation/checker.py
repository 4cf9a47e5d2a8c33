"""The safety properties of docs/cluster.md §5, checked on one simulated ledger.

    S1  every acknowledged entry (its ``append`` returned) reads back byte-identical
        through the final metadata once the ledger is closed; and GC never took a copy the
        final metadata names: no bookie that is up and named for an acknowledged entry
        lacks it because its GC deleted it, and no bookie that is up and named for an entry
        holds a tombstone (one named only for an empty fragment may: nothing was copied)
    S2  a closed ledger's lastEntryId >= every acknowledged entry id; no append is
        acknowledged with an id above a close
    S3  every replica that holds an entry holds the same entry (its bytes, or the same
        length and payload framed again with another LAC by recovery: W6); every reader
        sees the same end and the same bytes
    S4  a reader is never shown an entry above the LAC it was told, and the LAC one reader
        reports (``read_lac()``) never goes back
    S5  recovery never closes below an acknowledged entry (a zombie writer, paused while
        recovery closed its ledger and resumed after, is the writer of S2: none of its adds
        past the close may be acknowledged)
    AUTH  a wrong password is refused: no bookie that holds the ledger (or its tombstone)
        with a key takes its fence or add (intruder.py); the client refuses to open the
        ledger with it (Unauthorized)
    DL1 a ledger deleted from the metadata has no live copy on an up bookie once GC's grace
        and a GC run have passed, and is never revived (no recovery add brings it back)
    LIVE  once every fault is healed, recovery closes the ledger; and a ledger does not stay
        marked under-replicated at the end while a writable bookie could take the copy
        (the wedge: a tombstone refusing the worker's recovery adds forever)

The checker only records: each violation is a line naming the property, also put in the
trace, so the report shows where in the run it happened.
"""

from __future__ import annotations

from api.client.distribution import segment_for, write_set
from api.client.fragments import fragments
from bookie.entry import DigestType
from bookie.write_rules import same_entry
from tests.support.simulation.trace import Trace


class Checker:
    def __init__(self, trace: Trace, label: str = "") -> None:
        """``label``: the ledger's name in each violation line, for a run's other ledgers."""
        self.trace, self.label = trace, label
        self.acked: dict[int, bytes] = {}  # entry id -> payload
        self.closes: list[tuple[str, int]] = []  # (who, lastEntryId): who closed it
        self.ends: list[tuple[str, int]] = []  # (who, lastEntryId): who found it closed
        self.violations: list[str] = []
        self._lac: dict[str, int] = {}

    def violation(self, prop: str, text: str) -> None:
        line = f"{prop}: {self.label}{text}"
        if line not in self.violations:
            self.violations.append(line)
            self.trace(f"VIOLATION {line}")

    # -- events -------------------------------------------------------------------------

    def ack(self, entry_id: int, payload: bytes) -> None:
        self.trace(f"writer: append e{entry_id} acknowledged")
        self.acked[entry_id] = payload
        for who, last in self.closes:
            if entry_id > last:
                self.violation("S2", f"e{entry_id} acknowledged after {who} closed the "
                                     f"ledger at {last}")

    def closed(self, who: str, last: int) -> None:
        self.trace(f"{who}: closed at {last}")
        self.closes.append((who, last))
        self._check_close(who, last)

    def sees_end(self, who: str, last: int) -> None:
        """A client that found the ledger closed: its end must be the one (S3)."""
        self.trace(f"{who}: found it closed at {last}")
        self.ends.append((who, last))

    def _check_close(self, who: str, last: int) -> None:
        above = [e for e in self.acked if e > last]
        if above:
            prop = "S5" if who.startswith(("recovery", "worker")) else "S2"
            self.violation(prop, f"{who} closed at {last} below acknowledged "
                                 f"e{min(above)}..e{max(above)}")

    def lac_told(self, reader: str, lac: int) -> None:
        before = self._lac.get(reader, -1)
        if lac < before:
            self.violation("S4", f"{reader}'s read_lac went back from {before} to {lac}")
        self._lac[reader] = max(before, lac)

    def shown_above_lac(self, reader: str, entry_id: int, lac: int) -> None:
        self.violation("S4", f"{reader} was shown e{entry_id} above the LAC {lac} it was told")

    # -- the end ------------------------------------------------------------------------

    def final(self, metadata, replicas: dict[str, dict[int, bytes]],
              reads: dict[str, dict[int, bytes | None]]) -> None:
        """``replicas``: bookie -> entry -> bytes; ``reads``: reader -> entry -> payload
        (None: the read failed) for every entry up to the final end."""
        for who, last in self.closes:
            self._check_close(who, last)
        if not metadata.closed:
            self.violation("LIVE", f"the ledger is still {metadata.state.value} at the end")
            return
        ends = {last for _, last in self.closes + self.ends} | {metadata.last_entry_id}
        if len(ends) > 1:
            self.violation("S3", f"closed at different ends {sorted(ends)}")
        holders: dict[int, tuple[str, bytes]] = {}
        for bookie_id, entries in sorted(replicas.items()):
            for entry_id, data in sorted(entries.items()):
                first = holders.setdefault(entry_id, (bookie_id, data))
                # W6: a copy framed again by recovery differs in its LAC and digest only.
                if not same_entry(first[1], data, DigestType.CRC32C):
                    self.violation("S3", f"e{entry_id} differs on {first[0]} and {bookie_id}")
        for reader, seen in sorted(reads.items()):
            for entry_id, payload in self.acked.items():
                if entry_id > metadata.last_entry_id:
                    continue  # S2/S5 already reported it
                got = seen.get(entry_id)
                if got is None:
                    self.violation("S1", f"{reader} could not read acknowledged e{entry_id}")
                elif got != payload:
                    self.violation("S1", f"{reader} read different bytes for e{entry_id}")
            for entry_id in range(metadata.last_entry_id + 1):
                if seen.get(entry_id) is None and entry_id not in self.acked:
                    self.violation("S3", f"{reader} could not read e{entry_id} below the "
                                         f"end {metadata.last_entry_id}")
        views = {reader: seen for reader, seen in reads.items()}
        if len({tuple(sorted(v.items())) for v in views.values()}) > 1:
            self.violation("S3", "two readers saw different entries")

    def gc_kept_named_copies(self, metadata, copies: dict[str, tuple[bool, set[int]]],
                             gc_deleted: dict[str, set[int]], up: set[str]) -> None:
        """S1 after GC. ``copies``: bookie -> (tombstoned, entry ids held) for the ledger;
        ``gc_deleted``: bookie -> entry ids its GC deleted; ``up``: bookies up at the end."""
        if not metadata.closed:
            return
        named = set()  # bookies the metadata names for at least one entry
        for entry_id in range(metadata.last_entry_id + 1):
            _, members = segment_for(metadata.ensembles, entry_id)
            named |= {members[i] for i in write_set(entry_id, metadata.ensemble_size,
                                                    metadata.write_quorum)}
        for bookie_id in sorted(named & up):  # (an empty fragment's tombstone is harmless)
            if copies.get(bookie_id, (False, set()))[0]:
                self.violation("S1", f"{bookie_id} is named by the final metadata but holds "
                                     f"a tombstone (GC deleted a named copy)")
        for entry_id in sorted(self.acked):
            if entry_id > metadata.last_entry_id:
                continue
            _, members = segment_for(metadata.ensembles, entry_id)
            for index in write_set(entry_id, metadata.ensemble_size, metadata.write_quorum):
                bookie_id = members[index]
                if bookie_id not in up:
                    continue
                held = copies.get(bookie_id, (False, set()))[1]
                if entry_id not in held and entry_id in gc_deleted.get(bookie_id, ()):
                    self.violation("S1", f"acknowledged e{entry_id} is gone from "
                                         f"{bookie_id}, which the final metadata names for it:"
                                         f" its GC deleted it")

    def not_wedged(self, metadata, marker, up: set[str], offered=None) -> None:
        """LIVE: a ledger still marked at the end, while some closed fragment on a bookie
        that is down could go to an up bookie outside its segment, is wedged. ``offered``
        (members, index, Qw, candidates) -> the candidates the placement allows (strict
        placement refuses some: topology.py), default all."""
        if marker is None or not metadata.closed:
            return
        for fragment in fragments(metadata):
            if fragment.last is None or fragment.last < fragment.first or \
                    fragment.bookie_id in up:
                continue
            members = metadata.ensembles[fragment.segment][1]
            candidates = sorted(up - set(members))
            if offered is not None:
                candidates = sorted(offered(members, fragment.index, metadata.write_quorum,
                                            candidates))
            if candidates:
                self.violation("LIVE", f"the ledger stays marked under-replicated for "
                                       f"{marker[0]}: {fragment.bookie_id}'s fragment of "
                                       f"segment {fragment.segment} could go to {candidates}")
                return
