"""The JSON of ``GET /v1/bookie/info`` (docs/http-api.md): shaped here, from the node's plain data."""

from __future__ import annotations

from bookie import __version__
from bookie.node import Bookie


def bookie_info(bookie: Bookie) -> dict:
    journal = bookie.journal
    mark = bookie.persisted_mark
    return {
        "version": __version__,
        "state": bookie.state.value,
        "readOnlyReasons": sorted(bookie.readonly_reasons),
        "failure": bookie.failure,
        "dirs": {"journal": bookie.config.journal_dir, "ledgers": bookie.config.ledger_dir,
                 "journalDirs": list(bookie.config.journal_dirs_current),
                 "ledgerDirs": list(bookie.config.ledger_dirs_current),
                 "indexDirs": list(bookie.config.index_dirs_current)},
        "freeBytes": bookie.free_bytes(),
        "currentJournalId": journal.current_journal_id if journal else None,
        "currentEntryLogId": bookie.storage.entry_logger.current_log_id,
        "lastMark": [mark.journal_id, mark.offset] if mark else None,
        "lastMarks": [[m.journal_id, m.offset] for m in bookie.persisted_marks],
        "currentJournalIds": [j.current_journal_id for j in bookie.journals],
        "ledgersByDir": bookie.storage.placement.counts(),
        "replay": bookie.replay_report.to_json() if bookie.replay_report else None,
        "instanceId": (bookie.identity or {}).get("instanceId"),
        "disks": {name: {"path": u.path, "totalBytes": u.total_bytes,
                         "freeBytes": u.free_bytes, "level": u.level.value}
                  for name, u in bookie.disk_monitor.usage.items()},
        "lastCheckpoint": checkpoint_json(bookie.last_checkpoint),
        "lastGc": bookie.last_gc.to_json() if bookie.last_gc else None,
        "registered": bookie.registration is not None,
        "registration": bookie.registration,
    }


def checkpoint_json(result) -> dict | None:
    if result is None:
        return None
    return {"lastMark": [result.mark.journal_id, result.mark.offset], "entries": result.entries,
            "bytes": result.bytes, "journalsDeleted": list(result.journals_deleted),
            "phaseSeconds": {k: round(v, 6) for k, v in result.phase_s.items()}}
