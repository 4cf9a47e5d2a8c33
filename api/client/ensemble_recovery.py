"""Recovery of a replicated ledger whose writer may be dead (docs/cluster.md §3; EN4 in
api/client/ensemble.py; BookKeeper's LedgerRecoveryOp and ReadOnlyLedgerHandle).

    1. CAS OPEN -> IN_RECOVERY (a concurrent recovery finds it so and goes on)
    2. fence every bookie of the last segment; coverage: no write set with Qa bookies that
       did not fence
    3. start at max(highest LAC, first entry of the last segment - 1)
    4. read ahead in windows of held reads from every fenced bookie; per entry: present /
       missing (Qw-Qa+1 ENOENTRY, a held read that covered the id without it) / undecided
       (RecoveryUndecided: never truncate); an entry the batches leave open is read alone
    5. write every present entry back to its whole write set as a recovery add, in batches
       while the next window is read; a bookie that fails it is replaced in recovery's own
       view of the ensembles (BK #1067: one hanging bookie must not stall recovery), and
       the entry is written to the replacement
    6. one CAS IN_RECOVERY -> CLOSED at the last present entry that also adds the segments
       step 5 made (an already CLOSED ledger: done, its end is the one that counts)

Invariants:
    RC1. Recovery's ensemble changes reach the metadata only with the close, in the same
         compare-and-set (BookKeeper's ``newEnsemblesFromRecovery``, committed by
         ``closeRecovered``). While a ledger is IN_RECOVERY its last segment never changes
         (only a replication worker may replace a bookie of an earlier, closed segment), so
         every recovery fences the bookies that hold the writer's last segment. (Committing
         a replacement mid-recovery let a recovery that then failed leave an empty bookie
         in the last segment, and the next recovery fenced it, read ENOENTRY from it and
         truncated acknowledged entries: the compound-faults issue, bug A.)
    RC2. The close is refused (RecoveryUndecided, retried later) if the last segment is not
         the one this recovery fenced: it decided the end from those bookies only. Earlier
         segments that a worker changed meanwhile are kept as they are now.
    RC3. Every present entry is written back to all Qw bookies of its write set (replacing
         those that fail) before the close names them; with fewer, recovery is undecided.
         Closing with only Qa copies would leave a CLOSED ledger naming a bookie without
         the entry until a replica check noticed.
    RC4. Batching changes no decision: an entry is present, missing or undecided by the
         same rule and the same fenced bookies as one read at a time; the run stops at the
         first missing entry, and an entry's write-back is acknowledged by all Qw (RC3)
         before the close, whether it went in a batch or alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from api.client.batch_read import WINDOW_IDS, HeldRead, held_read
from api.client.bookies import BOOKIE_FAILURES, Bookies
from api.client.codec import DigestMismatch, LedgerCodec, LedgerEntry
from api.client.distribution import segment_for, with_segment, write_set
from api.client.ensemble_errors import RecoveryUndecided
from api.client.ensemble_reader import EnsembleReader
from api.client.metadata import BadVersion, LedgerMetadata, MetadataState
from bookie.errors import BookieError, NoEntry, NoLedger


log = logging.getLogger("api.client.ensemble")
#: Replacements tried for one entry's write-back before recovery gives up (undecided).
WRITE_BACK_REPLACEMENTS_MAX = 3
#: Entries in one recovery-add batch of the write-back.
WRITE_BACK_BATCH_ENTRIES = 256


class Recovery:
    """docs/cluster.md §3's recovery of a ledger whose writer may be dead (LedgerRecoveryOp)."""

    def __init__(self, bk: Bookies, metadata: LedgerMetadata, codec: LedgerCodec) -> None:
        self.bk, self.metadata, self.codec = bk, metadata, codec
        self.ledger_id = metadata.ledger_id
        #: Recovery's view of the ensembles: the fenced ones plus its own changes (RC1).
        self.ensembles: tuple = metadata.ensembles
        self._fenced_ensembles: tuple = metadata.ensembles
        self._failed: set[str] = set()  # bookies that failed a write-back: not chosen again

    async def run(self) -> LedgerMetadata:
        await self._mark_in_recovery()
        if self.metadata.state is MetadataState.CLOSED:
            return self.metadata  # another recovery finished first
        self.ensembles = self._fenced_ensembles = self.metadata.ensembles
        first, ensemble = self.ensembles[-1]
        fenced = await self._fence(ensemble)
        self._check_coverage(ensemble, fenced)
        lacs = [reply["lac"] for reply in fenced.values()]
        start = max(max(lacs, default=-1), first - 1)
        length = await self._length_at(start)
        last = start
        # RC4: read window k+1 while window k is written back; write-backs in order.
        reading = asyncio.ensure_future(self._read_ahead(start + 1, ensemble, fenced))
        try:
            while True:
                present, more = await reading
                reading = asyncio.ensure_future(self._read_ahead(
                    present[-1].entry_id + 1, ensemble, fenced)) if more else None
                await self._write_back_all(present)
                if present:
                    last, length = present[-1].entry_id, present[-1].length
                if reading is None:
                    break
        finally:
            if reading is not None:
                reading.cancel()
        return await self._close(last, length)

    async def _read_ahead(self, first: int, ensemble,
                          fenced: dict[int, dict]) -> tuple[list[LedgerEntry], bool]:
        """RC4: the present entries from ``first`` on, one window of held reads from every
        fenced bookie, decided per entry as ``_decide`` does; (the present run, whether
        the window ended with entries still present: read on). An entry the batches leave
        undecided (a bookie failed, lagged or sent a corrupt copy) is decided alone."""
        last = first + WINDOW_IDS - 1
        meta = self.metadata
        held: dict[int, dict[int, bytes]] = {i: {} for i in fenced}

        async def one(index: int) -> tuple[int, int]:
            covered, error = await held_read(self.bk.client(ensemble[index]), self.ledger_id,
                                             HeldRead(index, first, last, 1),
                                             self.bk.read_timeout_s, held[index])
            if error is not None:
                log.warning("recovery of ledger %d: held read of %d..%d on %s: %s",
                            self.ledger_id, first, last, ensemble[index], error)
            return index, covered
        covered = dict(await asyncio.gather(*(one(i) for i in fenced)))
        present: list[LedgerEntry] = []
        for entry_id in range(first, last + 1):
            entry, missing = None, 0
            for index in write_set(entry_id, len(ensemble), meta.write_quorum):
                if index not in fenced:
                    continue
                data = held[index].get(entry_id)
                if data is not None:
                    try:
                        entry = self.codec.decode(data, entry_id)
                        break
                    except DigestMismatch as exc:
                        log.warning("recovery of ledger %d: %s", self.ledger_id, exc)
                elif covered[index] >= entry_id:
                    missing += 1
            if entry is None and missing < meta.write_quorum - meta.ack_quorum + 1:
                entry = await self._decide(entry_id, ensemble, fenced)  # undecided here
            if entry is None:
                return present, False  # missing: the end
            present.append(entry)
        return present, True

    async def _mark_in_recovery(self) -> None:
        while self.metadata.state is MetadataState.OPEN:
            try:
                self.metadata = await self.bk.store.write(
                    dataclasses.replace(self.metadata, state=MetadataState.IN_RECOVERY))
            except BadVersion:
                self.metadata = await self.bk.store.read(self.ledger_id)

    async def _fence(self, ensemble) -> dict[int, dict]:
        """Fence every bookie of the last segment; index -> reply for those that fenced."""
        async def one(index: int, bookie_id: str):
            try:
                return index, await asyncio.wait_for(
                    self.bk.client(bookie_id).fence(self.ledger_id, self.codec.master_key),
                    self.bk.read_timeout_s)
            except (BookieError, *BOOKIE_FAILURES) as exc:
                log.warning("recovery of ledger %d: fence on %s failed: %s", self.ledger_id,
                            bookie_id, exc)
                return index, None
        replies = await asyncio.gather(*(one(i, b) for i, b in enumerate(ensemble)))
        return {index: reply for index, reply in replies if reply is not None}

    def _check_coverage(self, ensemble, fenced: dict[int, dict]) -> None:
        """No write set may hold Qa or more bookies that did not fence: such a set could
        still gather Qa acknowledgements for the old writer (EN4)."""
        meta = self.metadata
        for entry_id in range(len(ensemble)):
            unknown = [i for i in write_set(entry_id, len(ensemble), meta.write_quorum)
                       if i not in fenced]
            if len(unknown) >= meta.ack_quorum:
                raise RecoveryUndecided(
                    f"ledger {self.ledger_id}: bookies {[ensemble[i] for i in unknown]} did "
                    f"not fence; their write set could still be acknowledged")

    async def _length_at(self, entry_id: int) -> int:
        if entry_id < 0:
            return 0
        reader = EnsembleReader(self.bk, self.metadata, self.codec)
        return (await reader._read_replicas(entry_id)).length  # recovery reads past the LAC

    async def _decide(self, entry_id: int, ensemble, fenced: dict[int, dict]):
        """The entry if present, None if missing; RecoveryUndecided otherwise (EN4)."""
        meta = self.metadata
        missing = 0
        for index in write_set(entry_id, len(ensemble), meta.write_quorum):
            if index not in fenced:
                continue  # only bookies that durably fenced are asked
            try:
                data = await asyncio.wait_for(
                    self.bk.client(ensemble[index]).read_entry(self.ledger_id, entry_id),
                    self.bk.read_timeout_s)
                return self.codec.decode(data, entry_id)
            except (NoEntry, NoLedger):
                missing += 1
            except (BookieError, *BOOKIE_FAILURES) as exc:
                log.warning("recovery of ledger %d: entry %d on %s: %s", self.ledger_id,
                            entry_id, ensemble[index], exc)
        if missing >= meta.write_quorum - meta.ack_quorum + 1:
            return None
        raise RecoveryUndecided(f"ledger {self.ledger_id}: entry {entry_id} neither found nor "
                                f"missing on enough bookies ({missing} said ENOENTRY)")

    async def _write_back_all(self, entries: list[LedgerEntry]) -> None:
        """RC3 for a run of present entries: first one recovery-add batch per bookie of
        recovery's view, then entry by entry in id order, each entry written to every
        bookie of its write set in the view *as it is then* that has not acknowledged it,
        replacing bookies that fail. (A replacement made for entry e places every later
        entry too, including ones a batch already gave the bookie it replaced: the
        simulator's seed 427.) Entries are re-framed as they were written (S3)."""
        if not entries:
            return
        meta = self.metadata
        datas = {e.entry_id: self.codec.frame(e.entry_id, e.lac, e.length, e.payload)
                 for e in entries}
        acked: dict[int, set[str]] = {e.entry_id: set() for e in entries}
        batches: dict[str, list[int]] = {}
        for entry in entries:
            ensemble = segment_for(self.ensembles, entry.entry_id)[1]
            for index in write_set(entry.entry_id, len(ensemble), meta.write_quorum):
                batches.setdefault(ensemble[index], []).append(entry.entry_id)

        async def send(bookie_id: str, ids: list[int]) -> None:
            for at in range(0, len(ids), WRITE_BACK_BATCH_ENTRIES):
                part = ids[at:at + WRITE_BACK_BATCH_ENTRIES]
                try:
                    await asyncio.wait_for(self.bk.client(bookie_id).add_batch(
                        self.ledger_id, [datas[e] for e in part], self.codec.master_key,
                        self.codec.digest_type.header_name, recovery=True),
                        self.bk.add_timeout_s)
                except (BookieError, *BOOKIE_FAILURES) as exc:
                    log.warning("recovery of ledger %d: write-back of %d entries to %s "
                                "failed (%s); those entries one by one", self.ledger_id,
                                len(ids) - at, bookie_id, exc)
                    return
                for entry_id in part:
                    acked[entry_id].add(bookie_id)
        await asyncio.gather(*(send(b, ids) for b, ids in batches.items()))
        for entry in entries:
            await self._write_back(entry.entry_id, datas[entry.entry_id],
                                   acked[entry.entry_id])

    async def _write_back(self, entry_id: int, data: bytes, acked: set[str]) -> None:
        """RC3 for one entry: a recovery add (it passes the fence) to every bookie of its
        write set in recovery's view that has not acknowledged it; each bookie that fails
        is replaced in recovery's view (RC1) and the entry written to the replacement."""
        quorum = self.metadata.write_quorum
        for replacements in range(WRITE_BACK_REPLACEMENTS_MAX + 1):
            ensemble = segment_for(self.ensembles, entry_id)[1]
            need = [i for i in write_set(entry_id, len(ensemble), quorum)
                    if ensemble[i] not in acked]
            if not need:
                return
            if replacements:  # the last round's failures: replace them, then try again
                self._failed.update(ensemble[i] for i in need)
                ensemble = await self._replace(ensemble, need, entry_id)
            done = await self._add_to(ensemble, need, entry_id, data)
            acked.update(ensemble[i] for i, ok in zip(need, done) if ok)
        ensemble = segment_for(self.ensembles, entry_id)[1]
        failed = [ensemble[i] for i in write_set(entry_id, len(ensemble), quorum)
                  if ensemble[i] not in acked]
        if failed:
            raise RecoveryUndecided(f"ledger {self.ledger_id}: entry {entry_id} could not be "
                                    f"written back to {failed} nor to replacements")

    async def _add_to(self, ensemble, indices, entry_id: int, data: bytes) -> list[bool]:
        async def one(index: int) -> bool:
            try:
                await asyncio.wait_for(self.bk.client(ensemble[index]).add_entry(
                    self.ledger_id, entry_id, data, self.codec.master_key,
                    self.codec.digest_type.header_name, recovery=True), self.bk.add_timeout_s)
                return True
            except (BookieError, *BOOKIE_FAILURES) as exc:
                log.warning("recovery of ledger %d: write-back of entry %d to %s failed: %s",
                            self.ledger_id, entry_id, ensemble[index], exc)
                return False
        return list(await asyncio.gather(*(one(i) for i in indices)))

    async def _replace(self, ensemble, failed: list[int], entry_id: int) -> tuple[str, ...]:
        """An ensemble change during recovery, in recovery's view only (RC1): a segment from
        ``entry_id`` with the failed indices replaced by bookies outside the ensemble that
        have not failed this recovery."""
        candidates = [b for b in await self.bk.writable_bookies()
                      if b not in ensemble and b not in self._failed]
        if len(candidates) < len(failed):
            raise RecoveryUndecided(f"ledger {self.ledger_id}: no bookie to replace "
                                    f"{[ensemble[i] for i in failed]} during recovery")
        chosen = self.bk.placement.replace(
            ensemble, failed, self.metadata.write_quorum, candidates,
            await self.bk.locations(list(ensemble) + candidates), caller="recovery")
        self.ensembles = with_segment(self.ensembles, entry_id, chosen)
        log.info("recovery of ledger %d: %s replaced by %s from entry %d (committed with the "
                 "close)", self.ledger_id, [ensemble[i] for i in failed],
                 [chosen[i] for i in failed], entry_id)
        return tuple(chosen)

    async def _close(self, last: int, length: int) -> LedgerMetadata:
        """RC1, RC2: one CAS to CLOSED that also commits recovery's segments."""
        while True:
            current = self.metadata
            if current.state is MetadataState.CLOSED:
                return current  # a concurrent recovery closed it: its end counts (converge)
            fenced = len(self._fenced_ensembles)
            if len(current.ensembles) != fenced or \
                    current.ensembles[-1] != self._fenced_ensembles[-1]:
                raise RecoveryUndecided(f"ledger {self.ledger_id}: its last segment changed "
                                        f"during recovery; recover again")
            # Earlier segments as they are now (a worker may have replaced a bookie there),
            # the fenced one and any after it as recovery left them.
            ensembles = current.ensembles[:-1] + self.ensembles[fenced - 1:]
            try:
                self.metadata = await self.bk.store.write(dataclasses.replace(
                    current, state=MetadataState.CLOSED, last_entry_id=last, length=length,
                    ensembles=ensembles))
                return self.metadata
            except BadVersion:
                self.metadata = await self.bk.store.read(self.ledger_id)
