#!/usr/bin/env python3
"""Kill -9 drill (crash model "kill -9", docs/design.md §2.2): SIGKILL a loaded daemon, restart, check.

    .venv/bin/python scripts/drill/drill_kill9.py [--rounds 1000] [--seconds 1800] [--seed N] [--dirs 3,2]

Each round restarts the real daemon (`python -m bookie serve`, a subprocess on 127.0.0.1 with
small journal, entry-log and checkpoint intervals so rolls and checkpoints happen all the
time), then:
  1. checks every invariant against everything sent so far (tests/support/checker.py): every
     acknowledged add reads back byte-identical, no entry never sent appears, acknowledged
     fences hold, no LAC goes below one reported before, acknowledged deletes stay deleted
     (404 ENOLEDGER), wrong keys are refused; replay's cut tails are saved aside as listed;
  2. re-adds, as a recovering writer does, what was sent but never acknowledged (recovery
     adds, same bytes: idempotent, so always 200);
  3. drives concurrent writers over HTTP (adds, batch adds, deferred-sync adds + force, LAC
     reads, explicit LACs, fences, admin deletes, checkpoints, GC) until the daemon dies:
     by a SIGKILL from here after a random delay ("timer"), or by itself at the k-th fsync,
     fdatasync, rename or dir fsync matching a glob ("crash", tests/support/crashing_disk.py):
     journal groups and rolls, entry-log syncs and rolls, lastMark, lastId.
One line per round; the last line is `rounds=N acked=M lost=0 ...`. Exit status 1 on any
violation (the data dir is then kept and named). Bounded by --rounds and --seconds; only
processes started here are signalled, by PID; traffic goes to 127.0.0.1 only. The seed fixes
the operation mix, sizes and kill plans; thread timing still varies between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import aiohttp  # noqa: E402

from api.client import BookieClient  # noqa: E402
from bookie.errors import (BookieError, Fenced, NoLedger, TooManyRequests,  # noqa: E402
                           Unavailable)
from tests.support import checker  # noqa: E402
from tests.support.bk_api import BkApi  # noqa: E402
from tests.support.checker import LedgerModel, Model, Violation  # noqa: E402
from tests.support.dir_layout import dir_lists, parse_dirs  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

FLAGS = ("--journal-max-bytes", "128KiB", "--entrylog-max-bytes", "48KiB",
         "--checkpoint-interval-ms", "40", "--journal-prealloc-bytes", "64KiB",
         "--journal-backups-count", "2", "--log-level", "warning")
#: (name, glob, k range) for rounds where the daemon SIGKILLs itself at the k-th event.
TARGETS = (
    ("journal", "*/journal/current/*.txn", (1, 600)),      # group fdatasyncs, creation fsync
    ("journal-roll", "*/journal/current", (1, 12)),        # dir fsync: roll, retention
    ("entrylog", "*/ledgers/current/*.log", (1, 60)),      # checkpoint fsync, finalize on roll
    ("lastMark", "*/ledgers/current/lastMark*", (1, 24)),  # temp fsync, rename
    ("ledger-dir", "*/ledgers/current", (1, 40)),          # lastMark, lastId, new log dir fsync
)
WRITERS = 6
RETIRED_LIVE_MAX = 16
CONNECTION_ERRORS = (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError, OSError)


#: The writers' operations (a ledger exists once an add reached it: its first is an add).
WRITER_MIX = checker.OperationMix(
    (("add", 0.55), ("batch", 0.70), ("deferred", 0.82), ("read_lac", 0.90),
     ("write_lac", 0.97), ("fence", 0.985), ("delete", 1.0)),
    batch_sizes=(2, 24), deferred_counts=(1, 12))


class StartFailure(Exception):
    """The daemon refused to start or died in recovery without a planned crash point."""


@dataclasses.dataclass
class Totals:
    rounds: int = 0
    kills_timer: int = 0
    kills_crash: int = 0
    crashes_in_recovery: int = 0
    torn_saved: int = 0
    redone: int = 0
    bk_calls: int = 0  # --protocol mixed: operations answered EOK over BookKeeper's protocol
    violations: list = dataclasses.field(default_factory=list)


class Drill:
    def __init__(self, args: argparse.Namespace, data_dir: str) -> None:
        self.args = args
        self.data_dir = data_dir
        self.rng = random.Random(args.seed)
        self.model = Model()
        self.totals = Totals()
        self.active: list[LedgerModel] = []
        self.retired: list[LedgerModel] = []
        self.deleted: list[LedgerModel] = []

    # -- one round ------------------------------------------------------------------------

    async def round(self, number: int) -> str:
        plan = self._kill_plan()
        daemon, recovery_note = await self._start_and_recover(plan)
        acked_before = self.model.acked_count
        async with BookieClient(daemon.url) as client:
            writers = [client]
            if self.args.protocol == "mixed":  # every other writer over BookKeeper's protocol
                writers.insert(0, await BkApi.connect(daemon.bk_port, client))
            try:
                died_by_itself = await self._load_until_killed(writers, client, daemon,
                                                               plan)
            finally:
                if len(writers) > 1:
                    self.totals.bk_calls += writers[0].answered
                    await writers[0].close()
        code = daemon.proc.returncode
        if code != -9:
            self._violation(Violation("exit", 0, f"daemon exited {code}, not by SIGKILL; "
                                                 f"log {daemon.log_path}"))
        if plan[0] == "crash" and died_by_itself:
            self.totals.kills_crash += 1
            how = f"crash#{plan[2]} {plan[1]}"
        else:
            self.totals.kills_timer += 1
            how = f"kill@{plan[1]:.2f}s" if plan[0] == "timer" else f"kill(crash#{plan[2]} " \
                                                                  f"{plan[1]} not reached)"
        self.totals.rounds += 1
        return (f"round {number} {how} acked={self.model.acked_count}"
                f"(+{self.model.acked_count - acked_before}) {recovery_note} "
                f"ledgers={len(self.active)}+{len(self.retired)} deleted={len(self.deleted)}")

    def _kill_plan(self) -> tuple:
        if self.rng.random() < 0.5:
            return ("timer", self.rng.uniform(0.05, 0.8), 0)
        name, glob, (low, high) = self.rng.choice(TARGETS)
        return ("crash", name, self.rng.randint(low, high), glob)

    def _daemon(self, plan: tuple | None) -> Daemon:
        crash_at = None if plan is None or plan[0] != "crash" else (plan[2], plan[3])
        listener = ("--bookie-port", "0") if self.args.protocol == "mixed" else ()
        return Daemon(self.data_dir, *FLAGS, *listener, *dir_flags(self.data_dir, self.args),
                      crash_at=crash_at)

    async def _start_and_recover(self, plan: tuple) -> tuple[Daemon, str]:
        """Start (the planned daemon, or plain ones after it died in recovery), check, redo."""
        for attempt in range(4):
            planned_crash = attempt == 0 and plan[0] == "crash"
            daemon = self._daemon(plan if planned_crash else None)
            try:
                daemon.start(timeout_s=120)
                async with BookieClient(daemon.url) as client:
                    note = await self._check_and_redo(client)
                return daemon, note
            except (RuntimeError, *CONNECTION_ERRORS) as exc:
                died = daemon.proc is not None and _exited_soon(daemon)
                if not died and daemon.proc is not None:
                    daemon.kill9()
                code = daemon.proc.returncode if daemon.proc else None
                if not (planned_crash and died and code == -9):
                    raise StartFailure(f"daemon failed in recovery (exit {code}): {exc}; "
                                       f"log {daemon.log_path}") from exc
                self.totals.crashes_in_recovery += 1  # its crash point came during recovery
        raise StartFailure("daemon kept dying in recovery")

    async def _check_and_redo(self, client: BookieClient) -> str:
        torn = await self._check_replay_report(client)
        live = [led.ledger_id for led in self.active + self.retired]
        sample = self.deleted[-8:] + self.rng.sample(self.deleted, min(8, len(self.deleted)))
        result = await checker.check(client, self.model,
                                     live + sorted({led.ledger_id for led in sample}))
        for violation in result.violations:
            self._violation(violation)
        redone = 0
        for ledger in list(self.active + self.retired):
            redone += await self._redo(client, ledger)
        self.totals.redone += redone
        await self._delete_oldest_retired(client)
        self._settle_lists()
        return f"checked={result.entries_checked} redo={redone} torn={torn}"

    async def _delete_oldest_retired(self, client: BookieClient) -> None:
        """Keep the checked set bounded: the oldest live retired ledgers are deleted."""
        live = [led for led in self.retired if not led.deleted]
        for ledger in live[:max(0, len(live) - RETIRED_LIVE_MAX)]:
            try:
                await checker.delete(client, ledger)  # again, if an earlier one was in doubt
            except NoLedger:
                if not ledger.delete_sent:
                    raise
                ledger.deleted = True  # the earlier, unacknowledged delete took effect

    async def _redo(self, client: BookieClient, ledger: LedgerModel) -> int:
        if ledger.deleted:
            return 0
        try:
            return await checker.re_add_in_doubt(client, ledger)
        except NoLedger:
            if not ledger.delete_sent:
                self._violation(Violation("lost", ledger.ledger_id, "recovery add: 404"))
            ledger.deleted = True
            return 0
        except BookieError as exc:
            self._violation(Violation("redo", ledger.ledger_id, f"recovery add of an "
                                      f"in-doubt entry answered {exc.code}: {exc}"))
            return 0

    async def _check_replay_report(self, client: BookieClient) -> int:
        """Every cut tail is listed with a saved copy of exactly its bytes (§1.4)."""
        replay = (await client.info())["replay"] or {}
        for conflict in replay.get("conflicts", []):
            self._violation(Violation("conflict", 0, conflict))
        for dropped in replay.get("dropped", []):
            saved = dropped.get("saved_as")
            if saved is None:
                continue  # a dropped record (digest mismatch) inside the replayed region
            if not os.path.exists(saved) or os.path.getsize(saved) != dropped["bytes"]:
                self._violation(Violation("torn", 0, f"cut tail {dropped} not saved aside "
                                                     f"as listed"))
        return len(replay.get("dropped", []))

    def _settle_lists(self) -> None:
        for ledger in list(self.active):
            if ledger.deleted or ledger.fence_sent:
                self.active.remove(ledger)
                (self.deleted if ledger.deleted else self.retired).append(ledger)
        for ledger in list(self.retired):
            if ledger.deleted:
                self.retired.remove(ledger)
                self.deleted.append(ledger)
        while len(self.active) < WRITERS:
            self.active.append(self.model.new_ledger())

    def _violation(self, violation: Violation) -> None:
        self.totals.violations.append(violation)
        print(f"  VIOLATION {violation}", flush=True)

    # -- load -----------------------------------------------------------------------------

    async def _load_until_killed(self, writers: list, client: BookieClient, daemon: Daemon,
                                 plan: tuple) -> bool:
        """Writers (each on one of ``writers``: HTTP, or BookKeeper's protocol) and chaos
        until the daemon dies; True if it died by itself (crash_at)."""
        stop = asyncio.Event()
        tasks = [asyncio.create_task(self._writer(writers[index % len(writers)], index, stop,
                                                  random.Random(self.rng.random())))
                 for index in range(len(self.active))]
        tasks.append(asyncio.create_task(self._chaos(client, stop,
                                                     random.Random(self.rng.random()))))
        died_by_itself = await self._kill(daemon, plan)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        return died_by_itself

    async def _kill(self, daemon: Daemon, plan: tuple) -> bool:
        deadline = time.monotonic() + (plan[1] if plan[0] == "timer" else 1.0)
        while time.monotonic() < deadline:
            if daemon.proc.poll() is not None:
                return True
            await asyncio.sleep(0.005)  # the kill moment is the drill's randomness
        daemon.kill9()
        return False

    async def _writer(self, client, index: int, stop: asyncio.Event,
                      rng: random.Random) -> None:
        while not stop.is_set():
            ledger = self.active[index]
            if ledger.fence_sent or ledger.delete_sent or ledger.next_entry > 300:
                self.retired.append(ledger)
                ledger = self.active[index] = self.model.new_ledger()
            try:
                await self._writer_op(client, ledger, rng)
            except CONNECTION_ERRORS:
                return  # the daemon died: whatever was in flight is in doubt
            except (Fenced, NoLedger):
                if not (ledger.fence_sent or ledger.delete_sent):
                    raise
            except TooManyRequests:
                await asyncio.sleep(0.01)
            except BookieError as exc:
                self._violation(Violation("unexpected", ledger.ledger_id,
                                          f"{exc.code} during load: {exc}"))
                return

    async def _writer_op(self, client, ledger: LedgerModel, rng: random.Random) -> None:
        await WRITER_MIX.run(client, ledger, rng)

    async def _chaos(self, client, stop: asyncio.Event, rng: random.Random) -> None:
        """Operations beside the writers: fences of written ledgers, deletes, checkpoints."""
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(0.005, 0.05))
            try:
                await self._chaos_op(client, rng)
            except CONNECTION_ERRORS:
                return
            except (Unavailable, Fenced, NoLedger):
                pass
            except BookieError as exc:
                self._violation(Violation("unexpected", 0, f"{exc.code} during load: {exc}"))
                return

    async def _chaos_op(self, client, rng: random.Random) -> None:
        choice = rng.random()
        live_retired = [led for led in self.retired if not led.delete_sent]
        if choice < 0.25 and len(live_retired) > RETIRED_LIVE_MAX // 2:
            await checker.delete(client, live_retired[0])
        elif choice < 0.30 and self.active:
            await checker.fence(client, rng.choice(self.active))  # recovery fences a writer
        elif choice < 0.50:
            await client.checkpoint()
        elif choice < 0.52 and self.args.gc:
            await client._request("POST", "/v1/bookie/gc", admin=True)
        elif live_retired:
            await checker.read_lac(client, rng.choice(live_retired))

    # -- the end ----------------------------------------------------------------------------

    async def final_check(self) -> str:
        """A plain restart, the full check, and a clean SIGTERM stop (exit 0)."""
        daemon = self._daemon(None).start(timeout_s=120)
        try:
            async with BookieClient(daemon.url) as client:
                await self._check_replay_report(client)
                result = await checker.check(client, self.model)
            for violation in result.violations:
                self._violation(violation)
        finally:
            code = daemon.terminate()
        if code != 0:
            self._violation(Violation("exit", 0, f"SIGTERM stop exited {code}"))
        return f"final check: {result.entries_checked} entries in {result.ledgers_checked} " \
               f"ledgers, clean stop exit {code}"


def _exited_soon(daemon: Daemon) -> bool:
    """Whether the daemon is exiting: a SIGKILLed process resets its sockets a moment before
    waitpid reports it, so a connection error alone cannot tell a crash from a hang."""
    try:
        daemon.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def summary(drill: Drill, seconds: float) -> str:
    kinds: dict[str, int] = {}
    for violation in drill.totals.violations:
        kinds[violation.kind] = kinds.get(violation.kind, 0) + 1
    t = drill.totals
    fenced = sum(1 for led in drill.model.ledgers.values() if led.fenced)
    return (f"rounds={t.rounds} acked={drill.model.acked_count} lost={kinds.get('lost', 0)} "
            f"phantom={kinds.get('phantom', 0)} violations={len(t.violations)} "
            f"kills_timer={t.kills_timer} kills_crash={t.kills_crash} "
            f"crashes_in_recovery={t.crashes_in_recovery} redone={t.redone} "
            f"fenced={fenced} deleted={len(drill.deleted)} ledgers={len(drill.model.ledgers)} "
            + (f"bk_protocol_ok={t.bk_calls} " if drill.args.protocol == "mixed" else "")
            + f"seconds={seconds:.0f} seed={drill.args.seed}")


async def run(args: argparse.Namespace, data_dir: str) -> int:
    drill = Drill(args, data_dir)
    started = time.monotonic()
    drill._settle_lists()
    print(f"kill -9 drill: seed={args.seed} data dir {data_dir}"
          + (f" ledger dirs {args.dirs[0]}, journal dirs {args.dirs[1]}" if args.dirs else ""),
          flush=True)
    number = 0
    try:
        while number < args.rounds and time.monotonic() - started < args.seconds:
            number += 1
            print(await drill.round(number), flush=True)
            if drill.totals.violations and not args.keep_going:
                break
        print(await drill.final_check(), flush=True)
    except StartFailure as exc:
        drill._violation(Violation("start", 0, str(exc)))
    print(summary(drill, time.monotonic() - started), flush=True)
    return 1 if drill.totals.violations else 0


def dir_flags(data_dir: str, args: argparse.Namespace) -> tuple[str, ...]:
    """``--dirs L,J``: L ledger dirs and J journal dirs, as D/d<i>/ledgers and D/d<i>/journal
    (one "disk" d<i> each; the crash targets' globs still match them)."""
    if args.dirs is None:
        return ()
    ledger_dirs, journal_dirs = dir_lists(data_dir, *args.dirs)
    return ("--ledger-dirs", ledger_dirs, "--journal-dirs", journal_dirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--data-dir", help="where to put the bookie's data (default: a temp "
                        "dir, removed after a run without violations)")
    parser.add_argument("--no-gc", dest="gc", action="store_false",
                        help="never call POST /v1/bookie/gc during load")
    parser.add_argument("--protocol", choices=("http", "mixed"), default="http",
                        help="mixed: the daemon also listens on BookKeeper's protocol "
                             "(bookie_port) and every other writer adds, fences, forces and "
                             "writes LACs over it (v3), the rest over HTTP")
    parser.add_argument("--keep-going", action="store_true",
                        help="run every round even after a violation")
    parser.add_argument("--dirs", type=parse_dirs, metavar="L,J",
                        help="run the bookie with L ledger dirs and J journal dirs "
                             "(ledger_dirs, journal_dirs), e.g. 3,2")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    base = args.data_dir or tempfile.mkdtemp(prefix="drill-kill9-")
    code = 1
    try:
        code = asyncio.run(run(args, os.path.join(base, "data")))
    finally:
        if code == 0 and args.data_dir is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"data dir kept: {base} (re-run with --seed {args.seed})", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
