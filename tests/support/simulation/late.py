"""The plan's choices added by issue 35 item 7, drawn from the seed's Random after every older
choice (PL1: a seed keeps the quorums, writer, recoveries and faults it had before), and the
metadata-store faults they bring.

    Qa=1     (E, Qw, 1): one bookie's answer acknowledges an entry, so a single copy that
             should have refused (an unfenced revive, bug F) is enough to break S2
    side     one to three more ledgers, written beside the main one; some deleted while
             recovery, workers and GC run (DL1-DL2 in ledgers.py)
    zombie   the writer is paused, not killed: recovery closes its ledger meanwhile, then
             it resumes and appends again (S2: none of those may be acknowledged)
    intruder a client with the wrong password fences, adds and recovers (intruder.py)
    reframe  recovery's write-back framed again with the recovering handle's LAC, as
             BookKeeper's LedgerRecoveryOp does (W6's same entry, network.py)
    zk       zk-hang, zk-uncertain, zk-expire on the metadata store (metadata.py SM4-SM6)
"""

from __future__ import annotations

import random

import dataclasses

from tests.support.simulation.plan import PHASES, Fault, Plan, base_plan

ZK_KINDS = ("zk-hang", "zk-uncertain", "zk-expire")


def _zk_faults(rng: random.Random) -> list[Fault]:
    found = []
    for _ in range(rng.choice((1, 1, 2))):
        kind = rng.choices(ZK_KINDS, weights=(3, 3, 2))[0]
        phase = rng.choice(PHASES)
        lasting = 0.0 if kind == "zk-expire" else (
            None if rng.random() < 0.3 else round(rng.uniform(0.05, 4.0), 3))
        found.append(Fault(phase, round(rng.uniform(0.0, 0.4), 4), kind, "zk", lasting))
    return found


def late_choices(rng: random.Random, plan: Plan) -> dict:
    choices: dict = {}
    if rng.random() < 0.2:
        choices["ack_quorum"] = 1
    if rng.random() < 0.3:
        choices["faults"] = plan.faults + tuple(_zk_faults(rng))
    side = rng.choices((0, 1, 2, 3), weights=(5, 3, 2, 1))[0]
    choices["side_ledgers"] = side
    choices["side_deletes"] = tuple(
        round(rng.uniform(0.0, 6.0), 3) if rng.random() < 0.6 else None for _ in range(side))
    zombie = plan.kill_after is not None and rng.random() < 0.25
    choices.update(zombie=zombie, zombie_late=zombie and rng.random() < 0.5,
                   zombie_adds=rng.randint(1, 3) if zombie else 0)
    choices["intruder"] = rng.choices(("", "r2", "late"), weights=(6, 1, 2))[0]
    choices["reframe"] = rng.random() < 0.4
    return choices


def make_plan(seed: int) -> Plan:
    """The seed's whole plan: ``base_plan``'s choices, then these."""
    plan, rng = base_plan(seed)
    return dataclasses.replace(plan, **late_choices(rng, plan))
