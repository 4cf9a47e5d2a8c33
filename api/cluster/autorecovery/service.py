"""AutoRecovery (BookKeeper's AutoRecoveryMain): a vote in the auditor election, the auditor
while elected, and one replication worker, on one ZooKeeper session of its own.

Runs inside every cluster bookie by default (``autorecovery_daemon_enabled``, as
BookKeeper's autoRecoveryDaemonEnabled) and on its own as ``bookie autorecovery``.

    service = AutoRecovery(uri, holder_id="127.0.0.1:3181", config=config)
    await service.start()     # votes; the worker and the election run as tasks
    ...
    await service.stop()      # withdraws the vote: another process's auditor takes over

Invariants:
    AR1. Exactly the holder of the lowest vote audits (UR4); when its process dies its
         ephemeral vote goes with its session and the next vote's holder, woken by its
         watch on the vote ahead, takes over (AU1 makes its marking complete).
    AR2. ``stop`` cancels the work before withdrawing the vote, so no auditor round runs
         after a successor may have started.
"""

from __future__ import annotations

import asyncio
import logging

from api.client.ensemble import BookKeeper
from api.tls import bookie_client_context
from api.cluster.autorecovery.auditor import Auditor
from api.cluster.autorecovery.throttle import Throttle
from api.cluster.autorecovery.worker import ReplicationWorker
from api.client.placement import COUNTS
from api.cluster.placement_config import placement_of
from api.cluster.underreplication import Underreplication

log = logging.getLogger("api.cluster.autorecovery")
ELECTION_RECHECK_S = 5.0


class AutoRecovery:
    def __init__(self, uri: str, holder_id: str, config, *, worker: bool = True,
                 auditor: bool = True) -> None:
        self.uri, self.holder_id, self.config = uri, holder_id, config
        self.with_worker, self.with_auditor = worker, auditor
        self.bk: BookKeeper | None = None
        self.ur: Underreplication | None = None
        self.worker: ReplicationWorker | None = None
        self.auditor: Auditor | None = None
        self.elected = False
        self._tasks: list[asyncio.Task] = []

    #: PP3's counts (api/client/placement.py), for the bookie's /metrics.
    placement_counts = COUNTS

    async def start(self) -> "AutoRecovery":
        # A TLS cluster's worker verifies the other bookies and shows its own certificate.
        self.bk = await BookKeeper.connect(self.uri, tls=bookie_client_context(self.config),
                                           placement=placement_of(self.config))
        self.ur = Underreplication(self.bk.store.client, self.bk.store.root, self.holder_id)
        await asyncio.to_thread(self.ur.ensure)
        loop = asyncio.get_running_loop()
        if self.with_worker:
            self.worker = ReplicationWorker(
                self.bk, self.ur, self.config.open_ledger_rereplication_grace_period_s,
                Throttle(self.config.rereplication_rate_bytes), asyncio.Event(),
                repair_placement=self.config.placement_check_interval_s > 0)
            self._tasks.append(loop.create_task(self.worker.run(), name="autorecovery-worker"))
        if self.with_auditor:
            self._tasks.append(loop.create_task(self._elect(), name="autorecovery-election"))
        log.info("autorecovery %s started (worker %s, auditor election %s)", self.holder_id,
                 "on" if self.with_worker else "off", "on" if self.with_auditor else "off")
        return self

    async def _elect(self) -> None:
        loop = asyncio.get_running_loop()
        turn = asyncio.Event()

        def woken() -> None:  # kazoo's thread: the vote ahead of ours went
            loop.call_soon_threadsafe(turn.set)
        while True:
            turn.clear()
            try:
                self.elected = await asyncio.to_thread(self.ur.elected, woken)
            except Exception as exc:  # noqa: BLE001 - a lost session: vote again later
                log.warning("auditor election: %s", exc)
                self.elected = False
            if self.elected:
                log.info("%s is the auditor", self.holder_id)
                self.auditor = Auditor(self.bk, self.ur, self.config.lost_bookie_recovery_delay_s,
                                       self.config.replicas_check_interval_s, asyncio.Event(),
                                       self.config.placement_check_interval_s)
                try:
                    await self.auditor.run(self._still_elected)
                except Exception:  # noqa: BLE001 - logged; the election runs again
                    log.exception("auditor stopped")
                self.elected = False
                continue
            try:
                await asyncio.wait_for(turn.wait(), ELECTION_RECHECK_S)
            except asyncio.TimeoutError:
                pass

    async def _still_elected(self) -> bool:
        try:
            return await asyncio.to_thread(self.ur.elected, None, False)
        except Exception as exc:  # noqa: BLE001 - a lost session: not the auditor now
            log.warning("auditor election: %s", exc)
            return False

    async def stop(self) -> None:
        for task in self._tasks:  # AR2
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.ur is not None:
            try:
                await asyncio.to_thread(self.ur.withdraw)
            except Exception as exc:  # noqa: BLE001 - the session ends anyway
                log.warning("withdrawing the auditor vote: %s", exc)
        if self.bk is not None:
            await self.bk.close()
            self.bk = None


async def run_standalone(config, holder_id: str, ready_line, worker: bool = True) -> int:
    """``bookie autorecovery``: until SIGTERM/SIGINT; a ready line once voting and working."""
    import signal  # noqa: PLC0415

    if not config.metadata_service_uri:
        log.error("bookie autorecovery needs --metadata-service-uri zk://HOST:PORT/ledgers")
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    service = await AutoRecovery(config.metadata_service_uri, holder_id, config,
                                 worker=worker).start()
    print(f"autorecovery running as {holder_id} on {config.metadata_service_uri}",
          file=ready_line, flush=True)
    try:
        await stop.wait()
    finally:
        await service.stop()
    return 0
