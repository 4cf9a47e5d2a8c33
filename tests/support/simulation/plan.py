"""A seed's scenario, chosen up front from ``random.Random(seed)``: quorums, the writer's
shape, where it dies, how recovery is run, and the list of faults (what shrinking reduces).

Phases, in order (a fault's ``at`` is seconds from its phase's start):
    write    the writer appends; it is killed (its tasks cancelled, a process death) after
             ``kill_after`` acknowledgements, or closes the ledger itself
    r1       the first recovery: one, two racing, or one whose task is cancelled mid-way
    between  faults left "until healed" (duration None) are healed; new ones may strike
    r2       a second recovery, or a ReplicationWorker pass that recovers the open ledger;
             undecided: every fault is healed and recovery retried
    return   (plan.returns) a named bookie is replaced while down and comes back with its
             old id; later another is lost for good (see Plan.returns)
Throughout, each bookie runs GC from metadata (plan.gc_grace); at the end, workers repair
what is still marked under-replicated.
Faults: pause (SIGSTOP), crash (restart with the same id and data), partition (one bookie
from one client process); on the metadata store (bookie "zk", metadata.py SM4-SM6): zk-hang
(calls wait until healed or ZK_ANSWER_S), zk-uncertain (writes applied, their caller told
ZkUnavailable), zk-expire (the session ends: calls in flight fail, ephemeral locks go). A fault's bookie is a name ("b2") or a role resolved when it
strikes: "@last:i", the i-th bookie of the ledger's last segment then, or "@spare:j", the
j-th registered bookie outside it (the one an ensemble change would likely pick). Roles make
orders such as "pause a segment member and the spare during recovery 1, then another
member during recovery 2" likely, where concrete names would hit them one time in many.

Invariant:
    PL1. A seed keeps its older choices: ``base_plan`` draws them in the order they were
         added, and choices added later (late.py) are drawn after them from the same Random,
         so a pinned seed's plan only grows.
"""

from __future__ import annotations

import dataclasses
import random

QUORUMS = ((2, 2, 2), (3, 2, 2), (3, 3, 2), (3, 3, 3), (4, 3, 2), (5, 3, 2), (5, 5, 3))
PHASES = ("write", "r1", "between", "r2")
CLIENTS = {"write": ("writer", "reader#0"), "r1": ("recovery#1", "recovery#2"),
           "between": ("recovery#3",), "r2": ("recovery#3", "worker")}

#: How many faults strike in each phase (weights of 0, 1, 2, 3): recoveries get the most,
#: since the orders that break recovery (bug A of the compound-faults issue) need faults
#: during one recovery and different ones during the next.
FAULT_COUNT_WEIGHTS = {"write": (3, 3, 3, 2), "r1": (1, 2, 3, 3), "between": (2, 3, 2, 1),
                       "r2": (1, 2, 3, 2)}


@dataclasses.dataclass(frozen=True)
class Fault:
    phase: str
    at: float
    kind: str  # pause | crash | partition | zk-hang | zk-uncertain | zk-expire
    bookie: str
    duration: float | None  # None: until healed after r1 (or at the end)
    client: str = ""  # partition: the client process cut off

    def text(self) -> str:
        target = f"{self.bookie} from {self.client}" if self.kind == "partition" \
            else self.bookie
        lasting = "until healed" if self.duration is None else f"for {self.duration:.2f}s"
        return f"{self.phase}+{self.at:.3f} {self.kind} {target} {lasting}"


@dataclasses.dataclass(frozen=True)
class Plan:
    seed: int
    ensemble: int
    write_quorum: int
    ack_quorum: int
    bookies: tuple[str, ...]
    entries: int
    window: int
    kill_after: int | None  # None: the writer closes the ledger itself
    kill_delay: float
    close_race: bool  # an append racing close() (bug D)
    reader_probe: bool  # a reader polls read_lac and reads above it (S4)
    r1_mode: str  # one | two | cancel
    r1_cancel_at: float
    r2_mode: str  # recovery | worker
    worker_after: bool  # a ReplicationWorker pass over the closed ledger
    drop_p: float
    faults: tuple[Fault, ...]
    #: GC from metadata (MetadataGc) on every bookie, with this grace (s); None: no GC.
    gc_grace: float | None = None
    #: After the close: a bookie of the ledger (the ``return_pick``-th named) crashes, a
    #: worker pass replaces it while it is down, it comes back with its old id and data
    #: (its copy is over-replicated: GM2's to delete); ``return_wait`` s later another
    #: named bookie (``lose_pick``) is lost for good, and workers replace it, maybe on the
    #: returned one (bugs B and C of the GC issue).
    returns: bool = False
    return_pick: int = 0
    lose_pick: int = 0
    return_wait: float = 0.0
    # Issue 35 item 7 (late.py draws them after everything above, so older seeds keep
    # their choices): more ledgers, deletes, a zombie writer, a wrong password, BookKeeper's
    # recovery framing. Qa=1 is drawn there too (it lowers ack_quorum).
    side_ledgers: int = 0  # more ledgers, written beside the main one (late.py)
    side_deletes: tuple[float | None, ...] = ()  # per side ledger: deleted s after r1 began
    zombie: bool = False  # the writer is paused, not killed, and adds again later
    zombie_late: bool = False  # it resumes after the return phase (else after r1)
    zombie_adds: int = 0
    intruder: str = ""  # "" | r2 | late: when a wrong-password client acts (intruder.py)
    reframe: bool = False  # recovery adds framed again with another LAC (W6)
    # Issue 39 (topology.py, its own seeds' plans only): 9 bookies on 3 hosts in 3 racks and
    # 3 zones, the clients' placement policy, and a whole rack (host) lost for good.
    topology: str = ""  # "" | host | rack | zone: the policy every client places by
    strict: bool = False
    lose_rack: int | None = None  # the rack lost for good after the close; None: none
    placed_by: str = ""  # the clients' policy when not ``topology`` (TOPO's own test)

    def text(self) -> str:
        kill = "no kill (writer closes)" if self.kill_after is None else \
            f"kill after {self.kill_after} acks +{self.kill_delay:.3f}s"
        return (f"seed={self.seed} E/Qw/Qa={self.ensemble}/{self.write_quorum}/"
                f"{self.ack_quorum} bookies={','.join(self.bookies)} entries={self.entries} "
                f"window={self.window} {kill} close_race={self.close_race} "
                f"reader_probe={self.reader_probe} r1={self.r1_mode} r2={self.r2_mode} "
                f"worker_after={self.worker_after} drop_p={self.drop_p} "
                f"gc_grace={self.gc_grace} returns={self.returns}"
                + (f" return_pick={self.return_pick} lose_pick={self.lose_pick} "
                   f"return_wait={self.return_wait}" if self.returns else "")
                + f" side_ledgers={self.side_ledgers} side_deletes={self.side_deletes} "
                f"zombie={self.zombie}{'(late)' if self.zombie_late else ''}"
                f"+{self.zombie_adds} intruder={self.intruder or '-'} reframe={self.reframe}"
                + (f" topology={self.topology}{'(strict)' if self.strict else ''} "
                   f"lose_rack={self.lose_rack}" if self.topology else ""))


def _faults(rng: random.Random, bookies, ensemble: int) -> list[Fault]:
    targets = list(bookies) + [f"@last:{i}" for i in range(ensemble)] + \
        [f"@spare:{j}" for j in range(len(bookies) - ensemble)]
    found = []
    for phase in PHASES:
        count = rng.choices((0, 1, 2, 3), weights=FAULT_COUNT_WEIGHTS[phase])[0]
        span = {"write": 0.1, "r1": 0.4, "between": 0.2, "r2": 0.4}[phase]
        for _ in range(count):
            kind = rng.choices(("pause", "crash", "partition"), weights=(5, 2, 2))[0]
            lasting = None if rng.random() < 0.5 else rng.uniform(0.05, 4.0)
            client = rng.choice(CLIENTS[phase]) if kind == "partition" else ""
            at = 0.0 if rng.random() < 0.5 else rng.uniform(0.0, span)  # 0: before fencing
            found.append(Fault(phase, round(at, 4), kind, rng.choice(targets),
                               None if lasting is None else round(lasting, 3), client))
    return found


def base_plan(seed: int) -> tuple[Plan, random.Random]:
    """The seed's plan as drawn before issue 35 item 7 (late.py draws the rest from the
    returned Random: PL1), e.g. for the pinned seeds of bugs B and C."""
    rng = random.Random(seed)
    ensemble, write_quorum, ack_quorum = rng.choice(QUORUMS)
    bookies = tuple(f"b{i}" for i in range(ensemble + rng.choice((1, 1, 2))))
    entries = rng.randint(3, 30)
    killed = rng.random() < 0.85
    plan = Plan(
        seed=seed, ensemble=ensemble, write_quorum=write_quorum, ack_quorum=ack_quorum,
        bookies=bookies, entries=entries, window=rng.choice((1, 4, 8, 16)),
        kill_after=rng.randint(0, entries) if killed else None,
        kill_delay=round(rng.uniform(0.0, 0.02), 4),
        close_race=rng.random() < 0.3, reader_probe=rng.random() < 0.3,
        r1_mode=rng.choices(("one", "two", "cancel"), weights=(5, 2, 2))[0],
        r1_cancel_at=round(rng.uniform(0.0, 3.0), 4),  # past a write-back timeout too
        r2_mode=rng.choices(("recovery", "worker"), weights=(4, 1))[0],
        worker_after=rng.random() < 0.25,
        drop_p=0.0 if rng.random() < 0.8 else round(rng.uniform(0.001, 0.02), 4),
        faults=tuple(_faults(rng, bookies, ensemble)),
        # Drawn after everything above, so a seed's older choices stay what they were.
        gc_grace=rng.choice((0.0, 0.0, 0.3, 1.0, 2.5)),
        returns=rng.random() < 0.5, return_pick=rng.randrange(8), lose_pick=rng.randrange(8),
        return_wait=round(rng.uniform(0.0, 4.0), 3))
    return plan, rng
