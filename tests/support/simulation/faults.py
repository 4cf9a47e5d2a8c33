"""Striking and healing a plan's faults on the SimNetwork, on virtual time.

Invariants:
    FI1. Faults nest: a bookie paused twice resumes only when both pauses are healed (and
         likewise for crashes and partitions), so overlapping faults of a plan compose.
    FI2. ``heal_all`` leaves every bookie running, up and reachable, the metadata store
         answering (no zk-hang, no zk-uncertain), and stops message drops: the run's end is
         checked
         in a healed cluster, where nothing was lost (crashes keep durable data), so every
         acknowledged entry must be readable and recovery must be able to decide.
"""

from __future__ import annotations

import asyncio
import collections

from tests.support.simulation.network import SimNetwork
from tests.support.simulation.plan import Fault
from tests.support.simulation.processes import detached
from tests.support.simulation.trace import Trace


class FaultInjector:
    def __init__(self, net: SimNetwork, trace: Trace, last_segment=lambda: (),
                 store=None) -> None:
        """``last_segment()``: the bookies of the ledger's last segment now (roles);
        ``store``: the SimMetadataStore the zk-* kinds strike."""
        self.net, self.trace, self.last_segment = net, trace, last_segment
        self.store = store
        self._bookie: dict[Fault, str] = {}  # the bookie a struck fault resolved to
        self.active: list[Fault] = []
        self.counts: collections.Counter = collections.Counter()  # struck, by kind
        self._depth: collections.Counter = collections.Counter()
        self._pending: list[asyncio.Task] = []

    def schedule(self, faults) -> None:
        """Strike each fault ``fault.at`` seconds from now."""
        for fault in faults:
            self._pending.append(detached(self._later(fault)))

    def cancel_pending(self) -> None:
        """Faults of a phase that ended before their time never strike."""
        for task in self._pending:
            task.cancel()
        self._pending.clear()

    async def _later(self, fault: Fault) -> None:
        await asyncio.sleep(fault.at)  # noqa: sleep-ok (virtual time: the fault's schedule)
        self.strike(fault)
        if fault.duration is not None:  # a struck fault heals on time, whatever the phase
            detached(self._heal_later(fault))

    async def _heal_later(self, fault: Fault) -> None:
        await asyncio.sleep(fault.duration)  # noqa: sleep-ok (virtual time: how long it lasts)
        self.heal(fault)

    def _key(self, fault: Fault):
        return (fault.kind, self._bookie[fault], fault.client)

    def resolve(self, target: str) -> str:
        """A bookie name, or a role (plan.py) against the last segment now."""
        if not target.startswith("@"):
            return target
        role, index = target[1:].split(":")
        members = list(self.last_segment())
        if role == "last":
            return members[int(index) % len(members)]
        spares = sorted(b for b in self.net.bookies if b not in members)
        return spares[int(index) % len(spares)] if spares else members[0]

    def strike(self, fault: Fault) -> None:
        self.counts[fault.kind] += 1
        if fault.kind.startswith("zk-"):
            self.store.zk_strike(fault.kind)
            self.trace(f"FAULT {fault.kind}")
            if fault.kind != "zk-expire":  # an expiry is over once struck
                self.active.append(fault)
                self._bookie[fault] = "zk"
            return
        self.active.append(fault)
        self._bookie[fault] = name = self.resolve(fault.bookie)
        key = self._key(fault)
        self._depth[key] += 1
        bookie = self.net.bookies[name]
        if self._depth[key] == 1:  # FI1
            if fault.kind == "pause":
                bookie.pause()
            elif fault.kind == "crash":
                bookie.crash()
            else:
                self.net.partitions.add((fault.client, name))
        self.trace(f"FAULT {fault.kind} {name}"
                   + (f" from {fault.client}" if fault.client else ""))

    def heal(self, fault: Fault) -> None:
        if fault not in self.active:
            return
        self.active.remove(fault)
        if fault.kind.startswith("zk-"):
            self.store.zk_heal(fault.kind)
            self.trace(f"HEAL {fault.kind}")
            return
        key = self._key(fault)
        self._depth[key] -= 1
        name = self._bookie[fault]
        if self._depth[key] == 0:
            bookie = self.net.bookies[name]
            if fault.kind == "pause":
                bookie.resume()
            elif fault.kind == "crash":
                bookie.restart()
            else:
                self.net.partitions.discard((fault.client, name))
        verb = {"pause": "resume", "crash": "restart", "partition": "reconnect"}[fault.kind]
        self.trace(f"HEAL {verb} {name}" + (f" to {fault.client}" if fault.client else ""))

    def heal_lasting(self) -> None:
        """Heal the faults that last until healed (duration None)."""
        for fault in [f for f in self.active if f.duration is None]:
            self.heal(fault)

    def heal_all(self) -> None:
        """FI2."""
        self.cancel_pending()
        if self.net.drop_p:
            self.net.drop_p = 0.0
            self.trace("HEAL no more message drops")
        for fault in list(self.active):
            self.heal(fault)
