"""Shrinking a failing seed: drop its plan's faults one by one while it still fails.

The plan's other choices (quorums, the writer, the recovery modes) stay: they are the
scenario; the faults are the noise around it. Removing a fault changes the run's later random
delays too, so a shrunk plan is a new run that still fails, not a replay with a hole.
"""

from __future__ import annotations

import dataclasses

from tests.support.simulation.scenario import Outcome, run_plan, run_seed
from tests.support.simulation.topology import topology_plan


def _same_failure(outcome: Outcome, properties: set[str]) -> bool:
    return bool(properties & {v.split(":")[0] for v in outcome.violations})


def shrink(seed: int, rounds: int = 3, topology: bool = False) -> Outcome:
    """The failing ``seed`` (on the topology: topology.py) with as few faults as still give
    one of its violated properties; the original outcome if it does not fail."""
    def run(faults=None) -> Outcome:
        if not topology:
            return run_seed(seed, faults)
        plan = topology_plan(seed)
        return run_plan(plan if faults is None else dataclasses.replace(plan,
                                                                          faults=tuple(faults)))
    best = run()
    if not best.failed:
        return best
    properties = {v.split(":")[0] for v in best.violations}
    faults = list(best.plan.faults)
    for _ in range(rounds):
        changed = False
        at = 0
        while at < len(faults):
            trial = faults[:at] + faults[at + 1:]
            outcome = run(trial)
            if _same_failure(outcome, properties):
                faults, best, changed = trial, outcome, True
            else:
                at += 1
        if not changed:
            break
    return best


def report(outcome: Outcome, trace_lines: int | None = None) -> str:
    """The plan, its faults, the violations and the trace, for a human."""
    lines = [outcome.plan.text(), "faults:"]
    lines += [f"  {fault.text()}" for fault in outcome.plan.faults] or ["  (none)"]
    lines += ["violations:"] + [f"  {v}" for v in outcome.violations] + ["trace:"]
    trace = outcome.trace.lines()
    if trace_lines is not None and len(trace) > trace_lines:
        trace = trace[:trace_lines] + [f"... {len(trace) - trace_lines} more events"]
    lines += [f"  {line}" for line in trace]
    return "\n".join(lines)
