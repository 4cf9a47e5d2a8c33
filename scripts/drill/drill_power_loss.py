#!/usr/bin/env python3
"""Power-loss sweep (crash model "power loss", docs/design.md §2.2), wide: many seeds, every point.

    .venv/bin/python scripts/drill/drill_power_loss.py [--seeds 200] [--first-seed 1] [--ops 40]
                                                 [--fates 2] [--fate garbage] [--seconds 1800]
    .venv/bin/python scripts/drill/drill_power_loss.py --seed 17 [--crash-at 57]    # re-run one
    .venv/bin/python scripts/drill/drill_power_loss.py --dirs 3,2 ...   # 3 ledger dirs, 2 journals

For each seed, tests/support/power_loss.py runs the seed's workload (adds, batch adds,
deferred-sync adds + force, explicit LACs, fences, deletes, checkpoints, adds racing a
checkpoint) through an in-process Bookie on a SimDisk, once per crash point k = 1, 2, ...
(the k-th fsync, fdatasync, dir fsync or rename loses power instead of happening) until the
workload finishes before its crash point; each crash is followed by ``--fates`` different
power-loss outcomes (unsynced writes kept, dropped, cut, garbled or zeroed; unsynced
directory changes forgotten; ``--fate`` forces one of them on every unsynced write), a
restart, and the full invariant check. RocksDB stays on a real
temp dir and keeps its synced writes (see tests/support/power_loss.py for why that is sound,
and why its own windows are the kill -9 drill's). One line per seed; a failing run prints its
violations and the command that re-runs it. Exit status 1 on any violation. In process only:
no network, no subprocesses.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.dir_layout import parse_dirs  # noqa: E402
from tests.support.power_loss import K_MAX, sweep_seed  # noqa: E402
from tests.support.sim_disk import WRITE_FATES  # noqa: E402


def _report_failure(run, args: argparse.Namespace) -> None:
    print(f"  FAIL {run.line()}", flush=True)
    for violation in run.violations:
        print(f"    {violation}", flush=True)
    forced = f" --fate {args.fate}" if args.fate else ""
    print(f"    re-run: .venv/bin/python scripts/drill/drill_power_loss.py --seed {run.seed} "
          f"--crash-at {run.crash_at} --ops {args.ops} --fates {args.fates}{forced}"
          + (f" --dirs {args.dirs[0]},{args.dirs[1]}" if args.dirs else ""),
          flush=True)


async def sweep(args: argparse.Namespace, workdir: str) -> tuple[int, int, int]:
    """(seeds, crash points, outcomes with a violation)."""
    started = time.monotonic()
    seeds = [args.seed] if args.seed is not None else range(args.first_seed,
                                                             args.first_seed + args.seeds)
    totals = [0, 0, 0, 0, 0]  # seeds, crash points, outcomes, failing outcomes, torn
    for seed in seeds:
        if time.monotonic() - started > args.seconds:
            print(f"stopping: --seconds {args.seconds:.0f} reached", flush=True)
            break
        t0 = time.monotonic()
        first = args.crash_at or 1
        result = await sweep_seed(seed, workdir, args.ops, args.fates, k_first=first,
                                  k_last=args.crash_at or K_MAX, fate=args.fate, dirs=args.dirs,
                                  progress=lambda run: run.violations
                                  and _report_failure(run, args))
        points = len({run.crash_at for run in result.runs})
        failing = sum(1 for run in result.runs if run.violations)
        torn = sum(run.torn_saved for run in result.runs)
        print(f"seed={seed} crash_points={points} outcomes={len(result.runs)} "
              f"acked={result.runs[-1].acked} torn_saved={torn} violations={failing} "
              f"({time.monotonic() - t0:.1f}s)", flush=True)
        totals = [totals[0] + 1, totals[1] + points, totals[2] + len(result.runs),
                  totals[3] + failing, totals[4] + torn]
    print(f"seeds={totals[0]} crash_points={totals[1]} outcomes={totals[2]} "
          f"torn_saved={totals[4]} violations={totals[3]} "
          f"seconds={time.monotonic() - started:.0f}", flush=True)
    return totals[0], totals[1], totals[3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="how many seeds to sweep")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--seed", type=int, help="sweep this one seed only")
    parser.add_argument("--crash-at", type=int, help="only this crash point (with --seed)")
    parser.add_argument("--ops", type=int, default=40, help="operations per workload")
    parser.add_argument("--fates", type=int, default=2,
                        help="power-loss outcomes drawn per crash point")
    parser.add_argument("--fate", choices=[name for name, _ in WRITE_FATES],
                        help="force this outcome on every unsynced write instead of drawing")
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--verbose", action="store_true", help="show the bookies' logs")
    parser.add_argument("--dirs", type=parse_dirs, metavar="L,J",
                        help="L ledger dirs and J journal dirs (ledger_dirs, journal_dirs), "
                             "e.g. 3,2")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="drill-power-loss-") as workdir:
        _seeds, _points, failing = asyncio.run(sweep(args, workdir))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
