"""The auditor's placement check (BookKeeper's AuditorPlacementPolicyCheckTask,
docs/cluster.md §6): every ``placement_check_interval_s``, grade every segment of every
closed ledger by the placement policy and mark the ledgers with a failing segment
under-replicated, for the workers to repair (api/cluster/autorecovery/placement_repair.py).

Invariants:
    PC1. Only closed ledgers are graded, as BookKeeper's task does: an open one's writer may
         still change its ensemble, and its placement is the writer's (a later check sees it
         closed).
    PC2. The check writes nothing but markers, and a marker only grows (UR1): the copies
         stay where they are until a worker has copied them elsewhere (PR1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from api.client.fragments import referenced_bookies
from api.client.placement import FAIL, MEETS_SOFT
from bookie.errors import NoLedger

log = logging.getLogger("api.cluster.autorecovery")
CONCURRENCY = 16


@dataclasses.dataclass
class PlacementReport:
    """The last check's counts: BookKeeper's auditor gauges of the same names."""
    ledgers: int = 0  # closed ledgers graded (numOfClosedLedgersAuditedInPlacementPolicyCheck)
    not_adhering: int = 0  # a segment FAILs (ledgersNotAdheringToPlacementPolicy)
    softly_adhering: int = 0  # a segment MEETS_SOFT, none FAILs
    marked: int = 0  # markers this check wrote
    seconds: float = 0.0
    not_adhering_ids: list = dataclasses.field(default_factory=list)


async def check_placement(bk, ledger_ids, mark=None) -> PlacementReport:
    """Grade ``ledger_ids``; ``mark(ledger_id)`` (a coroutine function returning whether it
    wrote a marker) for each not adhering."""
    report = PlacementReport()
    started = time.monotonic()
    gate = asyncio.Semaphore(CONCURRENCY)
    closed = []

    async def read(ledger_id: int) -> None:
        async with gate:
            try:
                metadata = await bk.store.read(ledger_id)
            except NoLedger:
                return  # deleted meanwhile
            if metadata.closed:  # PC1
                closed.append(metadata)
    await asyncio.gather(*(read(i) for i in ledger_ids))
    named = set().union(*(referenced_bookies(m) for m in closed))
    where = await bk.locations(sorted(named))
    for metadata in sorted(closed, key=lambda m: m.ledger_id):
        report.ledgers += 1
        grades = {bk.placement.adherence(members, metadata.write_quorum, where)
                  for _, members in metadata.ensembles}
        if FAIL in grades:
            report.not_adhering += 1
            report.not_adhering_ids.append(metadata.ledger_id)
            if mark is not None and await mark(metadata.ledger_id):
                report.marked += 1
        elif MEETS_SOFT in grades:
            report.softly_adhering += 1
    report.seconds = time.monotonic() - started
    log.info("placement check: %d closed ledgers in %.1f s, %d not adhering to the %s "
             "policy (%d newly marked), %d softly adhering", report.ledgers, report.seconds,
             report.not_adhering, bk.placement.rules.policy, report.marked,
             report.softly_adhering)
    return report
