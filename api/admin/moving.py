"""Moving a bookie's copies elsewhere in the background, for BookKeeper's
autorecovery/bookie (recoverBookieData) and autorecovery/decommission, which answer 200 as
soon as the work is handed off. The work is `bookie shell decommission`'s
(bookie/shell/autorecovery_cmd.py): mark every ledger whose ensembles name the bookie
under-replicated, until none does (the replication workers copy the fragments and replace
the bookie in the metadata), then delete its cookie if asked.

Invariants:
    MV1. The cookie goes only once no ledger's metadata names the bookie: a bookie whose
         copies are still needed can still prove its dirs are its own (CK1).
    MV2. A decommission also marks the bookie ``decommissioning`` (api/cluster/
         underreplication.py) for its duration, so a live bookie's copies count as missing;
         a recovery does not: BookKeeper recovers a bookie that is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time

from api.client.ensemble import BookKeeper
from api.cluster.underreplication import Underreplication
from api.cluster.zookeeper import ZkCookies

log = logging.getLogger("bookie.admin")
POLL_S = 1.0
TIMEOUT_S = 24 * 3600.0


async def move_off(bk: BookKeeper, ur: Underreplication, bookie_id: str, *,
                   decommission: bool, delete_cookie: bool,
                   timeout_s: float = TIMEOUT_S) -> bool:
    """Whether every ledger moved off ``bookie_id`` within ``timeout_s`` (MV1, MV2)."""
    what = "decommission" if decommission else "recovery"
    if decommission:
        await asyncio.to_thread(ur.set_decommissioning, bookie_id, True)
    started = time.monotonic()
    try:
        while True:
            ledgers = await asyncio.to_thread(bk.store.ledgers_naming, bookie_id)
            for ledger_id in ledgers:
                await asyncio.to_thread(ur.mark, ledger_id, [bookie_id])
            if not ledgers:
                break
            if time.monotonic() - started > timeout_s:
                log.error("%s of %s: %d ledger(s) still name it after %.0f s", what,
                          bookie_id, len(ledgers), timeout_s)
                return False
            await asyncio.sleep(POLL_S)
        if delete_cookie:
            deleted = await asyncio.to_thread(
                ZkCookies(bk.store.client, bk.store.root).delete, bookie_id)
            log.info("%s of %s: cookie %s", what, bookie_id,
                     "deleted" if deleted else "was absent")
        log.info("%s of %s complete: no ledger names it", what, bookie_id)
        return True
    finally:
        if decommission:
            await asyncio.to_thread(ur.set_decommissioning, bookie_id, False)
