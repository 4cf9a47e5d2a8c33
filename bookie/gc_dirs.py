"""Garbage collection of every ledger dir: one GarbageCollector each, one run over all.

BookKeeper runs a GarbageCollectorThread per SingleDirectoryDbLedgerStorage. Ours keeps one
GarbageCollector per dir (its own log metadata, dead set, throttle and compaction clock)
and drives their runs one dir after the other as one run, so the node's driver, the
``/v1/bookie/gc`` answer and the totals see one run as before. With one ledger dir this is
that dir's GarbageCollector with the same answers.

Thread-safety: as GarbageCollector's (bookie/gc.py), call by call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Collection

from bookie.gc import GarbageCollector
from bookie.gc_run import GcResult, count_run, merge_results
from bookie.stats import GcCounters

if TYPE_CHECKING:
    from bookie.storage import LedgerStorage
    from bookie.storage_routes import Placement


class DirsRun:
    """One run over every dir: the dirs' runs in order, one at a time."""

    def __init__(self, gcs: list[GarbageCollector], force: str | None,
                 disk_warn: "bool | Collection[int]") -> None:
        self._gcs = gcs
        self._force, self._disk_warn = force, disk_warn
        self.index = 0
        self.results: list[GcResult] = []
        self.current = gcs[0].begin(force, self._warn(0))
        self.result = self.current.result

    def next_dir(self) -> bool:
        """The finished dir's result kept; False when it was the last dir."""
        self.results.append(self.current.result)
        self.index += 1
        if self.index == len(self._gcs):
            self.result = (self.results[0] if len(self.results) == 1
                           else merge_results(self.results))
            return False
        self.current = self._gcs[self.index].begin(self._force, self._warn(self.index))
        self.result = self.current.result
        return True

    def _warn(self, index: int) -> bool:
        """G6 per dir: ``disk_warn`` is the set of the ledger dirs over the warn threshold
        (a bool: every dir alike), so a dir short of room pauses its own compaction only."""
        if isinstance(self._disk_warn, bool):
            return self._disk_warn
        return index in self._disk_warn

    @property
    def forced(self) -> bool:
        return self.current.forced

    def progress_json(self) -> dict:
        progress = self.current.progress_json()
        if len(self._gcs) > 1:
            progress["ledgerDir"] = self.index
        return progress


def _elsewhere(placement: "Placement", index: int) -> Callable[[int], bool]:
    def lives_elsewhere(ledger_id: int) -> bool:
        home = placement.home(ledger_id)
        return home is not None and home != index
    return lives_elsewhere


class DirsGc:
    """GarbageCollector's calls over every ledger dir (see the module docstring)."""

    def __init__(self, units: list["LedgerStorage"], counters: GcCounters | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 placement: "Placement | None" = None) -> None:
        """``placement``: where each ledger lives (bookie/storage_routes.py), so a dir's GC
        counts a ledger homed in another dir as dead there (G1 in bookie/gc.py)."""
        self.gcs = [GarbageCollector(unit, clock=clock, counted=False,
                                     lives_elsewhere=_elsewhere(placement, index)
                                     if placement is not None and len(units) > 1 else None)
                    for index, unit in enumerate(units)]
        self.counters = counters if counters is not None else GcCounters()
        #: Each dir's own totals, in dir order (BookKeeper's GC stats are per ledger dir).
        self.dir_counters = [GcCounters() for _ in units]
        self.running: DirsRun | None = None
        self.last_result: GcResult | None = None

    @property
    def suspended(self) -> bool:
        return self.gcs[0].suspended

    @suspended.setter
    def suspended(self, on: bool) -> None:
        for gc in self.gcs:
            gc.suspended = on

    @property
    def compactions(self) -> dict:
        """kind -> (runs that compacted, wall-clock ms the last ended), over every dir."""
        kinds = self.gcs[0].compactions
        return {kind: (max(gc.compactions[kind][0] for gc in self.gcs),
                       max(gc.compactions[kind][1] for gc in self.gcs)) for kind in kinds}

    def begin(self, force: str | None = None,
              disk_warn: "bool | Collection[int]" = False) -> DirsRun:
        assert self.running is None, "one GC run at a time"
        self.running = DirsRun(self.gcs, force, disk_warn)
        return self.running

    def step(self, run: DirsRun, budget_s: float | None = None) -> float | None:
        """The current dir's step; a dir's end starts the next dir's run (wait 0)."""
        gc = self.gcs[run.index]
        try:
            wait = gc.step(run.current) if budget_s is None else gc.step(run.current, budget_s)
        except BaseException:  # the run ended there: counted with what the dirs did so far
            results = run.results + [gc.last_result]
            self.last_result = results[0] if len(results) == 1 else merge_results(results)
            self.running = None
            self._count(self.last_result)
            raise
        if wait is not None:
            return wait
        if run.next_dir():
            return 0.0
        self._count(run.result)
        self.last_result = run.result
        self.running = None
        return None

    def _count(self, result: GcResult) -> None:
        count_run(self.counters, result)
        for counters, dir_result in zip(self.dir_counters, result.dirs or [result]):
            count_run(counters, dir_result)

    def run(self, force: str | None = None,
            disk_warn: "bool | Collection[int]" = False) -> GcResult:
        """A whole run on the calling thread, throttle sleeps included (offline tools)."""
        run = self.begin(force, disk_warn)
        while (wait := self.step(run)) is not None:
            if wait > 0:
                time.sleep(wait)  # noqa: sleep-ok (the compaction throttle, offline)
        return run.result

    def abort(self) -> None:
        run, self.running = self.running, None
        if run is not None:
            self.gcs[run.index].abort()

    def forget_dead(self, ledger_id: int) -> None:
        for gc in self.gcs:
            gc.forget_dead(ledger_id)

    def status_json(self) -> dict:
        status = self.gcs[0].status_json()
        run, last = self.running, self.last_result
        status.update({"running": run is not None,
                       "current": run.progress_json() if run is not None else None,
                       "lastRun": last.to_json() if last is not None else None,
                       "totals": self.counters.to_json()})
        return status
