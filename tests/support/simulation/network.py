"""The simulated network between clients and in-memory bookies, with seeded faults.

Every request and every reply travels after a seeded random delay. Faults:
    * pause (SIGSTOP): requests and replies to and from the bookie wait until it resumes,
      and it commits nothing meanwhile; callers time out.
    * crash: in-flight work is lost (its replies never come), unsynced records are lost,
      acknowledged state stays (bookie.py SB1); while down, a request is refused at once
      (a connection refused: OSError, a bookie failure for the client). Restart keeps the
      id and the durable data.
    * partition of one bookie from one client: the messages between them are lost.
    * drops: with a seed's probability, any message is lost.
A lost message is never answered: the caller's own timeout (asyncio.wait_for, on virtual
time) is what notices, as with a real network.

A client process may be paused (a zombie writer's SIGSTOP, zombie.py): its requests leave
and its replies are taken only while it runs (NW1). Recovery adds may be framed again with
another LAC, as BookKeeper's LedgerRecoveryOp does (``reframe``, W6 in bookie/write_rules.py).

``SimTransport`` is the client's Transport seam (api/client/ensemble.py): one per client
process, named, so a partition can cut one client from a bookie and the trace says who asked.
"""

from __future__ import annotations

import asyncio
import random

from api.client.topology import Location
from bookie import entry as framing
from bookie.entry import METADATA_LENGTH, DigestType
from bookie.errors import BookieError
from tests.support.simulation.bookie import SimBookie
from tests.support.simulation.processes import detached
from tests.support.simulation.trace import Trace


class ConnectionRefused(ConnectionRefusedError):
    """A crashed bookie's port: an OSError, which BOOKIE_FAILURES counts as a bookie failure."""


async def _lost() -> None:
    """A message that never arrives: wait until the caller gives up (cancels)."""
    await asyncio.get_running_loop().create_future()


class SimNetwork:
    def __init__(self, rng: random.Random, trace: Trace, delay_s=(0.0005, 0.01),
                 slow_p: float = 0.02, slow_s=(0.05, 0.5), drop_p: float = 0.0) -> None:
        self.rng, self.trace = rng, trace
        self.delay_s, self.slow_p, self.slow_s, self.drop_p = delay_s, slow_p, slow_s, drop_p
        self.bookies: dict[str, SimBookie] = {}
        self.partitions: set[tuple[str, str]] = set()  # (client, bookie)
        self.messages = 0
        #: bookie id -> Location: the run's topology (plan.py; empty: one default rack).
        self.topology: dict = {}
        self.paused: dict[str, asyncio.Event] = {}  # NW1: client -> set while it runs
        self.reframe = False
        self.reframed = 0  # recovery adds sent with another LAC than the copy read

    def pause_client(self, client: str) -> None:
        self.paused.setdefault(client, asyncio.Event()).clear()

    def resume_client(self, client: str) -> None:
        if client in self.paused:
            self.paused[client].set()

    async def client_runs(self, client: str) -> None:
        """NW1: returns once the client process is not paused."""
        gate = self.paused.get(client)
        if gate is not None:
            await gate.wait()

    def reframed_copy(self, data: bytes, digest_type: str | None) -> bytes:
        """BookKeeper's recovery write-back: the entry framed again with the recovering
        handle's LAC (entry id - 1, the LAC once every earlier entry is written back; one
        lower when the copy already says so), its digest computed again, length and
        payload as read. A MAC digest needs the key, which this layer does not hold."""
        dtype = DigestType.from_header(digest_type)
        if dtype is DigestType.MAC:
            return data
        ledger_id, entry_id, lac, length = framing.ENTRY_HEADER.unpack_from(data, 0)
        new_lac = entry_id - 1 if lac != entry_id - 1 else lac - 1
        payload = bytes(data[METADATA_LENGTH + dtype.digest_length:])
        self.reframed += 1
        return framing.frame_entry(ledger_id, entry_id, new_lac, length, payload, dtype)

    def add_bookie(self, bookie_id: str) -> SimBookie:
        self.bookies[bookie_id] = SimBookie(bookie_id, self.rng)
        return self.bookies[bookie_id]

    def _delay(self) -> float:
        if self.rng.random() < self.slow_p:
            return self.rng.uniform(*self.slow_s)
        return self.rng.uniform(*self.delay_s)

    async def _travel(self, client: str, bookie: SimBookie) -> None:
        """One message's way: a delay, then held while the bookie is paused; lost if cut."""
        self.messages += 1
        lost = self.drop_p and self.rng.random() < self.drop_p
        await asyncio.sleep(self._delay())  # noqa: sleep-ok (virtual time: the link delay)
        await bookie.running.wait()
        if lost or (client, bookie.bookie_id) in self.partitions:
            await _lost()

    async def call(self, client: str, bookie_id: str, what: str, operation):
        """Deliver ``operation(bookie)`` (a coroutine function or a function) and its reply.

        The request's delivery and the bookie's work run in a task of their own: a caller
        that times out does not take back a request already on the wire (a paused bookie
        still applies it when resumed), as with TCP."""
        bookie = self.bookies[bookie_id]
        await self.client_runs(client)  # NW1: a paused process sends nothing
        delivery = detached(self._deliver(client, bookie, what, operation))
        result, error, epoch = await asyncio.shield(delivery)
        await self._travel(client, bookie)  # the reply
        await self.client_runs(client)  # NW1: nor takes its replies
        if bookie.epoch != epoch:
            await _lost()  # crashed after answering, before the reply left
        if error is not None:
            self.trace(f"{client}->{bookie_id} {what}: {type(error).__name__}")
            raise error
        self.trace(f"{client}->{bookie_id} {what}: ok{_brief(result)}")
        return result

    async def _deliver(self, client: str, bookie: SimBookie, what: str, operation):
        """(result, error, epoch) once the bookie answered; never returns if it is lost."""
        await self._travel(client, bookie)
        if bookie.down:
            return None, ConnectionRefused(f"{bookie.bookie_id}: connection refused"), \
                bookie.epoch
        epoch = bookie.epoch
        try:
            result = operation(bookie)
            if asyncio.iscoroutine(result):
                result = await result
            outcome = (result, None, epoch)
        except BookieError as exc:
            outcome = (None, exc, epoch)
        except asyncio.CancelledError:
            if bookie.epoch == epoch:
                raise
            outcome = None
        if outcome is None or bookie.epoch != epoch:
            await _lost()  # crashed while working on it: no reply ever
        await bookie.running.wait()  # a paused bookie sends nothing
        return outcome


def _brief(result) -> str:
    if isinstance(result, dict) and "lac" in result:
        return f" lac={result['lac']} last={result.get('lastEntryId')}"
    if isinstance(result, int):
        return f" {result}"
    return ""


def _ids(datas) -> str:
    from bookie import entry as framing  # noqa: PLC0415

    ids = [framing.ENTRY_HEADER.unpack_from(d, 0)[1] for d in datas]
    return f"e{ids[0]}" if len(ids) == 1 else f"e{ids[0]}..{ids[-1]}"


class SimBookieClient:
    """BookieClient's async methods (api/client/bookie_client.py) over the SimNetwork."""

    def __init__(self, net: SimNetwork, client: str, bookie_id: str) -> None:
        self.net, self.client, self.bookie_id = net, client, bookie_id

    def _call(self, what, operation):
        return self.net.call(self.client, self.bookie_id, what, operation)

    async def add_entry(self, ledger_id, entry_id, entry, master_key, digest_type=None,
                        recovery=False, deferred_sync=False) -> dict:
        kind = "recovery-add" if recovery else "add"
        if recovery and self.net.reframe:
            entry = self.net.reframed_copy(entry, digest_type)
        await self._call(f"{kind} {_ids([entry])}", lambda b: b.add_entries(
            ledger_id, [entry], master_key, recovery, digest_type))
        return {}

    async def add_batch(self, ledger_id, entries, master_key, digest_type=None,
                        recovery=False, deferred_sync=False) -> list[int]:
        kind = "recovery-add" if recovery else "add"
        if recovery and self.net.reframe:
            entries = [self.net.reframed_copy(data, digest_type) for data in entries]
        return await self._call(f"{kind} {_ids(entries)}", lambda b: b.add_entries(
            ledger_id, list(entries), master_key, recovery, digest_type))

    async def add_batch_body(self, ledger_id, body, master_key, digest_type=None,
                             recovery=False) -> None:
        from api import wire  # noqa: PLC0415

        await self.add_batch(ledger_id, wire.decode_batch(body, 2**31 - 1, 2**31 - 1),
                             master_key, digest_type, recovery)

    async def read_entry(self, ledger_id, entry_id) -> bytes:
        return await self._call(f"read e{entry_id}",
                                lambda b: b.read_entry(ledger_id, entry_id))

    async def read_range(self, ledger_id, first, last) -> list[bytes]:
        return await self._call(f"read e{first}..{last}",
                                lambda b: b.read_range(ledger_id, first, last))

    async def read_held(self, ledger_id, first, last, step=1) -> tuple[list[bytes], int]:
        return await self._call(f"read-held e{first}..{last}/{step}",
                                lambda b: b.read_held(ledger_id, first, last, step))

    async def read_held_body(self, ledger_id, first, last, step=1) -> tuple[bytes, int]:
        from api import wire  # noqa: PLC0415

        datas, scanned = await self.read_held(ledger_id, first, last, step)
        return wire.encode_batch(datas), scanned

    async def fence(self, ledger_id, master_key) -> dict:
        return await self._call("fence", lambda b: b.fence(ledger_id, master_key))

    async def read_lac(self, ledger_id, wait_for_gt=None, timeout_ms=None) -> int:
        return await self._call("read_lac", lambda b: b.read_lac(ledger_id, wait_for_gt,
                                                                 timeout_ms))

    async def entry_id_ranges(self, ledger_id) -> list[list[int]]:
        return await self._call("entry-ids", lambda b: b.entry_id_ranges(ledger_id))

    async def ledger_info(self, ledger_id) -> dict:
        return await self._call("info", lambda b: b.ledger_info(ledger_id))

    async def delete_ledger(self, ledger_id) -> dict:
        return await self._call("delete", lambda b: b.delete_ledger(ledger_id))

    async def close(self) -> None:
        pass


class SimTransport:
    """The Transport seam for one named client process. Registered = not crashed."""

    def __init__(self, net: SimNetwork, name: str) -> None:
        self.net, self.name = net, name

    def client(self, bookie_id: str) -> SimBookieClient:
        return SimBookieClient(self.net, self.name, bookie_id)

    async def writable_bookies(self) -> list[str]:
        return sorted(b for b, bookie in self.net.bookies.items() if not bookie.down)

    async def alive_bookies(self) -> set[str]:
        return {b for b, bookie in self.net.bookies.items() if not bookie.down}

    async def learn(self, bookie_ids) -> None:
        """No schemes here: it returns without yielding, so it changes no schedule."""

    async def locations(self, bookie_ids) -> dict:
        """The run's topology (``net.topology``; a bookie not in it: its own host in the
        default rack). Returns without yielding, as ``learn``."""
        return {b: self.net.topology.get(b) or Location(host=b) for b in bookie_ids}

