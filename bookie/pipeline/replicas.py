"""The replica check as a Spark job (docs/pipeline.md "Jobs"; the auditor's own check:
docs/cluster.md §4): ``python -m bookie.pipeline replicas --metadata-service-uri
zk://HOST:PORT/ledgers``, for clusters with millions of ledgers.

The driver lists the ledger tree's second-level znodes (BookKeeper's hierarchical layout:
each one a slice of 10^4 ledger ids) and who is alive; each Spark task takes a share of the
slices, walks them, reads each ledger's metadata and asks every live bookie of every closed
fragment which entries it holds (``api/cluster/autorecovery/replica_check.py``, the auditor's own
check), and marks the ledgers that miss copies in BookKeeper's ``underreplication`` layout
(unless ``--dry-run``). Rows come back only for missing copies, so the driver holds little.

A TLS cluster or one with ZooKeeper ACLs (docs/operations.md §6, §7): the driver's
``BOOKIE_TLS_TRUST_FILE``, ``BOOKIE_TLS_CLIENT_CERT_FILE``, ``BOOKIE_TLS_CLIENT_KEY_FILE``,
``BOOKIE_ZK_DIGEST_FILE`` and ``BOOKIE_ZK_SASL_FILE`` go to every task (paths: the files must
be readable where the executors run); a password itself (``BOOKIE_ZK_DIGEST``,
``BOOKIE_ZK_SASL``) is never shipped in a task.
"""

from __future__ import annotations

import asyncio
import os
import time

from pyspark.sql import SparkSession

from api.client.ensemble import BookKeeper
from api.client.zk_auth import DIGEST_FILE_ENV, SASL_FILE_ENV
from api.client.zookeeper import ZkMetadataStore, alive_bookies
from api.cluster.autorecovery.replica_check import check_ledgers
from api.cluster.underreplication import Underreplication
from api.tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, TRUST_ENV
from bookie.pipeline.jobs import JobResult

#: Environment a task needs to reach a secured cluster: file paths only, never a secret.
CARRIED_ENV = (TRUST_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV, DIGEST_FILE_ENV, SASL_FILE_ENV)

MISSING_SHOWN = 10


def check_slices(uri: str, alive: list[str], mark: bool, slices,
                 carried: dict | None = None) -> list[dict]:
    """One task: every ledger of ``slices``; a row per (ledger, bookie) missing copies and
    one count row. ``carried``: the driver's CARRIED_ENV, set here before connecting."""
    os.environ.update(carried or {})

    async def run() -> list[dict]:
        async with await BookKeeper.connect(uri) as bk:
            ids: list[int] = []
            for parts in slices:
                ids.extend(await asyncio.to_thread(bk.store.ledger_ids_below, parts))
            ur = Underreplication(bk.store.client, bk.store.root)

            async def marker(ledger_id: int, bookies) -> None:
                await asyncio.to_thread(ur.mark, ledger_id, bookies)
            result = await check_ledgers(bk, ids, set(alive), marker if mark else None)
        rows = [{"type": "missing", "ledgerId": ledger_id, "bookieId": bookie_id,
                 "missing": len(entries), "firstMissing": entries[:MISSING_SHOWN]}
                for ledger_id, by_bookie in sorted(result.missing.items())
                for bookie_id, entries in sorted(by_bookie.items())]
        rows.append({"type": "count", "ledgers": result.ledgers,
                     "unanswered": sorted(result.unanswered)})
        return rows
    return asyncio.run(run())


def run_replicas(spark: SparkSession, uri: str, mark: bool = True,
                 tasks: int | None = None) -> JobResult:
    started = time.monotonic()
    store = ZkMetadataStore(uri).start()
    try:
        slices = store.slices()
        alive = sorted(alive_bookies(store.client, store.root))
    finally:
        store._stop()
    context = spark.sparkContext
    partitions = max(1, min(len(slices), tasks or context.defaultParallelism * 4))
    carried = {name: os.environ[name] for name in CARRIED_ENV if os.environ.get(name)}
    rows = (context.parallelize(slices, partitions)
            .mapPartitions(lambda part: check_slices(uri, alive, mark, list(part), carried))
            .collect()) if slices else []
    missing = [row for row in rows if row["type"] == "missing"]
    ledgers = sum(row["ledgers"] for row in rows if row["type"] == "count")
    unanswered = sorted({b for row in rows if row["type"] == "count"
                         for b in row["unanswered"]})
    elapsed = time.monotonic() - started
    damaged = sorted({row["ledgerId"] for row in missing})
    return JobResult("replicas", len(damaged), {
        "ledgers": ledgers, "slices": len(slices), "tasks": partitions,
        "liveBookies": len(alive), "ledgersMissingCopies": len(damaged),
        "marked": len(damaged) if mark else 0, "unansweredBookies": unanswered,
        "ledgersPerSecond": round(ledgers / max(elapsed, 1e-9), 1)},
        [{k: v for k, v in row.items() if k != "type"} for row in missing])
