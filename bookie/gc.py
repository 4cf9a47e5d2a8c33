"""Garbage collection: rolled entry logs whose every ledger is deleted give their space back.

BookKeeper's GarbageCollectorThread, first stage (compaction of partly live logs follows).
Runs on the checkpoint thread, so it never interleaves with a checkpoint (DESIGN.md §3.4).

Invariants:
    G1. Only a ledger with a tombstone (a synced delete) is dead. A ledger the index has no
        state for is treated as live: GC never deletes bytes it does not understand.
    G2. A log's ledgers come from its ledgersMap, or from a full scan where the trailer is
        missing or invalid: a missing or zero trailer means "scan", never "empty" (§1.9).
    G3. The active log is never collected.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from entrylog.reader import EntryLogReader

if TYPE_CHECKING:
    from bookie.storage import LedgerStorage

log = logging.getLogger("bookie.gc")


@dataclasses.dataclass
class GcResult:
    logs_scanned: int = 0
    logs_deleted: list[int] = dataclasses.field(default_factory=list)
    bytes_reclaimed: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"logsScanned": self.logs_scanned, "logsDeleted": self.logs_deleted,
                "bytesReclaimed": self.bytes_reclaimed, "problems": self.problems,
                "seconds": round(self.seconds, 6)}


class GarbageCollector:
    """Thread-safety: ``run`` on the checkpoint thread only."""

    def __init__(self, storage: "LedgerStorage") -> None:
        self.storage = storage

    def run(self) -> GcResult:
        started = time.monotonic()
        result = GcResult()
        logger = self.storage.entry_logger
        for log_id in logger.log_ids():
            if log_id == logger.current_log_id:  # G3
                continue
            result.logs_scanned += 1
            self._collect_log(log_id, result)
        result.seconds = time.monotonic() - started
        if result.logs_deleted:
            log.info("gc: deleted %d entry logs, %d bytes reclaimed", len(result.logs_deleted),
                     result.bytes_reclaimed)
        return result

    def _collect_log(self, log_id: int, result: GcResult) -> None:
        logger = self.storage.entry_logger
        path = logger.log_path(log_id)
        try:
            with EntryLogReader(self.storage.disk, path, log_id=log_id,
                                max_entry_size=self.storage.config.max_entry_size) as reader:
                totals, _source = reader.ledger_totals()  # G2
                size = reader.file_size()
        except Exception as exc:  # a corrupt log is reported and left alone
            result.problems.append(f"{path}: {exc}")
            log.error("gc: cannot read %s, leaving it: %s", path, exc)
            return
        if any(not self.storage.ledgers.is_deleted(ledger_id) for ledger_id in totals):
            return  # G1: something in it is (or may be) live
        logger.delete_log(log_id)
        result.logs_deleted.append(log_id)
        result.bytes_reclaimed += size
