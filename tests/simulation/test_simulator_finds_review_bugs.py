"""The simulator finds the review's bugs (issue 35, commit babee57) when their old rule is put
back: for each, a seed that holds with the real rules (bookie/write_rules.py, which the
simulator's bookie calls) and breaks the named property with the rule before babee57,
monkeypatched into write_rules for the test only. Seeds found by scanning with
scripts/drill/simulate_cluster.py's run_seed under the old rule.
"""

from __future__ import annotations

import pytest

from bookie import write_rules
from bookie.errors import BadRequest
from ledgerindex.keys import LedgerState
from tests.support.simulation.scenario import run_seed
from tests.support.simulation.shrink import report


# -- the rules before babee57 ----------------------------------------------------------------

def held_copy_before_babee57(ledger_id, entry_id, held, data, digest_type):
    """The rule before babee57: a re-add of an entry held was refused BadRequest unless its
    bytes were identical, so BookKeeper's recovery framing (a new LAC) was refused."""
    if held is not None and held != data:
        raise BadRequest(f"entry {ledger_id}/{entry_id} already exists with different "
                         f"bytes; refusing to overwrite it")
    return data


def check_revive_key_before_babee57(ledger_id, tombstone_key, master_key):
    """The rule before babee57: a revive checked no key (bug E)."""


def revived_state_before_babee57(tombstone):
    """The rule before babee57: the tombstone came back as a new ledger, no key, unfenced
    (bugs E and F)."""
    return LedgerState()


def _violations(seed: int, prefix: str) -> list[str]:
    return [v for v in run_seed(seed).violations if v.startswith(prefix)]


# -- the recovery refusal ----------------------------------------------------------------

#: Seed 6: E/Qw/Qa 5/5/3, the writer paused (a zombie) after one acknowledgement, two racing
#: recoveries, recovery's write-back framed again (reframe). Every recovery-add of an entry a
#: bookie holds carries a new LAC: the old rule refused each one BadRequest, recovery found
#: no bookie to replace them all and gave up (RecoveryUndecided) in every round, healed or
#: not: LIVE, the ledger stays IN_RECOVERY.
REFUSAL_SEED = 6


def test_the_recovery_refusal_holds_with_w6():
    outcome = run_seed(REFUSAL_SEED)
    assert outcome.plan.reframe and outcome.reframed > 0
    assert not outcome.violations, report(outcome, trace_lines=300)


def test_the_recovery_refusal_is_found_with_the_rule_before_babee57(monkeypatch):
    monkeypatch.setattr(write_rules, "held_copy", held_copy_before_babee57)
    outcome = run_seed(REFUSAL_SEED)
    assert "LIVE: the ledger is still IN_RECOVERY at the end" in outcome.violations, \
        report(outcome, trace_lines=120)
    assert any("recovery-add e0..7: BadRequest" in line for line in outcome.trace.lines())


# -- bug E: a wrong password's recovery add lifted a tombstone -------------------------------

#: Seed 3: E/Qw/Qa 3/2/2. After the close, b3 crashes and a worker replaces it; back with
#: its old id its GC deletes its copy (a tombstone with the ledger's key). Late, a client
#: with the wrong password sends b3 a recovery add: the old rule lifted the tombstone before
#: any key check and the revived ledger had no key, so the entry was stored (and then the
#: same password's plain add too): AUTH. With W7 both are refused Unauthorized.
BUG_E_SEED = 3


def test_bug_e_holds_with_w7():
    outcome = run_seed(BUG_E_SEED)
    assert outcome.plan.intruder == "late" and outcome.wrong_password_refusals > 0
    assert any("intruder->b3 intruder recovery-add e0: Unauthorized" in line
               for line in outcome.trace.lines())
    assert not outcome.violations, report(outcome, trace_lines=300)


def test_bug_e_is_found_with_the_rule_before_babee57(monkeypatch):
    monkeypatch.setattr(write_rules, "check_revive_key", check_revive_key_before_babee57)
    monkeypatch.setattr(write_rules, "revived_state", revived_state_before_babee57)
    assert "AUTH: b3 took a wrong password's recovery-add e0 on its tombstone" in \
        _violations(BUG_E_SEED, "AUTH")


# -- bug F: the revived copy came back unfenced ----------------------------------------------

#: Seed 2079: E/Qw/Qa 3/3/1, a zombie writer paused after e0..e8 on [b3,b0,b2]. Recovery
#: closes at 8; a worker moves b0's copy to b1 and b0's GC deletes its own (a tombstone);
#: in the return phase b1 crashes and a worker places the copy on b0 again, a revive. The
#: zombie resumes and appends e9 to [b3,b0,b2]: the old rule's revived copy on b0 was
#: unfenced and acknowledged it, which at Qa=1 acknowledges e9 past the close: S2 (and S5,
#: the close below it). With W7 the revived copy is fenced and e9 is refused.
BUG_F_SEED = 2079


def test_bug_f_holds_with_w7():
    outcome = run_seed(BUG_F_SEED)
    assert outcome.plan.zombie and outcome.plan.zombie_late and outcome.revived >= 1
    assert not outcome.violations, report(outcome, trace_lines=300)


@pytest.mark.parametrize("key_kept", [False, True])
def test_bug_f_is_found_with_the_rule_before_babee57(monkeypatch, key_kept):
    """With the old revived state whole, and with only its fence taken back (the key kept):
    it is the missing fence that acknowledges the zombie's add."""
    if key_kept:
        def unfenced(tombstone):
            return LedgerState(master_key=tombstone.master_key,
                               digest_type=tombstone.digest_type)
        monkeypatch.setattr(write_rules, "revived_state", unfenced)
    else:
        monkeypatch.setattr(write_rules, "revived_state", revived_state_before_babee57)
    assert "S2: e9 acknowledged after recovery#1 closed the ledger at 8" in \
        _violations(BUG_F_SEED, "S2")
