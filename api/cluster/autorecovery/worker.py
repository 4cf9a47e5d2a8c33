"""A replication worker (BookKeeper's ReplicationWorker + LedgerFragmentReplicator,
docs/cluster.md §4): takes the lock of a marked ledger and puts its missing copies back.

For each closed fragment (segment x bookie index) whose bookie is *bad* (not registered,
writable or read-only; being decommissioned; or named by the marker and missing some of
the fragment's entries, RW6), it reads the fragment's entries from the surviving replicas, each one's
digest verified, writes them to a new bookie chosen by placement (writable, not in the
segment) as recovery adds, then compare-and-sets the new bookie into that segment. An
OPEN ledger whose last segment holds a lost bookie waits
``open_ledger_rereplication_grace_period_s`` (RW7) (its writer may still change its
ensemble itself), then is recovered (fenced, closed: EN4) and replicated. The
marker goes once no closed fragment names a bad bookie; a failed attempt releases the lock
and backs off, doubling up to BACKOFF_MAX_S.

Invariants:
    RW1. A segment names the new bookie only after every entry of the fragment is durable
         on it (the recovery adds were acknowledged): a reader sent there finds them.
    RW2. The replacement is a compare-and-set that re-checks the segment still names the
         bad bookie at that index and not yet the target: two workers (a lock lost with a
         session) never both replace it, never put one bookie in two places of a segment,
         and a writer's concurrent ensemble change is kept.
    RW3. An entry is copied only from a replica whose copy verifies against the ledger's
         digest; with none, the attempt fails (retried later), nothing is replaced.
    RW4. Only closed fragments are copied: a fragment whose end is not known (an open last
         segment) is recovered first.
    RW5. A target that refuses the copy (a tombstone it cannot lift, read-only, down) is
         ruled out for that fragment and the next candidate tried, so no one bookie can
         wedge a ledger's re-replication.
    RW6. A bookie the marker names but that is registered again (it came back) is not
         replaced on the marker's word: its closed fragments are checked against the ids it
         holds (``entry_id_ranges``, the replica check), and only a fragment missing
         entries is replaced (BookKeeper's LedgerChecker reads the fragment).
    RW7. An open ledger's grace counts from when this worker first saw its last segment
         hold the present set of lost bookies, not from the marker's ctime: a marker made
         for an older loss (the writer replaced that bookie itself) must not cut short the
         writer's chance to replace a newer one. A restart forgets, which only delays.
    RW8. A fragment that cannot be copied now (no candidate target, no verified source)
         fails the attempt only after every other bad fragment was tried: one fragment whose
         only candidate is gone must not keep another, copyable one at fewer copies
         (found by the simulator, seed 4031).
    RW9. A copy moves batches, not entries, and changes nothing above: each entry is
         still verified (RW3) and durable on the target (RW1) before the CAS; a batch that
         fails or comes back short only sends those entries one by one; the rate limit
         still takes every byte before it is sent.
    RW10. A new writable bookie clears every failed ledger's back-off: an attempt that found
         no target (no spare bookie) is made again at once, not up to BACKOFF_MAX_S later.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
import typing
from typing import Callable

from api import wire
from api.client.batch_read import WINDOW_IDS, WINDOWS_IN_FLIGHT, held_read, plan
from api.client.bookies import BOOKIE_FAILURES
from api.client.codec import LedgerCodec
from api.client.distribution import write_set
from api.client.ensemble import BookKeeper
from api.client.ensemble_errors import NotEnoughBookies
from api.client.ensemble_recovery import Recovery
from api.client.fragments import Fragment, fragments, missing_entries
from api.client.metadata import BadVersion, LedgerMetadata
from api.cluster.autorecovery.copy_progress import CopyProgress, WorkerStats
from api.cluster.autorecovery.placement_repair import repair_placement
from api.cluster.autorecovery.throttle import Throttle
from api.cluster.underreplication import Underreplication
from bookie.errors import BookieError, IOFailure, NoLedger

log = logging.getLogger("api.cluster.autorecovery")
POLL_INTERVAL_S = 1.0
BACKOFF_FIRST_S, BACKOFF_MAX_S = 1.0, 60.0
#: A copy sends POST batches of at most COPY_BATCH_BYTES, this many in flight.
COPY_BATCH_BYTES, COPY_SENDS_IN_FLIGHT = 1 << 20, 4


#: A copy's window holds about this many bytes of the ledger, so that the first batch goes
#: to the target soon and the reads and sends overlap whatever the entries' size.
COPY_WINDOW_BYTES = 4 << 20


def _window_ids(metadata: LedgerMetadata) -> int:
    """Ids per copy window: WINDOW_IDS of small entries, fewer of big ones (a closed
    ledger's metadata gives its mean entry size)."""
    count = metadata.last_entry_id + 1
    if count <= 0 or metadata.length <= 0:
        return WINDOW_IDS
    return max(16, min(WINDOW_IDS, COPY_WINDOW_BYTES * count // metadata.length))


class _TargetRefused(IOFailure):
    """RW5: the copy's target failed a write; another target may take it."""


class ReplicationWorker:
    def __init__(self, bk: BookKeeper, ur: Underreplication, grace_s: float,
                 throttle: Throttle, wake: asyncio.Event,
                 clock: Callable[[], float] = time.monotonic,
                 repair_placement: bool = False) -> None:
        self.bk, self.ur = bk, ur
        #: PR1 on: the auditor's placement check is (BookKeeper repairs placement only with
        #: repairedPlacementPolicyNotAdheringBookieEnable)
        self.repair_placement = repair_placement
        self.clock = clock  # grace and back-off; the simulator passes its virtual time
        self.grace_s = grace_s
        self.throttle = throttle
        self.wake = wake
        self.stats = WorkerStats()
        self._retry: dict[int, tuple[float, float]] = {}  # ledger -> (not before, backoff)
        #: RW7: (ledger, lost bookies of its open last segment) -> first seen (monotonic).
        self._open_seen: dict[tuple[int, frozenset], float] = {}
        self._writable_seen: frozenset | None = None  # RW10

    async def run(self) -> None:
        while True:
            try:
                worked = await self.run_once()
            except Exception:  # noqa: BLE001 - a lost session, a restart: next round
                log.exception("replication worker round failed; retrying")
                worked = False
            if not worked:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), POLL_INTERVAL_S)
                except asyncio.TimeoutError:
                    pass

    async def run_once(self) -> bool:
        """Take one marked ledger and work on it; False if there was none to take."""
        if not await asyncio.to_thread(self.ur.enabled):
            return False
        if self._retry:  # RW10: a new bookie may be the target a failed attempt lacked
            writable = frozenset(await self.bk.writable_bookies())
            if self._writable_seen is not None and writable - self._writable_seen:
                self._retry.clear()
            self._writable_seen = writable
        now = self.clock()
        skip = frozenset(i for i, (at, _) in self._retry.items() if at > now)
        taken = await asyncio.to_thread(self.ur.poll, skip)
        if taken is None:
            return False
        ledger_id, replicas, _ctime_ms, version = taken
        try:
            outcome = await self.replicate(ledger_id, set(replicas))
        except Exception as exc:  # noqa: BLE001 - released and retried after a backoff
            log.warning("re-replication of ledger %d failed: %s", ledger_id, exc)
            self.stats.failures += 1
            outcome = None
        if outcome is True:
            if await asyncio.to_thread(self.ur.mark_replicated, ledger_id, version):
                self.stats.ledgers_replicated += 1
                log.info("ledger %d is fully replicated again", ledger_id)
            self._retry.pop(ledger_id, None)
            return True
        await asyncio.to_thread(self.ur.release, ledger_id)
        backoff = self._retry.get(ledger_id, (0.0, BACKOFF_FIRST_S / 2))[1] * 2
        wait = outcome if isinstance(outcome, float) else min(backoff, BACKOFF_MAX_S)
        self._retry[ledger_id] = (self.clock() + wait, min(backoff, BACKOFF_MAX_S))
        return True

    async def replicate(self, ledger_id: int, replicas: set[str]):
        """True once nothing closed names a bad bookie; a float: look again in that many
        seconds (an open ledger in its grace period). Raises on a failed attempt."""
        try:
            metadata = await self.bk.store.read(ledger_id)
        except NoLedger:
            return True  # deleted: nothing to put back
        alive = await self.bk.alive_bookies()
        leaving = await asyncio.to_thread(self.ur.decommissioning)
        codec = LedgerCodec.for_password(ledger_id, metadata.password, metadata.digest_type)
        lost = frozenset(b for b in metadata.ensembles[-1][1] if b not in alive or b in leaving)
        if not metadata.closed and lost:
            now = self.clock()
            seen = self._open_seen.setdefault((ledger_id, lost), now)  # RW7
            if now - seen < self.grace_s:
                return float(max(0.1, self.grace_s - (now - seen)))
            log.info("ledger %d: open %.0f s after its bookies %s were lost; recovering it",
                     ledger_id, now - seen, sorted(lost))
            metadata = await Recovery(self.bk, metadata, codec).run()  # RW4
        self._open_seen = {k: v for k, v in self._open_seen.items() if k[0] != ledger_id}
        failed: IOFailure | None = None
        for fragment in fragments(metadata):
            if fragment.last is not None and await self._bad(metadata, fragment, replicas,
                                                             alive, leaving):
                try:
                    metadata = await self._replace(metadata, fragment, codec, alive, leaving)
                except IOFailure as exc:  # RW8: the other fragments are still worth copying
                    log.warning("ledger %d: %s's fragment of segment %d not copied: %s",
                                ledger_id, fragment.bookie_id, fragment.first, exc)
                    failed = failed or exc
        if failed is not None:
            raise failed
        if self.repair_placement:
            await repair_placement(self, metadata, codec, alive, leaving)  # PR1
        current = await self.bk.store.read(ledger_id)
        left = [f for f in fragments(current) if f.last is not None and
                await self._bad(current, f, replicas, alive, leaving)]
        if left:
            raise IOFailure(f"ledger {ledger_id}: fragments still on {left[0].bookie_id}")
        return True

    async def _bad(self, metadata: LedgerMetadata, fragment: Fragment, replicas: set[str],
                   alive: set[str], leaving: set[str]) -> bool:
        """Whether a closed fragment must be copied elsewhere: its bookie is gone or leaving,
        or the marker names it and it lacks some of the fragment's entries (RW6)."""
        bookie_id = fragment.bookie_id
        if bookie_id not in alive or bookie_id in leaving:
            return True
        if bookie_id not in replicas:
            return False
        try:
            held = await asyncio.wait_for(self.bk.client(bookie_id).entry_id_ranges(
                metadata.ledger_id), self.bk.read_timeout_s)
        except NoLedger:
            held = []
        except (BookieError, *BOOKIE_FAILURES):
            return True  # it cannot say what it holds: as good as gone
        return bool(missing_entries(fragment, held, metadata.ensemble_size,
                                    metadata.write_quorum))

    async def _replace(self, metadata: LedgerMetadata, fragment: Fragment, codec: LedgerCodec,
                       alive: set[str], leaving: set[str], targets=None) -> LedgerMetadata:
        first, members = metadata.ensembles[fragment.segment]
        candidates = targets
        if candidates is None:
            writable = await self.bk.writable_bookies()
            candidates = self.bk.placement.targets(  # PP1: best for the policy first
                members, fragment.index, metadata.write_quorum,
                [b for b in writable if b not in members and b not in leaving],
                await self.bk.locations(list(members) + writable))
        entries = fragment.entries(metadata.ensemble_size, metadata.write_quorum)
        refusals = []
        for target in candidates:  # RW5: a target that refuses is ruled out
            try:
                await self._copy(metadata, fragment, members, entries, target, codec, alive)
                break
            except _TargetRefused as exc:
                log.warning("ledger %d: %s refused the copy of %s's fragment (%s); trying "
                            "another bookie", metadata.ledger_id, target, fragment.bookie_id,
                            exc)
                refusals.append(f"{target}: {exc}")
        else:
            raise NotEnoughBookies(f"ledger {metadata.ledger_id}: no writable bookie outside "
                                   f"{list(members)} took {fragment.bookie_id}'s copies "
                                   f"({'; '.join(refusals) or 'none to ask'})")
        while True:  # RW2
            current = await self.bk.store.read(metadata.ledger_id)
            segment_first, now_members = current.ensembles[fragment.segment]
            if segment_first != first or now_members[fragment.index] != fragment.bookie_id:
                return current  # replaced by someone else meanwhile
            if target in now_members:  # RW2: another worker put it in this segment meanwhile
                log.warning("ledger %d segment %d: %s is in the segment already; %s stays",
                            metadata.ledger_id, first, target, fragment.bookie_id)
                return current
            chosen = list(now_members)
            chosen[fragment.index] = target
            ensembles = list(current.ensembles)
            ensembles[fragment.segment] = (first, tuple(chosen))
            try:
                updated = await self.bk.store.write(
                    dataclasses.replace(current, ensembles=tuple(ensembles)))
            except BadVersion:
                continue
            self.stats.fragments_replaced += 1
            if targets is None:  # PP3; a placement move (PR1) only ever improves the grade
                self.bk.placement.note(chosen, fragment.index, metadata.write_quorum,
                                       await self.bk.locations(chosen))
            log.info("ledger %d segment %d: %s replaced by %s (%d entries copied)",
                     metadata.ledger_id, first, fragment.bookie_id, target, len(entries))
            return updated

    async def _copy(self, metadata, fragment, members, entries, target, codec,
                    alive) -> None:
        """RW1, RW3, RW9: every entry verified from a surviving replica, then durable on
        target. The fragment is read in windows of held reads (api/client/batch_read.py),
        each residue class from one surviving replica, a few windows ahead; an entry a
        batch did not bring is read alone from its replicas. Verified entries go to the
        target as POST batches of at most COPY_BATCH_BYTES, a few in flight, each byte
        through the rate limit first."""
        if not entries:
            return
        size, quorum = metadata.ensemble_size, metadata.write_quorum
        avoid = {i for i, b in enumerate(members) if b not in alive} | {fragment.index}
        wanted = {r for r in range(size) if fragment.index in write_set(r, size, quorum)}

        def sources_of(entry_id: int) -> list[str]:
            indices = write_set(entry_id, size, quorum)
            sources = [members[i] for i in indices if i != fragment.index
                       and members[i] in alive]
            if fragment.bookie_id in alive:
                sources.append(fragment.bookie_id)  # decommissioned or marked: readable
            return sources

        def verified(body: bytes) -> list:
            """RW3 as the batch arrives: the frames whose digest verifies, as views of the
            reply (no copy until the batch to the target is built)."""
            good, bad = codec.decode_frames(body, framed=True)
            for mismatch in bad:
                log.warning("ledger %d: %s; read from another replica", metadata.ledger_id,
                            mismatch)
            return good

        async def window(first: int, last: int) -> list:
            datas: dict[int, typing.Any] = {}
            reads = plan(size, quorum, first, last, wanted, avoid)
            await asyncio.gather(*(held_read(
                self.bk.client(members[read.index]), metadata.ledger_id, read,
                self.bk.read_timeout_s, datas, verified) for read in reads))
            # The fragment's ids in the window: those of the residues its bookie holds (DS1).
            ids = [e for e in range(first, last + 1) if e % size in wanted]
            alone = [e for e in ids if e not in datas]
            for entry_id, data in zip(alone, await asyncio.gather(*(self._read_verified(
                    metadata.ledger_id, e, sources_of(e), codec) for e in alone))):
                datas[entry_id] = data
            return [datas[e] for e in ids]

        span = _window_ids(metadata)
        windows = [(at, min(at + span - 1, entries[-1]))
                   for at in range(entries[0], entries[-1] + 1, span)]
        sending: set[asyncio.Task] = set()
        reading: collections.deque = collections.deque()
        what = (f"ledger {metadata.ledger_id}: {fragment.bookie_id}'s fragment of segment "
                f"{metadata.ensembles[fragment.segment][0]} to {target}")
        with CopyProgress(self.stats, what, len(entries), self.clock) as progress:
            try:
                for first, last in windows:
                    reading.append(asyncio.ensure_future(window(first, last)))
                    if len(reading) < WINDOWS_IN_FLIGHT:
                        continue
                    await self._send_window(await reading.popleft(), metadata, target, codec,
                                            sending, progress)
                while reading:
                    await self._send_window(await reading.popleft(), metadata, target, codec,
                                            sending, progress)
                while sending:
                    await self._reap(sending, asyncio.ALL_COMPLETED)
            finally:
                for task in (*reading, *sending):
                    task.cancel()

    async def _send_window(self, datas: list[bytes], metadata, target, codec,
                           sending: set, progress: CopyProgress) -> None:
        batch: list[bytes] = []
        size = 0
        for data in datas:
            await self.throttle.take(len(data))
            batch.append(data)
            size += len(data)
            if size >= COPY_BATCH_BYTES:
                await self._start_send(metadata.ledger_id, target, batch, codec, sending, progress)
                batch, size = [], 0
        if batch:
            await self._start_send(metadata.ledger_id, target, batch, codec, sending, progress)

    async def _start_send(self, ledger_id, target, batch, codec, sending: set,
                          progress: CopyProgress) -> None:
        while len(sending) >= COPY_SENDS_IN_FLIGHT:
            await self._reap(sending, asyncio.FIRST_COMPLETED)
        sending.add(asyncio.ensure_future(self._send(ledger_id, target, batch, codec,
                                                     progress)))

    @staticmethod
    async def _reap(sending: set, when) -> None:
        done, _ = await asyncio.wait(sending, return_when=when)
        for task in done:
            sending.discard(task)
            task.result()  # a refusal (_TargetRefused) fails the copy

    async def _read_verified(self, ledger_id: int, entry_id: int, sources,
                             codec: LedgerCodec) -> bytes:
        errors = []
        for bookie_id in sources:
            try:
                data = await asyncio.wait_for(
                    self.bk.client(bookie_id).read_entry(ledger_id, entry_id),
                    self.bk.read_timeout_s)
                codec.decode(data, entry_id)  # RW3: raises DigestMismatch
                return data
            except (BookieError, *BOOKIE_FAILURES) as exc:
                errors.append(f"{bookie_id}: {exc}")
        raise IOFailure(f"entry {ledger_id}/{entry_id}: no surviving replica has a valid "
                        f"copy ({'; '.join(errors) or 'no replica alive'})")

    async def _send(self, ledger_id: int, target: str, batch: list[bytes],
                    codec: LedgerCodec, progress: CopyProgress) -> None:
        try:
            # One join builds the body from the replies' views (the only copy of the
            # bytes in the client); the lean HTTP client sends it (raw_http.py).
            await asyncio.wait_for(self.bk.client(target).add_batch_body(
                ledger_id, wire.encode_batch(batch), codec.master_key,
                codec.digest_type.header_name, recovery=True), self.bk.add_timeout_s)
        except (BookieError, *BOOKIE_FAILURES) as exc:
            raise _TargetRefused(str(exc) or type(exc).__name__) from exc
        progress.copied(len(batch), sum(len(d) for d in batch))
