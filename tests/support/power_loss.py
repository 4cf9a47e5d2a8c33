"""The power-loss sweep (crash model "power loss", docs/design.md §2.2), after SQLite's crash tests.

``sweep_seed(seed)`` runs one seeded workload through an in-process ``Bookie`` on a
``SimDisk`` once per crash point k = 1, 2, ...: the k-th sync (fsync, fdatasync, dir fsync) or
rename loses power instead of happening. Each time the disk comes back as
``SimDisk.after_power_loss`` makes it (unsynced writes kept, dropped, cut, garbled or zeroed;
unsynced directory changes forgotten), a new Bookie starts on it, and
``tests/support/checker.py`` checks every invariant against what the workload saw
acknowledged. The sweep ends with the first k the workload finishes without reaching; that
run loses power at the very end instead.

RocksDB is outside the Disk seam (it keeps its own files, on a real temp dir). Its writes on
the bookie's durable path are all ``sync=True`` (locations and ledger states at checkpoints,
tombstones on delete), so the sweep treats it as a disk that keeps every write it was given
(A3 for RocksDB's WAL) and keeps all of it across the simulated power loss. That is sound for
these invariants: every RocksDB write depends only on SimDisk syncs that completed before it
(R1: a location is written after its entry-log bytes are fsynced; a mark is persisted after
its checkpoint's index batch), and SimDisk syncs never fail silently, so a RocksDB write racing
the crash instant describes bytes that are durable either way. What the sweep cannot show is
RocksDB losing its own unsynced tail; the kill -9 drill and the checkpoint crash sweep cover
RocksDB's windows with the real thing. With ``fates`` > 1 the RocksDB dirs are copied at the
crash and restored before each of the several power-loss outcomes drawn for it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import os
import random
import shutil

from bookie.config import BookieConfig
from bookie.node import Bookie
from tests.support import checker
from tests.support.checker import InProcessApi, Model, Violation
from tests.support.dir_layout import dir_lists
from tests.support.sim_disk import SimDisk

#: Small rolls so a short workload crosses journal rolls, entry-log rolls and retention.
SETTINGS = dict(journal_max_bytes=64 * 1024, entrylog_max_bytes=6 * 1024,
                journal_prealloc_bytes=8 * 1024, journal_backups_count=1,
                checkpoint_interval_ms=3_600_000, disk_check_interval_ms=3_600_000)
K_MAX = 5000


@dataclasses.dataclass
class RunResult:
    seed: int
    crash_at: int
    event: str
    finished: bool
    acked: int
    violations: list[Violation]
    dropped: int = 0      # records and tails replay did not apply, all reported
    torn_saved: int = 0   # of them, cut tails found saved aside with exactly their bytes

    def line(self) -> str:
        state = "FAIL" if self.violations else "ok"
        return (f"seed={self.seed} k={self.crash_at} at {self.event}: acked={self.acked} "
                f"dropped={self.dropped} torn_saved={self.torn_saved} {state}")


@dataclasses.dataclass
class SeedResult:
    seed: int
    runs: list[RunResult]

    @property
    def violations(self) -> list[tuple[RunResult, Violation]]:
        return [(run, v) for run in self.runs for v in run.violations]


def config_for(data_dir: str, dirs: tuple[int, int] | None = None) -> BookieConfig:
    """``dirs`` (L, J): L ledger dirs and J journal dirs, D/d<i>/ledgers and D/d<i>/journal."""
    if dirs is None:
        return BookieConfig(data_dir=data_dir, port=0, **SETTINGS)
    ledger_dirs, journal_dirs = dir_lists(data_dir, *dirs)
    return BookieConfig(data_dir=data_dir, port=0, **SETTINGS, ledger_dirs=ledger_dirs,
                        journal_dirs=journal_dirs)


async def sweep_seed(seed: int, workdir: str, ops: int, fates: int = 1,
                     k_first: int = 1, k_last: int = K_MAX, progress=None,
                     fate: str | None = None, dirs: tuple[int, int] | None = None
                     ) -> SeedResult:
    """Run the workload of ``seed`` with a power loss at k = k_first.. until one finishes.
    ``fate`` forces one ``SimDisk`` write fate on every unsynced write instead of drawing."""
    runs = []
    for crash_at in range(k_first, k_last + 1):
        for run in await run_one(seed, crash_at, workdir, ops, fates, fate, dirs):
            runs.append(run)
            if progress is not None:
                progress(run)
        if runs[-1].finished:
            break
    return SeedResult(seed, runs)


async def run_one(seed: int, crash_at: int, workdir: str, ops: int,
                  fates: int = 1, fate: str | None = None,
                  dirs: tuple[int, int] | None = None) -> list[RunResult]:
    """One workload with power lost at the ``crash_at``-th event; one result per outcome."""
    root = os.path.join(workdir, f"seed{seed}-k{crash_at}")
    data_dir = os.path.join(root, "data")
    config = config_for(data_dir, dirs)
    for ledger_dir in config.ledger_dirs_current:
        os.makedirs(ledger_dir)  # the real dirs under which RocksDB keeps its files
    disk = SimDisk(root, crash_at=crash_at)
    model = Model()
    try:
        await _live(config, disk, model, random.Random(seed), ops)
        finished = not disk.reached_crash_point
        event = "the end" if finished else _short(disk.crashed_at, root)
        snapshot = _snapshot(config, root) if fates > 1 else None
        results = []
        for outcome_no in range(fates):
            if outcome_no:
                _restore(config, snapshot)
            image = disk.after_power_loss(seed * 7919 + crash_at * 104729 + outcome_no, fate)
            # check() learns from what it reads (a delete that took effect, a LAC seen):
            # each outcome starts from what the workload itself saw.
            outcome = await _after_power_loss(config, image, copy.deepcopy(model))
            results.append(RunResult(seed, crash_at, event, finished, model.acked_count,
                                     *outcome))
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _short(event, root: str) -> str:
    return f"#{event.number} {event.kind} {os.path.relpath(event.path, root)}"


async def _live(config: BookieConfig, disk: SimDisk, model: Model, rng: random.Random,
                ops: int) -> None:
    """Start a bookie, run the workload until it ends or the power goes, power off."""
    bookie = Bookie(config, disk=disk)
    try:
        await bookie.start()
    except Exception:  # noqa: BLE001 - lost power while starting: nothing was acknowledged
        await _power_off(bookie)
        return
    try:
        await workload(InProcessApi(bookie), model, rng, ops)
    finally:
        disk.crash_now()  # from here on nothing reaches the SimDisk
        await _power_off(bookie)


async def _power_off(bookie: Bookie) -> None:
    """Stop the threads of a bookie whose disk is off and release its RocksDB handles."""
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # its final checkpoint fails, as it must: no noise
    try:
        await bookie.close()
    except Exception:  # noqa: BLE001 - closing touches the dead disk; it may fail anyhow
        bookie._reads.shutdown(wait=True)
    finally:
        quiet.setLevel(level)
        bookie.storage.close_indexes()


async def _after_power_loss(config: BookieConfig, image: SimDisk,
                            model: Model) -> tuple[list[Violation], int, int]:
    bookie = Bookie(config, disk=image)
    try:
        await bookie.start()
    except Exception as exc:  # noqa: BLE001 - a refusal to start is itself the finding
        await _power_off(bookie)
        return [Violation("start", 0, f"refused to start after power loss: {exc}")], 0, 0
    try:
        result = await checker.check(InProcessApi(bookie), model)
        bad_tails, saved = check_cut_tails(bookie.replay_report, image)
        return result.violations + bad_tails, len(bookie.replay_report.dropped), saved
    finally:
        await bookie.close()


def check_cut_tails(report, disk) -> tuple[list[Violation], int]:
    """§1.4: every cut tail is listed and saved aside as <file>.torn-<offset>, holding
    exactly the bytes cut from the journal. Returns (violations, tails verified)."""
    found, saved = [], 0
    for dropped in report.dropped:
        if dropped.saved_as is None:
            continue  # a record dropped inside the replayed region (digest): reported only
        expected = f"{dropped.path}.torn-{dropped.offset}"
        if dropped.saved_as != expected or not disk.exists(expected) or \
                _read(disk, expected) != _read(disk, dropped.path)[
                    dropped.offset:dropped.offset + dropped.bytes]:
            found.append(Violation("torn", 0, f"cut tail not saved as listed: {dropped}"))
        else:
            saved += 1
    return found, saved


def _read(disk, path: str) -> bytes:
    handle = disk.open(path)
    try:
        return handle.read_at(0, handle.size())
    finally:
        handle.close()


def _snapshot(config: BookieConfig, root: str) -> str:
    target = os.path.join(root, "rocksdb-at-crash")
    for index, ledger_dir in enumerate(config.ledger_dirs_current):
        for name in ("locations", "ledgers"):
            source = os.path.join(ledger_dir, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(target, str(index), name))
    return target


def _restore(config: BookieConfig, snapshot: str) -> None:
    for index, ledger_dir in enumerate(config.ledger_dirs_current):
        for name in ("locations", "ledgers"):
            live = os.path.join(ledger_dir, name)
            shutil.rmtree(live, ignore_errors=True)
            if os.path.isdir(os.path.join(snapshot, str(index), name)):
                shutil.copytree(os.path.join(snapshot, str(index), name), live)


# -- the workload ---------------------------------------------------------------------------


async def workload(api: InProcessApi, model: Model, rng: random.Random, ops: int) -> None:
    """``ops`` seeded operations, mostly one at a time so the k-th event is (nearly) the same
    in every run of a seed; the first error ends it (the power is off, or a refusal)."""
    ledgers = [model.new_ledger() for _ in range(3)]
    for _ in range(ops):
        index = rng.randrange(len(ledgers))
        ledger = ledgers[index]
        try:
            retire = await _operation(api, model, ledger, ledgers, rng)
        except Exception:  # noqa: BLE001 - not acknowledged; the model recorded the attempt
            return
        if retire:
            ledgers[index] = model.new_ledger()


#: One operation per step; "other" races adds on every ledger against a checkpoint.
OPERATION_MIX = checker.OperationMix(
    (("add", 0.32), ("batch", 0.45), ("deferred", 0.54), ("write_lac", 0.60),
     ("read_lac", 0.64), ("fence", 0.68), ("delete", 0.71), ("checkpoint", 0.86)))


async def _operation(api, model: Model, ledger, ledgers, rng: random.Random) -> bool:
    """One operation; True when the ledger is done with (fenced or deleted)."""
    done = await OPERATION_MIX.run(api, ledger, rng)
    if done == "checkpoint":
        await api.checkpoint()
    elif done == "other":
        await _concurrently(api, ledgers, rng)
    return done in ("fence", "delete")


async def _concurrently(api, ledgers, rng: random.Random) -> None:
    """Adds on every ledger racing a checkpoint (the checkpoint's mark must cover only what
    its flush holds, W1)."""
    jobs = [checker.add(api, led, random.Random(rng.random())) for led in ledgers]
    jobs.append(api.checkpoint())
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
