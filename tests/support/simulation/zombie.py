"""A zombie writer (plan.zombie): the writer process is paused (SIGSTOP), not killed, while
recovery fences and closes its ledger; then it resumes and appends again.

Invariants:
    ZW1. A paused process sends and takes nothing: its bookie requests and replies wait
         (network.py NW1) and so do its metadata calls (``GatedStore``). Its timers still
         run, which is SIGCONT's effect: every timeout that fell due while it was stopped
         fires as soon as it runs again.
    ZW2. Everything it appends after resuming (and every append of before that was held
         by the pause) is acknowledged through the checker, so S2 reports any entry
         acknowledged past a close: the fence (W8 ``check_fence``, W7's fenced revive)
         must refuse it on enough bookies.
"""

from __future__ import annotations

import asyncio

from tests.support.simulation.clients import CLIENT_ERRORS


class GatedStore:
    """ZW1: a client process's view of the metadata store, held while it is paused."""

    def __init__(self, store, net, client: str) -> None:
        self.store, self.net, self.client = store, net, client

    async def _call(self, method: str, *args):
        await self.net.client_runs(self.client)
        result = await getattr(self.store, method)(*args)
        await self.net.client_runs(self.client)
        return result

    async def create(self, metadata):
        return await self._call("create", metadata)

    async def read(self, ledger_id: int):
        return await self._call("read", ledger_id)

    async def write(self, metadata):
        return await self._call("write", metadata)

    async def delete(self, ledger_id: int, version: int) -> None:
        await self._call("delete", ledger_id, version)

    async def ledger_ids(self) -> list[int]:
        return await self._call("ledger_ids")

    async def close(self) -> None:
        pass


class Zombie:
    """The pause and the resumption of the run's writer (scenario.py's ``_Run``)."""

    def __init__(self, run) -> None:
        self.run = run
        self.paused = False
        self.refused = 0  # appends after resuming that were refused (what ZW2 wants)

    def pause(self) -> None:
        self.paused = True
        self.run.net.pause_client("writer")
        self.run.trace("writer: PAUSED (a zombie: not killed)")

    async def resume(self, driver) -> None:
        """ZW2: resume, append ``zombie_adds`` more, then the process ends."""
        run = self.run
        if not self.paused:
            return
        self.paused = False
        run.trace("writer: RESUMED (the zombie appends again)")
        run.net.resume_client("writer")
        await run.processes.spawn("writer", self._appends())
        if driver is not None:
            await asyncio.wait([driver], timeout=10.0)
        run.processes.kill("writer")

    async def _appends(self) -> None:
        run = self.run
        for i in range(run.plan.zombie_adds):
            payload = f"seed{run.plan.seed}-zombie{i}-".encode()
            try:
                entry_id = await asyncio.wait_for(run.writer.append(payload), 5.0)
            except CLIENT_ERRORS as exc:
                self.refused += 1
                run.trace(f"writer: zombie append #{i} refused: {type(exc).__name__}")
                continue
            run.checker.ack(entry_id, payload)  # ZW2: S2 if past a close
