"""What a drill sent and what the bookie acknowledged, and the invariants checked after a crash.

Shared by ``scripts/drill/drill_kill9.py`` (a real daemon over HTTP, crash model kill -9) and the
power-loss sweep (an in-process ``Bookie`` on ``SimDisk``): both talk to an *api* with
``BookieClient``'s method names, either a ``BookieClient`` or ``InProcessApi(bookie)``.

The ops (``add``, ``add_batch``, ``deferred_adds_and_force``, ``fence``, ``write_lac``,
``delete``, ``read_lac``) record what was sent before the call and what was acknowledged after
it, and re-raise any error: an error means "not acknowledged", never "not stored".

``check(api, model)`` returns every violation of docs/design.md §1 it finds, each a ``Violation``
whose kind is one of:
    lost       an acknowledged add is missing, reads back other bytes, or answers 500 EIO
    phantom    an entry reads back with bytes never sent, or an entry id never sent exists
    unfenced   a ledger whose fence was acknowledged accepts a plain add
    lac        the LAC is below one the bookie reported before the crash (N4)
    undeleted  a ledger whose delete was acknowledged is readable again
    key        a ledger accepts an add under a wrong master key
"""

from __future__ import annotations

import dataclasses
import random

from bookie.entry import entry_ids, frame_entry, frame_lac, master_key
from bookie.errors import BookieError, Fenced, IOFailure, NoEntry, NoLedger, Unauthorized

KEY = master_key(b"drill")
WRONG_KEY = master_key(b"not the drill's key")
#: An entry id no drill ever sends: a probe add there proves a fence or key still holds.
PROBE_ENTRY_ID = 1 << 40


@dataclasses.dataclass
class Violation:
    kind: str
    ledger_id: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: ledger {self.ledger_id}: {self.detail}"


@dataclasses.dataclass
class LedgerModel:
    """One ledger as the client saw it. Entry ids are handed out in order, never reused."""

    ledger_id: int
    next_entry: int = 0
    sent: dict[int, set[bytes]] = dataclasses.field(default_factory=dict)
    acked: dict[int, bytes] = dataclasses.field(default_factory=dict)   # durable acks
    deferred: dict[int, bytes] = dataclasses.field(default_factory=dict)  # acked, not forced
    fence_sent: bool = False
    fenced: bool = False
    delete_sent: bool = False
    deleted: bool = False
    lac_seen: int = -1          # the largest LAC the bookie reported (N4: never goes back)
    key_acked: bool = False     # a record about the ledger was acknowledged: its key is durable

    def frame(self, rng: random.Random, size_max: int = 2000) -> tuple[int, bytes]:
        entry_id = self.next_entry
        self.next_entry += 1
        payload = rng.randbytes(rng.randrange(1, size_max))
        data = frame_entry(self.ledger_id, entry_id, entry_id - 1, entry_id, payload)
        self.sent.setdefault(entry_id, set()).add(data)
        return entry_id, data

    def in_doubt(self) -> dict[int, bytes]:
        """Entries sent but not durably acknowledged: the ones a recovering writer re-adds."""
        doubt = {}
        for entry_id, versions in self.sent.items():
            if entry_id not in self.acked and entry_id != PROBE_ENTRY_ID:
                (data,) = versions  # the drills never send two versions of one entry
                doubt[entry_id] = data
        return doubt

    def ack(self, entry_id: int, data: bytes) -> None:
        self.acked[entry_id] = data
        self.deferred.pop(entry_id, None)
        self.key_acked = True

    def see_lac(self, lac: int) -> None:
        self.lac_seen = max(self.lac_seen, lac)


@dataclasses.dataclass
class Model:
    ledgers: dict[int, LedgerModel] = dataclasses.field(default_factory=dict)
    next_ledger_id: int = 1

    def new_ledger(self) -> LedgerModel:
        ledger = LedgerModel(self.next_ledger_id)
        self.next_ledger_id += 1
        self.ledgers[ledger.ledger_id] = ledger
        return ledger

    @property
    def acked_count(self) -> int:
        return sum(len(led.acked) for led in self.ledgers.values())


# -- ops: record what is sent, then what is acknowledged -------------------------------------


async def add(api, ledger: LedgerModel, rng: random.Random, recovery: bool = False) -> None:
    entry_id, data = ledger.frame(rng)
    await api.add_entry(ledger.ledger_id, entry_id, data, KEY, recovery=recovery)
    ledger.ack(entry_id, data)


async def add_batch(api, ledger: LedgerModel, rng: random.Random, count: int) -> None:
    framed = [ledger.frame(rng) for _ in range(count)]
    await api.add_batch(ledger.ledger_id, [data for _, data in framed], KEY)
    for entry_id, data in framed:
        ledger.ack(entry_id, data)


async def deferred_adds_and_force(api, ledger: LedgerModel, rng: random.Random, count: int,
                                  read_lac_between: bool = True) -> None:
    """Deferred-sync adds (acknowledged at enqueue), optionally a LAC read, then force: only
    force makes them count as durable (docs/design.md §1.1)."""
    for _ in range(count):
        entry_id, data = ledger.frame(rng)
        await api.add_entry(ledger.ledger_id, entry_id, data, KEY, deferred_sync=True)
        ledger.deferred[entry_id] = data
    if read_lac_between:
        await read_lac(api, ledger)
    await api.force(ledger.ledger_id, KEY)
    for entry_id, data in list(ledger.deferred.items()):
        ledger.ack(entry_id, data)


async def re_add_in_doubt(api, ledger: LedgerModel) -> int:
    """A recovering writer re-adds what it never saw acknowledged, same bytes, as recovery
    adds: stored or not, the answer must be 200 (identical re-adds are idempotent)."""
    doubt = ledger.in_doubt()
    for entry_id, data in sorted(doubt.items()):
        await api.add_entry(ledger.ledger_id, entry_id, data, KEY, recovery=True)
        ledger.ack(entry_id, data)
    return len(doubt)


async def fence(api, ledger: LedgerModel) -> None:
    ledger.fence_sent = True
    reply = await api.fence(ledger.ledger_id, KEY)
    ledger.fenced = True
    ledger.key_acked = True
    ledger.see_lac(reply["lac"])


async def write_lac(api, ledger: LedgerModel) -> None:
    value = max(ledger.acked, default=-1)
    lac = await api.write_lac(ledger.ledger_id, KEY, frame_lac(ledger.ledger_id, value))
    ledger.key_acked = True
    ledger.see_lac(lac)


async def read_lac(api, ledger: LedgerModel) -> None:
    ledger.see_lac(await api.read_lac(ledger.ledger_id))


async def delete(api, ledger: LedgerModel) -> None:
    ledger.delete_sent = True
    await api.delete_ledger(ledger.ledger_id)
    ledger.deleted = True


# -- the weighted mix of the drills -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OperationMix:
    """Which ledger operation a drill does next: (name, upper bound) pairs over one
    ``rng.random()``, shared by the kill -9 drill and the power-loss sweep (each brings its
    own bounds). Bounds, not weights, so a seed draws exactly what it drew before."""

    bounds: tuple[tuple[str, float], ...]
    batch_sizes: tuple[int, int] = (2, 6)
    deferred_counts: tuple[int, int] = (1, 4)

    def choose(self, rng: random.Random) -> str:
        draw = rng.random()
        return next((name for name, bound in self.bounds if draw < bound), "other")

    async def run(self, api, ledger: LedgerModel, rng: random.Random) -> str:
        """Draw and do one operation on ``ledger``; names it does not know ("checkpoint",
        "other"...) are returned for the drill to do. A ledger no add reached gets an add."""
        name = self.choose(rng)
        if name == "add" or not ledger.acked:
            await add(api, ledger, rng)
            return "add"
        if name == "batch":
            await add_batch(api, ledger, rng, rng.randint(*self.batch_sizes))
        elif name == "deferred":
            await deferred_adds_and_force(api, ledger, rng, rng.randint(*self.deferred_counts))
        elif name in LEDGER_OPS:
            await LEDGER_OPS[name](api, ledger)
        return name


LEDGER_OPS = {"read_lac": read_lac, "write_lac": write_lac, "fence": fence, "delete": delete}


# -- the check after a restart -------------------------------------------------------------


@dataclasses.dataclass
class CheckResult:
    violations: list[Violation] = dataclasses.field(default_factory=list)
    entries_checked: int = 0
    ledgers_checked: int = 0


async def check(api, model: Model, ledger_ids=None) -> CheckResult:
    """Check the given ledgers (default: all) against the model; see the module docstring.

    Connection errors propagate (the caller decides whether the bookie died meanwhile)."""
    result = CheckResult()
    ids = sorted(model.ledgers) if ledger_ids is None else ledger_ids
    for ledger_id in ids:
        await _check_ledger(api, model.ledgers[ledger_id], result)
        result.ledgers_checked += 1
    return result


async def _check_ledger(api, ledger: LedgerModel, result: CheckResult) -> None:
    bad = result.violations
    lid = ledger.ledger_id
    try:
        lac = await api.read_lac(lid)
    except NoLedger:
        if ledger.delete_sent:
            ledger.deleted = True  # took effect (maybe unacknowledged): from now on it stays
        elif ledger.acked or ledger.key_acked:
            bad.append(Violation("lost", lid, f"ledger is gone; {len(ledger.acked)} acked "
                                              f"entries"))
        return
    if ledger.deleted:
        bad.append(Violation("undeleted", lid, f"deleted with an ack, now answers LAC {lac}"))
        return
    if lac < ledger.lac_seen:
        bad.append(Violation("lac", lid, f"LAC {lac} after restart, {ledger.lac_seen} "
                                         f"reported before"))
    ledger.see_lac(lac)
    stored: dict[int, int] = {}
    result.entries_checked += await _check_entries(api, ledger, bad, stored)
    await _check_usage(api, ledger, bad, stored)
    await _check_probes(api, ledger, bad)


async def _check_usage(api, ledger: LedgerModel, bad: list[Violation],
                       stored: dict[int, int]) -> None:
    """Ledger info's counters (issue 13, O(1) info) equal what the reads found stored."""
    for entry_id in range(ledger.next_entry):  # what the range reads stepped over
        if entry_id not in stored:
            try:
                stored[entry_id] = len(await api.read_entry(ledger.ledger_id, entry_id))
            except (NoEntry, IOFailure):
                pass  # missing or unreadable: _check_entries reported what matters
    info = await api.ledger_info(ledger.ledger_id)
    found = (len(stored), sum(stored.values()))
    if (info["entries"], info["bytes"]) != found:
        bad.append(Violation("usage", ledger.ledger_id,
                             f"info says {info['entries']} entries, {info['bytes']} bytes; "
                             f"reads found {found[0]} entries, {found[1]} bytes"))


async def _check_entries(api, ledger: LedgerModel, bad: list[Violation],
                         stored: dict[int, int]) -> int:
    """Range-read 0..the last id sent: acked ones must match, others must be sent bytes.
    ``stored`` gets {entryId: length} of every entry read."""
    lid, last, first, checked = ledger.ledger_id, ledger.next_entry - 1, 0, 0
    while first <= last:
        try:
            got = await api.read_range(lid, first, last)
        except NoEntry:
            got = []
        except IOFailure as exc:
            got = []
            bad.append(Violation("lost", lid, f"range read from {first}: 500 EIO: {exc}"))
        for offset, data in enumerate(got):
            checked += _check_entry(ledger, first + offset, data, bad)
            stored[first + offset] = len(data)
        first += len(got)
        if first <= last:
            if first in ledger.acked:
                await _confirm_missing(api, ledger, first, bad)
            first += 1
    await _check_nothing_beyond(api, ledger, bad)
    return checked


def _check_entry(ledger: LedgerModel, entry_id: int, data: bytes,
                 bad: list[Violation]) -> int:
    lid = ledger.ledger_id
    if entry_id in ledger.acked:
        if data != ledger.acked[entry_id]:
            bad.append(Violation("lost", lid, f"acked entry {entry_id} reads back "
                                              f"{len(data)} different bytes"))
        return 1
    if data not in ledger.sent.get(entry_id, ()):
        bad.append(Violation("phantom", lid, f"entry {entry_id} holds {len(data)} bytes "
                                             f"never sent"))
    return 0


async def _confirm_missing(api, ledger: LedgerModel, entry_id: int,
                           bad: list[Violation]) -> None:
    """A range read stopped at an acked entry: read it alone to name how it is lost."""
    try:
        data = await api.read_entry(ledger.ledger_id, entry_id)
    except NoEntry:
        bad.append(Violation("lost", ledger.ledger_id, f"acked entry {entry_id}: 404"))
        return
    except IOFailure as exc:
        bad.append(Violation("lost", ledger.ledger_id, f"acked entry {entry_id}: 500 EIO: "
                                                       f"{exc}"))
        return
    _check_entry(ledger, entry_id, data, bad)


async def _check_nothing_beyond(api, ledger: LedgerModel, bad: list[Violation]) -> None:
    """No entry id past the last one sent exists, and the last entry is one that was sent."""
    lid = ledger.ledger_id
    try:
        data = await api.read_entry(lid, ledger.next_entry)
        bad.append(Violation("phantom", lid, f"entry {ledger.next_entry} was never sent but "
                                             f"holds {len(data)} bytes"))
    except NoEntry:
        pass
    except IOFailure as exc:
        bad.append(Violation("phantom", lid, f"entry {ledger.next_entry} (never sent): 500 "
                                             f"EIO: {exc}"))
    try:
        data = await api.read_entry(lid, -1)
    except NoEntry:
        if ledger.acked:
            bad.append(Violation("lost", lid, "last entry: 404 though entries were acked"))
        return
    except IOFailure as exc:
        bad.append(Violation("lost", lid, f"last entry: 500 EIO: {exc}"))
        return
    _, entry_id = entry_ids(data)
    if data not in ledger.sent.get(entry_id, ()):
        bad.append(Violation("phantom", lid, f"last entry {entry_id} was never sent"))
    elif entry_id < max(ledger.acked, default=-1):
        bad.append(Violation("lost", lid, f"last entry is {entry_id}, below acked "
                                          f"{max(ledger.acked)}"))


async def _check_probes(api, ledger: LedgerModel, bad: list[Violation]) -> None:
    """A wrong key is refused (the key is durable); an acked fence still refuses plain adds."""
    lid = ledger.ledger_id
    probe = frame_entry(lid, PROBE_ENTRY_ID, -1, 0, b"probe")
    if ledger.key_acked:
        try:
            await api.add_entry(lid, PROBE_ENTRY_ID, probe, WRONG_KEY)
            bad.append(Violation("key", lid, "an add under a wrong master key was accepted"))
            ledger.sent.setdefault(PROBE_ENTRY_ID, set()).add(probe)
        except Unauthorized:
            pass
        except BookieError as exc:
            bad.append(Violation("key", lid, f"wrong-key add answered {exc.code}: {exc}"))
    if ledger.fenced:
        try:
            await api.add_entry(lid, PROBE_ENTRY_ID, probe, KEY)
            bad.append(Violation("unfenced", lid, "a plain add after an acked fence was "
                                                  "accepted"))
            ledger.sent.setdefault(PROBE_ENTRY_ID, set()).add(probe)
        except Fenced:
            pass


class InProcessApi:
    """A ``Bookie`` behind ``BookieClient``'s method names and return shapes."""

    def __init__(self, bookie) -> None:
        self.bookie = bookie

    async def add_entry(self, ledger_id, entry_id, data, key, recovery=False,
                        deferred_sync=False):
        await self.bookie.add_entry(ledger_id, entry_id, data, key, recovery=recovery,
                                    deferred_sync=deferred_sync)
        return {"ledgerId": ledger_id, "entryId": entry_id}

    async def add_batch(self, ledger_id, entries, key, recovery=False, deferred_sync=False):
        pairs = [(entry_ids(data)[1], data) for data in entries]
        return await self.bookie.add_batch(ledger_id, pairs, key, recovery=recovery,
                                           deferred_sync=deferred_sync)

    async def fence(self, ledger_id, key):
        lac, last = await self.bookie.fence(ledger_id, key)
        return {"lac": lac, "lastEntryId": last}

    async def write_lac(self, ledger_id, key, body):
        return await self.bookie.write_lac(ledger_id, key, body)

    async def read_lac(self, ledger_id):
        return await self.bookie.read_lac(ledger_id)

    async def force(self, ledger_id, key):
        return await self.bookie.force(ledger_id, key)

    async def read_entry(self, ledger_id, entry_id):
        return await self.bookie.read_entry(ledger_id, entry_id)

    async def read_range(self, ledger_id, first, last):
        return await self.bookie.read_range(ledger_id, first, last)

    async def ledger_info(self, ledger_id):
        return await self.bookie.ledger_info(ledger_id)

    async def delete_ledger(self, ledger_id):
        await self.bookie.delete_ledger(ledger_id)
        return {}

    async def checkpoint(self):
        return await self.bookie.checkpoint()
