"""The run's other ledgers (plan.side_ledgers): each written by its own process beside the
main one and closed, some deleted (plan.side_deletes, seconds after recovery 1 began) while
recoveries, workers and GC run; the auditor marks them too when a bookie is lost for good.

Invariants:
    DL1. A ledger deleted from the metadata has no live copy on any up bookie at the end
         (endgame.py EG1: GC had its grace and a run more): GC from metadata (GM1) took
         every copy, and no recovery add brought one back (W5 revives only a ledger the
         metadata lists), so no read of it is served.
    DL2. A ledger not deleted is checked as the main one is, with a checker of its own
         (S1-S3, S1 after GC, LIVE), its violations named by its id.
    DL3. See ``recover_open``.
"""

from __future__ import annotations

import asyncio

from api.client.fragments import referenced_bookies
from tests.support.simulation.checker import Checker
from tests.support.simulation.clients import CLIENT_ERRORS, PASSWORD
from tests.support.simulation.topology import offered

#: A side writer that has not closed by then is killed (its ledger is recovered at the end).
SIDE_WRITE_MAX_S = 10.0


class SideLedgers:
    def __init__(self, run) -> None:
        self.run = run
        self.ids: dict[int, int] = {}  # index -> ledger id
        self.checkers: dict[int, Checker] = {}  # ledger id -> its checker
        self.deletes = 0  # deletes that reached the metadata

    def deleted_any(self) -> bool:
        return any(after is not None for after in self.run.plan.side_deletes)

    def start(self) -> None:
        for index in range(self.run.plan.side_ledgers):
            self.run.processes.spawn(f"side#{index}", self._write(index))

    async def _write(self, index: int) -> None:
        run, plan, name = self.run, self.run.plan, f"side#{index}"
        try:
            writer = await run.bk(name).create_ledger(
                plan.ensemble, plan.write_quorum, plan.ack_quorum, password=PASSWORD)
        except CLIENT_ERRORS as exc:
            run.trace(f"{name}: create failed: {type(exc).__name__}")
            return
        ledger_id = writer.ledger_id
        self.ids[index] = ledger_id
        checker = self.checkers[ledger_id] = Checker(run.trace, label=f"L{ledger_id} ")
        checker.violations = run.checker.violations  # one list for the run
        try:
            await asyncio.wait_for(self._fill(writer, checker, index), SIDE_WRITE_MAX_S)
        except CLIENT_ERRORS as exc:
            run.trace(f"{name}: failed: {type(exc).__name__}")

    async def _fill(self, writer, checker: Checker, index: int) -> None:
        for i in range(1 + (self.run.plan.seed + index) % 6):
            payload = f"side{index}-append{i}-".encode()
            checker.ack(await writer.append(payload), payload)
        checker.closed(f"side#{index}", await writer.close())

    def schedule_deletes(self) -> None:
        for index, after in enumerate(self.run.plan.side_deletes):
            if after is not None and index < self.run.plan.side_ledgers:
                self.run.processes.spawn(f"deleter#{index}", self._delete(index, after))

    async def _delete(self, index: int, after: float) -> None:
        await asyncio.sleep(after)  # noqa: sleep-ok (virtual time: the plan's delete time)
        ledger_id = self.ids.get(index)
        if ledger_id is None:
            return
        self.run.trace(f"deleter#{index}: deletes L{ledger_id}")
        try:
            await self.run.bk(f"deleter#{index}").delete_ledger(ledger_id)
        except CLIENT_ERRORS as exc:  # an uncertain delete may still have happened (SM5)
            self.run.trace(f"deleter#{index}: failed: {type(exc).__name__}")

    def lost(self, bookie_id: str) -> None:
        """The auditor marks every listed ledger that names a bookie lost for good."""
        for ledger_id in self.ids.values():
            metadata = self.run.store.ledgers.get(ledger_id)
            if metadata is not None and bookie_id in referenced_bookies(metadata):
                self.run.ur.mark(ledger_id, [bookie_id])

    async def recover_open(self) -> None:
        """DL3: a ledger whose writer died is recovered in the healed cluster before the
        return phase loses a bookie for good, as the main ledger is: an open ledger whose
        write sets lost a bookie for good cannot be recovered at Qa=1 (every member must
        fence), which is the protocol, not a wedge."""
        run = self.run
        for ledger_id, checker in sorted(self.checkers.items()):
            metadata = run.store.ledgers.get(ledger_id)
            if metadata is None or metadata.closed:
                continue
            try:
                reader = await run.bk("side-recovery").open_ledger(ledger_id, PASSWORD)
                checker.closed("side-recovery", reader.metadata.last_entry_id)
            except CLIENT_ERRORS as exc:
                run.trace(f"side-recovery: L{ledger_id} failed: {type(exc).__name__}")

    async def final(self, up: set[str]) -> None:
        run = self.run
        await self.recover_open()
        for ledger_id in sorted(self.checkers):
            checker = self.checkers[ledger_id]
            if ledger_id not in run.store.ledgers:
                self.deletes += 1
                self._gone(ledger_id, up)
                continue
            metadata = await run.store.harness_read(ledger_id)
            bookies = run.net.bookies.items()
            replicas = {b: dict(bookie.memory[ledger_id].entries) for b, bookie in bookies
                        if ledger_id in bookie.memory}
            reads = {}
            if metadata.closed:
                reads["reader#1"] = await run._read_all("reader#1", metadata.last_entry_id,
                                                        ledger_id)
            checker.final(metadata, replicas, reads)  # DL2
            copies = {b: (bookie.memory[ledger_id].deleted,
                          set(bookie.memory[ledger_id].entries))
                      for b, bookie in bookies if ledger_id in bookie.memory}
            deleted = {b: gc.deleted.get(ledger_id, set()) for b, gc in run.gcs.items()}
            checker.gc_kept_named_copies(metadata, copies, deleted, up)
            checker.not_wedged(metadata, run.ur.marker(ledger_id), up, offered(run))

    def _gone(self, ledger_id: int, up: set[str]) -> None:
        """DL1."""
        if not self.run.gcs:
            return
        for bookie_id in sorted(up):
            ledger = self.run.net.bookies[bookie_id].memory.get(ledger_id)
            if ledger is not None and not ledger.deleted:
                self.checkers[ledger_id].violation(
                    "DL1", f"deleted from the metadata, yet {bookie_id} holds a live copy "
                           f"({len(ledger.entries)} entries) after GC's grace")
