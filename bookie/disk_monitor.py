"""Free-space thresholds with hysteresis (BookKeeper's LedgerDirsMonitor). Pure.

Each watched dir (journal, ledger, and index when index_dirs puts one apart) is classified
from its used fraction:

      used >= full_ratio                       -> FULL   (the bookie goes read-only, "full")
      FULL before and used > low_water_ratio   -> FULL   (hysteresis: no flapping at the edge)
      used >= warn_ratio                       -> WARN   (logged; compaction is suspended)
      otherwise                                -> OK

The bookie is full while any journal dir is FULL or every ledger dir is, or it has index
dirs and every one is; a FULL ledger dir among writable ones only takes no new ledgers (PL2
in bookie/storage_routes.py), as BookKeeper's LedgerDirsManager turns the bookie read-only
only when no ledger dir is writable (and its indexDirsManager, with the same thresholds,
when no index dir is). A FULL index dir takes its ledger dir out of PL2's choice too, and the
bookie is full when every ledger dir is out so (BookKeeper keeps filling a full index disk
until every index disk is). BookKeeper's defaults: diskUsageThreshold 0.95,
diskUsageWarnThreshold 0.90, diskUsageLwmThreshold 0.90.
"""

from __future__ import annotations

import dataclasses
import enum
import os


class DiskLevel(enum.Enum):
    OK = "ok"
    WARN = "warn"
    FULL = "full"


@dataclasses.dataclass(frozen=True)
class DiskPolicy:
    warn_ratio: float = 0.90
    full_ratio: float = 0.95
    low_water_ratio: float = 0.90

    def __post_init__(self) -> None:
        assert 0 < self.low_water_ratio <= self.full_ratio <= 1.0
        assert 0 < self.warn_ratio <= self.full_ratio


JOURNAL, LEDGERS, INDEX = "journal", "ledgers", "index"


def watched_dirs(journal_dirs, ledger_dirs, index_dirs=()) -> dict[str, str]:
    """name -> path: ``journal`` and ``ledgers`` for the first of each (the names the
    metrics have always had), ``journal.1``, ``ledgers.2``... for the others; ``index``,
    ``index.2``... for ledger dir i's index dir where it is not the ledger dir itself."""
    named = {}
    for kind, dirs in ((JOURNAL, journal_dirs), (LEDGERS, ledger_dirs)):
        for index, path in enumerate(dirs):
            named[kind if index == 0 else f"{kind}.{index}"] = path
    for index, (path, ledger) in enumerate(zip(index_dirs, ledger_dirs)):
        if os.path.realpath(path) != os.path.realpath(ledger):
            named[INDEX if index == 0 else f"{INDEX}.{index}"] = path
    return named


def _place(name: str) -> tuple[str, int]:
    kind, _, index = name.partition(".")
    return kind, int(index or 0)


def classify(policy: DiskPolicy, used_ratio: float, was_full: bool) -> DiskLevel:
    if used_ratio >= policy.full_ratio:
        return DiskLevel.FULL
    if was_full and used_ratio > policy.low_water_ratio:
        return DiskLevel.FULL
    if used_ratio >= policy.warn_ratio:
        return DiskLevel.WARN
    return DiskLevel.OK


@dataclasses.dataclass
class DirUsage:
    path: str
    total_bytes: int
    free_bytes: int
    level: DiskLevel

    @property
    def used_ratio(self) -> float:
        return 1.0 - self.free_bytes / self.total_bytes if self.total_bytes else 1.0


class DiskMonitor:
    """Remembers each dir's last level so ``poll`` can apply the hysteresis."""

    def __init__(self, policy: DiskPolicy, paths: dict[str, str]) -> None:
        self.policy = policy
        self.paths = paths
        self.usage: dict[str, DirUsage] = {}

    def poll(self, usage_of) -> bool:
        """Refresh every dir with ``usage_of(path) -> (total, free)``; True if any is full."""
        for name, path in self.paths.items():
            total, free = usage_of(path)
            was_full = name in self.usage and self.usage[name].level is DiskLevel.FULL
            used = 1.0 - free / total if total else 1.0
            self.usage[name] = DirUsage(path, total, free, classify(self.policy, used, was_full))
        return self.full

    @property
    def full(self) -> bool:
        """Any journal dir full, or every ledger dir out (see the module docstring)."""
        journals = [u for n, u in self.usage.items() if _place(n)[0] == JOURNAL]
        ledgers = {_place(n)[1] for n in self.usage if _place(n)[0] == LEDGERS}
        return any(u.level is DiskLevel.FULL for u in journals) or \
            (bool(ledgers) and ledgers <= self.full_ledger_dirs())

    def full_ledger_dirs(self) -> set[int]:
        """Indexes of the ledger dirs that are FULL, or whose index dir is (PL2: they take
        no new ledgers)."""
        return self._ledger_dirs_at({DiskLevel.FULL})

    def warn_ledger_dirs(self) -> set[int]:
        """Indexes of the ledger dirs over the warn threshold (or full), or whose index dir
        is: bookie/gc.py G6 pauses compaction in these only, as BookKeeper's per-dir
        listener does."""
        return self._ledger_dirs_at({DiskLevel.WARN, DiskLevel.FULL})

    def _ledger_dirs_at(self, levels: set) -> set[int]:
        return {_place(name)[1] for name, u in self.usage.items()
                if _place(name)[0] in (LEDGERS, INDEX) and u.level in levels}

    @property
    def warn(self) -> bool:
        return any(u.level is not DiskLevel.OK for u in self.usage.values())

    def min_free_bytes(self) -> int | None:
        return min((u.free_bytes for u in self.usage.values()), default=None)


def files_bytes(directory: str, suffix: str) -> int:
    """Bytes held by the files of ``directory`` ending in ``suffix`` (journals, entry logs),
    as allocated on disk: a preallocated journal counts its zero-filled chunk, sparse holes
    do not. 0 for a missing directory. One scandir and a stat per file."""
    total = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
    except FileNotFoundError:
        return 0
    return total
