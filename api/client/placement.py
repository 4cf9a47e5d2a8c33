"""Placement policies (docs/cluster.md §6): which bookies hold a ledger's copies, by the
topology of api/client/topology.py, in BookKeeper's terms.

Policies (setting ``placement_policy``):
    random  any writable bookies (the behaviour before topologies).
    host    no two copies of an entry on one host.
    rack    every write set spans min(Qw, min_racks) racks (RackawareEnsemblePlacementPolicy,
            ``minNumRacksPerWriteQuorum``); strict also keeps bookies of the default rack out
            (``enforceMinNumRacksPerWriteQuorum``). The default, as BookKeeper's client's.
    zone    every write set spans min(Qw, min_zones) zones, and min(Qw, desired_zones) to
            meet it strictly (ZoneawareEnsemblePlacementPolicy's min/desired zones); strict
            keeps bookies of the default rack out.
A write set is positions i..i+Qw-1 (mod E) of a segment's ensemble, the bookies that hold
one entry. Each write set adheres MEETS_STRICT, MEETS_SOFT (zone: fewer than desired zones)
or FAIL, as BookKeeper's ``isEnsembleAdheringToPlacementPolicy`` grades it.

Invariants:
    PP1. One code for every caller: ensemble creation, a writer's ensemble change, recovery's
         replacements, the replication worker's targets and the auditor's check all place
         and grade through this module.
    PP2. Among the candidates, a choice is the best of a few randomised greedy passes by
         (failing write sets, soft ones, copies sharing a host, copies sharing a rack),
         compared in that order; ties are broken at random, which spreads ledgers.
    PP3. Strict mode chooses no bookie of the default rack and refuses a choice whose own
         write sets (those holding a chosen index) fail (PlacementNotMet, nothing is
         written), as BookKeeper's enforced policies; a choice that leaves its segment with
         a failing write set is otherwise made and counted (``COUNTS``, the metric
         ``bookie_placement_not_adhering_total{caller}``), as BookKeeper counts an ensemble
         not adhering to the placement policy.
    PP4. When the candidates span one rack (host, zone: the level the policy needs), there is
         nothing to choose by: the choice is random, with exactly the random calls made
         before topologies (BookKeeper's "only one rack, use the random algorithm"), so the
         simulator's seeds replay as they did.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from collections import Counter
from typing import Sequence

from api.client.ensemble_errors import NotEnoughBookies
from api.client.topology import Location

POLICIES = ("random", "host", "rack", "zone")

MEETS_STRICT, MEETS_SOFT, FAIL = "MEETS_STRICT", "MEETS_SOFT", "FAIL"
#: Greedy passes per placement (PP2); each is O(candidates x Qw x Qw) per position.
PASSES = 6

log = logging.getLogger("api.client.placement")


class PlacementNotMet(NotEnoughBookies):
    """PP3: strict placement, and no choice among the writable bookies meets the policy."""


@dataclasses.dataclass(frozen=True)
class PlacementRules:
    policy: str = "rack"
    min_racks: int = 2
    min_zones: int = 2
    desired_zones: int = 3
    strict: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"placement policy {self.policy!r}: one of {', '.join(POLICIES)}")
        if not 1 <= self.min_zones <= self.desired_zones or self.min_racks < 1:
            raise ValueError("need 1 <= min_zones <= desired_zones and min_racks >= 1")

    def level(self, where: Location) -> str:
        """What this policy spreads copies over (PP4)."""
        return {"host": where.host, "zone": where.zone}.get(self.policy, where.rack)


class PlacementCounts:
    """PP3's counters, process-wide: a bookie's metrics read them for its autorecovery."""

    #: Who places (PP1), the ``caller`` label of the metrics.
    CALLERS = ("create", "ensemble_change", "recovery", "replication")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.not_adhering: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()

    def count(self, caller: str, refused: bool) -> None:
        with self._lock:
            (self.refused if refused else self.not_adhering)[caller] += 1


COUNTS = PlacementCounts()


def write_sets(ensemble: Sequence, write_quorum: int) -> list[list]:
    size = len(ensemble)
    return [[ensemble[(i + j) % size] for j in range(min(write_quorum, size))]
            for i in range(size)]


def grade(rules: PlacementRules, places: Sequence[Location],
          unplaced_fails: bool = False) -> tuple[int, int, int, int]:
    """One write set's (fail, soft, copies sharing a host, copies sharing a rack); while an
    ensemble is being built the set may be partial, and is graded by its size.
    ``unplaced_fails``: a member in the default rack fails it (BookKeeper's strict grade of
    a segment; a choice keeps such bookies out of its candidates instead, PP3)."""
    size = len(places)
    host_shared = size - len({p.host for p in places})
    rack_shared = size - len({p.rack for p in places})
    zones = len({p.zone for p in places})
    unplaced = unplaced_fails and any(not p.placed for p in places)
    fail = soft = False
    if rules.policy == "host":
        fail = host_shared > 0
    elif rules.policy == "rack":
        fail = size - rack_shared < min(size, rules.min_racks) or unplaced
    elif rules.policy == "zone":
        fail = zones < min(size, rules.min_zones) or unplaced
        soft = not fail and zones < min(size, rules.desired_zones)
    return int(fail), int(soft), host_shared, rack_shared


def _score(rules, sets, unplaced_fails: bool = False) -> tuple[int, int, int, int]:
    total = [0, 0, 0, 0]
    for places in sets:
        for k, value in enumerate(grade(rules, places, unplaced_fails)):
            total[k] += value
    return tuple(total)


def _places(members: Sequence, write_quorum: int, where: dict[str, Location],
            starts=None):
    """The places of the write sets starting at ``starts`` (every one when None); an
    unfilled (None) member of an ensemble being built is left out."""
    size = len(members)
    width = min(write_quorum, size)
    for start in range(size) if starts is None else starts:
        yield [where[b] for j in range(width) if (b := members[(start + j) % size]) is not None]


def _sets_holding(size: int, write_quorum: int, indices) -> list[int]:
    """The starts of the write sets that hold any of ``indices``."""
    width = min(write_quorum, size)
    return sorted({(index - k) % size for index in indices for k in range(width)})


def adherence(rules: PlacementRules, ensemble: Sequence[str], write_quorum: int,
              where: dict[str, Location]) -> str:
    """BookKeeper's grade of a whole segment: FAIL if any write set fails (strict: also a
    member in the default rack), else MEETS_SOFT if any is soft, else MEETS_STRICT."""
    fail, soft, _, _ = _score(rules, _places(ensemble, write_quorum, where), rules.strict)
    return FAIL if fail else MEETS_SOFT if soft else MEETS_STRICT


class Placement:
    """The policy in force for one client (PP1)."""

    def __init__(self, rules: PlacementRules | None = None,
                 counts: PlacementCounts = COUNTS) -> None:
        self.rules = rules or PlacementRules()
        self.counts = counts

    @property
    def needs_topology(self) -> bool:
        return self.rules.policy != "random"

    def one_level(self, names, where) -> bool:
        """PP4: nothing to spread over (or a policy that spreads over nothing)."""
        return not self.needs_topology or \
            len({self.rules.level(where[b]) for b in names}) < 2

    def _eligible(self, candidates, where, needed: int, caller: str) -> list[str]:
        """PP3: strict keeps bookies of the default rack out of every choice, as
        BookKeeper's enforced policies exclude them; too few left is a refusal."""
        eligible = list(candidates)
        if self.needs_topology and self.rules.strict:
            eligible = [b for b in eligible if where[b].placed]
            if len(eligible) < needed:
                self.counts.count(caller, True)
                raise PlacementNotMet(
                    f"strict {self.rules.policy}-aware placement: {len(eligible)} of the "
                    f"{len(candidates)} candidates stand in a rack (the others are in the "
                    f"default rack), {needed} needed")
        if len(eligible) < needed:
            raise NotEnoughBookies(f"{len(eligible)} writable bookies, {needed} needed")
        return eligible

    def new_ensemble(self, size: int, write_quorum: int, candidates: Sequence[str],
                     where: dict[str, Location], caller: str = "create") -> tuple[str, ...]:
        candidates = self._eligible(candidates, where, size, caller)
        if self.one_level(candidates, where):  # PP4
            chosen = tuple(random.sample(candidates, size))
        else:
            chosen = self._best([None] * size, write_quorum, candidates, where)
        return self._checked(chosen, range(size), write_quorum, where, caller)

    def replace_one(self, ensemble: Sequence[str], index: int, write_quorum: int,
                    candidates: Sequence[str], where: dict[str, Location],
                    caller: str = "ensemble_change") -> tuple[str, ...]:
        """The ensemble with ``ensemble[index]`` replaced by one of ``candidates``."""
        candidates = self._eligible(candidates, where, 1, caller)
        if self.one_level(candidates + list(ensemble), where):  # PP4
            chosen = list(ensemble)
            chosen[index] = random.choice(candidates)
            return self._checked(tuple(chosen), [index], write_quorum, where, caller)
        return self.replace(ensemble, [index], write_quorum, candidates, where, caller)

    def replace(self, ensemble: Sequence[str], indices: Sequence[int], write_quorum: int,
                candidates: Sequence[str], where: dict[str, Location],
                caller: str = "recovery") -> tuple[str, ...]:
        """The ensemble with every index in ``indices`` replaced, each by another candidate.
        Only the write sets holding a replaced index are the choice's to meet (PP3): one
        that fails elsewhere is not this choice's doing, as BookKeeper's replaceBookie."""
        candidates = self._eligible(candidates, where, len(indices), caller)
        chosen: list = list(ensemble)
        if self.one_level(candidates + list(ensemble), where):  # PP4
            for index, bookie_id in zip(indices, random.sample(candidates, len(indices))):
                chosen[index] = bookie_id
            return self._checked(tuple(chosen), indices, write_quorum, where, caller)
        for index in indices:
            chosen[index] = None
        return self._checked(self._best(chosen, write_quorum, candidates, where), indices,
                             write_quorum, where, caller)

    def targets(self, ensemble: Sequence[str], index: int, write_quorum: int,
                candidates: Sequence[str], where: dict[str, Location],
                caller: str = "replication") -> list[str]:
        """Every candidate for ``ensemble[index]``, best first (the replication worker tries
        them in turn); ties in random order. PP3 on the write sets holding ``index``: in
        strict mode a candidate that leaves one failing is not offered (none left: refused).
        The one taken is counted by ``note`` once it is in the metadata."""
        ranked = self._eligible(candidates, where, 1, caller) if candidates else []
        random.shuffle(ranked)
        if self.one_level(ranked + list(ensemble), where):  # PP4
            return ranked
        trial = list(ensemble)
        starts = _sets_holding(len(trial), write_quorum, [index])

        def score(candidate: str):
            trial[index] = candidate
            return _score(self.rules, _places(trial, write_quorum, where, starts))
        scored = sorted(((score(c), n, c) for n, c in enumerate(ranked)))  # n: the shuffle
        passing = [c for grade_, _, c in scored if grade_[0] == 0]
        if not self.rules.strict:
            return [c for _, _, c in scored]
        if scored and not passing:
            trial[index] = scored[0][2]
            self._checked(tuple(trial), [index], write_quorum, where, caller)  # refused
        return passing

    def note(self, chosen: Sequence[str], index: int, write_quorum: int,
             where: dict[str, Location], caller: str = "replication") -> None:
        """PP3 for a choice made from ``targets``, once committed: counted if the segment
        it leaves has a failing write set (``index`` names the choice, for the log)."""
        if self.needs_topology and self._fails(chosen, range(len(chosen)), write_quorum,
                                               where):
            self.counts.count(caller, False)
            log.info("placement (replication): %s at index %d leaves the segment failing "
                     "the %s policy", chosen[index], index, self.rules.policy)

    def best_move(self, ensemble: Sequence[str], write_quorum: int, candidates: Sequence[str],
                  where: dict[str, Location]) -> tuple[int, str] | None:
        """The one replacement (index, candidate) that most improves the segment's grade
        (PP2's order, graded as ``adherence`` grades), None if none improves it: how a
        worker repairs placement one copy at a time (PR1 in
        api/cluster/autorecovery/placement_repair.py)."""
        def score(members) -> tuple:
            return _score(self.rules, _places(members, write_quorum, where),
                          self.rules.strict)
        if self.rules.strict:
            candidates = [b for b in candidates if where[b].placed]
        best, best_score = None, score(ensemble)
        shuffled = list(candidates)
        random.shuffle(shuffled)
        for index in range(len(ensemble)):
            trial = list(ensemble)
            for candidate in shuffled:
                trial[index] = candidate
                trial_score = score(trial)
                if trial_score < best_score:
                    best, best_score = (index, candidate), trial_score
        return best

    def adherence(self, ensemble, write_quorum: int, where) -> str:
        return adherence(self.rules, ensemble, write_quorum, where)

    def _fails(self, chosen, indices, write_quorum: int, where) -> bool:
        starts = _sets_holding(len(chosen), write_quorum, indices)
        return any(grade(self.rules, places)[0]
                   for places in _places(chosen, write_quorum, where, starts))

    def _checked(self, chosen: tuple, indices, write_quorum: int, where,
                 caller: str) -> tuple:
        """PP3: strict refuses a choice whose own write sets (those holding a chosen index)
        fail; a segment left with a failing write set, the choice's or one it inherits, is
        counted as a placement not adhering to the policy."""
        if not self.needs_topology:
            return chosen
        detail = ", ".join(f"{b}@{where[b].location}/{where[b].host}" for b in chosen)
        if self.rules.strict and self._fails(chosen, indices, write_quorum, where):
            self.counts.count(caller, True)
            log.warning("placement (%s): no choice meets the %s policy: refused (%s)", caller,
                        self.rules.policy, detail)
            raise PlacementNotMet(
                f"strict {self.rules.policy}-aware placement: the writable bookies cannot "
                f"give every write set of {write_quorum} the spread the policy needs (best "
                f"choice: {detail}); add bookies in other "
                f"{'hosts' if self.rules.policy == 'host' else self.rules.policy + 's'} or "
                f"turn strict placement off")
        if self._fails(chosen, range(len(chosen)), write_quorum, where):
            self.counts.count(caller, False)
            log.info("placement (%s): does not meet the %s policy, placed anyway: %s", caller,
                     self.rules.policy, detail)
        return chosen

    def _best(self, fixed: list, write_quorum: int, candidates, where) -> tuple[str, ...]:
        """PP2: the best of PASSES greedy passes filling the ``None`` positions."""
        best, best_score = None, None
        for _ in range(PASSES):
            filled = self._greedy(list(fixed), write_quorum, candidates, where)
            score = _score(self.rules, _places(filled, write_quorum, where))
            if best_score is None or score < best_score:
                best, best_score = filled, score
            if best_score[:3] == (0, 0, 0):
                break
        return tuple(best)

    def _greedy(self, ensemble: list, write_quorum: int, candidates, where) -> list:
        size = len(ensemble)
        for position in [i for i, b in enumerate(ensemble) if b is None]:
            starts = _sets_holding(size, write_quorum, [position])
            best, best_score = [], None
            for candidate in candidates:
                if candidate in ensemble:
                    continue
                ensemble[position] = candidate
                score = _score(self.rules, _places(ensemble, write_quorum, where, starts))
                if best_score is None or score < best_score:
                    best, best_score = [candidate], score
                elif score == best_score:
                    best.append(candidate)
            if not best:
                raise NotEnoughBookies(f"{len(candidates)} candidates for {size} places")
            ensemble[position] = random.choice(best)
        return ensemble
