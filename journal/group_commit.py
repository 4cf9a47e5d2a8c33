"""When the journal thread writes and syncs its pending group: one pure function (docs/design.md §3.2).

Apache BookKeeper spreads these triggers through ``Journal.run()``; here they are one function,
tested without threads or disks. The reason feeds ``bookie_journal_flush_total{reason}``.

Defaults: 2 ms (``journalMaxGroupWaitMSec``), 512 KiB (``journalBufferedWritesThreshold``),
no entry-count limit, and flush when the queue is empty, unlike Apache BookKeeper: with one
journal thread, records that arrive during an fdatasync already form the next group, so
waiting longer only delays a lone client.
"""

from __future__ import annotations

import dataclasses
import enum


class FlushReason(enum.Enum):
    MAX_WAIT = "max_wait"
    MAX_BYTES = "max_bytes"
    MAX_ENTRIES = "max_entries"
    QUEUE_EMPTY = "queue_empty"
    SHUTDOWN = "shutdown"  # close() drains the queue whatever the policy says


@dataclasses.dataclass(frozen=True)
class GroupCommitPolicy:
    group_wait_ms_max: float = 2.0
    group_bytes_max: int = 512 * 1024
    group_entries_max: int = 0  # 0: no limit
    flush_when_queue_empty: bool = True


def should_flush(policy: GroupCommitPolicy, oldest_wait_ms: float, pending_bytes: int,
                 pending_count: int, queue_empty: bool) -> FlushReason | None:
    """Why the pending group must be written and synced now; None means keep gathering."""
    if pending_count == 0:
        return None
    if oldest_wait_ms >= policy.group_wait_ms_max:
        return FlushReason.MAX_WAIT
    if pending_bytes >= policy.group_bytes_max:
        return FlushReason.MAX_BYTES
    if policy.group_entries_max and pending_count >= policy.group_entries_max:
        return FlushReason.MAX_ENTRIES
    if queue_empty and policy.flush_when_queue_empty:
        return FlushReason.QUEUE_EMPTY
    return None
