"""Free-space thresholds with hysteresis (BookKeeper's LedgerDirsMonitor). Pure.

Each watched dir (journal and ledger) is classified from its used fraction:

      used >= full_ratio                       -> FULL   (the bookie goes read-only, "full")
      FULL before and used > low_water_ratio   -> FULL   (hysteresis: no flapping at the edge)
      used >= warn_ratio                       -> WARN   (logged; compaction is suspended)
      otherwise                                -> OK

The bookie is full while any dir is FULL. BookKeeper's defaults: diskUsageThreshold 0.95,
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
        return any(u.level is DiskLevel.FULL for u in self.usage.values())

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
