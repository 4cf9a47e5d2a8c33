"""The replica check (BookKeeper's Auditor replicas check, docs/cluster.md §4): for every
ledger in metadata, ask each live bookie of each closed fragment which entries it holds
(``GET /v1/ledgers/{L}/entry-ids``) and mark the ledgers with missing copies, whatever lost
them (a bookie that lost an entry log, a disk replaced under a kept cookie, a bad GC).

The open last segment of an unclosed ledger is not checked: its writer is still placing
entries there. A bookie that does not answer is skipped: it is gone or slow, and the
auditor's lost-bookie check covers the gone ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from api.client.ensemble import BOOKIE_FAILURES, BookKeeper
from api.client.fragments import fragments, missing_entries
from api.client.metadata import LedgerMetadata
from bookie.errors import BookieError, NoLedger

log = logging.getLogger("api.cluster.autorecovery")
CONCURRENCY = 16


@dataclasses.dataclass
class CheckResult:
    ledgers: int = 0
    missing: dict = dataclasses.field(default_factory=dict)  # ledger -> {bookie: [ids]}
    unanswered: set = dataclasses.field(default_factory=set)  # bookies that did not answer
    seconds: float = 0.0


async def check_ledger(bk: BookKeeper, metadata: LedgerMetadata, alive: set[str],
                       result: CheckResult) -> dict[str, list[int]]:
    """{bookie: missing entry ids} over the ledger's closed fragments on live bookies."""
    held: dict[str, list | None] = {}
    missing: dict[str, list[int]] = {}
    for fragment in fragments(metadata):
        bookie_id = fragment.bookie_id
        if fragment.last is None or bookie_id not in alive or fragment.last < fragment.first:
            continue
        if bookie_id not in held:
            held[bookie_id] = await _held(bk, bookie_id, metadata.ledger_id, result)
        if held[bookie_id] is None:
            continue
        lacking = missing_entries(fragment, held[bookie_id], metadata.ensemble_size,
                                  metadata.write_quorum)
        if lacking:
            missing.setdefault(bookie_id, []).extend(lacking)
    return missing


async def _held(bk: BookKeeper, bookie_id: str, ledger_id: int, result: CheckResult):
    try:
        return await asyncio.wait_for(bk.client(bookie_id).entry_id_ranges(ledger_id),
                                      bk.read_timeout_s)
    except NoLedger:
        return []  # it holds nothing of the ledger
    except (BookieError, *BOOKIE_FAILURES) as exc:
        log.warning("replica check: bookie %s did not say what it holds of ledger %d: %s",
                    bookie_id, ledger_id, exc)
        result.unanswered.add(bookie_id)
        return None


async def check_ledgers(bk: BookKeeper, ledger_ids, alive: set[str], mark=None,
                        concurrency: int = CONCURRENCY) -> CheckResult:
    """Check ``ledger_ids``; ``mark(ledger_id, bookies)`` (a coroutine function) for each
    ledger found missing copies. Deleted meanwhile: skipped."""
    result = CheckResult()
    started = time.monotonic()
    gate = asyncio.Semaphore(concurrency)

    async def one(ledger_id: int) -> None:
        async with gate:
            try:
                metadata = await bk.store.read(ledger_id)
            except NoLedger:
                return
            result.ledgers += 1
            missing = await check_ledger(bk, metadata, alive, result)
            if missing:
                result.missing[ledger_id] = missing
                if mark is not None:
                    await mark(ledger_id, sorted(missing))
    await asyncio.gather(*(one(i) for i in ledger_ids))
    result.seconds = time.monotonic() - started
    return result
