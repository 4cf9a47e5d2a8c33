"""An older ``ledgers`` index (BKLD values, tombstones at key L, a raw usage-pending key) is
carried over to BookKeeper's ``LedgerData`` form at open, and a kill -9 after any batch loses
nothing (IU1-IU3 in ledgerindex/index_upgrade.py, LR2 in ledgerindex/ledger_records.py)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from bookie.entry import master_key
from ledgerindex import keys, ledger_records
from ledgerindex.keys import LedgerState
from ledgerindex.kv import KeyValueStore
from ledgerindex.ledgers import LedgerMetadataIndex
from tests.support.legacy_ledger_state import encode_bkld, encode_raw_pending

KEY = master_key(b"secret")
STORAGE_STATE = (bytes.fromhex("ffffffffffff1103"), (1).to_bytes(8, "big"))
#: ledger -> (value as the older bookie wrote it).
OLD_STATES = {
    1: LedgerState(master_key=KEY, digest_type=3, entry_count=4, byte_count=400),
    2: LedgerState(master_key=KEY, fenced=True, explicit_lac=bytes(24), digest_type=1,
                   entry_count=0, byte_count=0),
    3: LedgerState(exists=False, master_key=KEY, digest_type=3, entry_count=1, byte_count=9),
    4: LedgerState(master_key=KEY, limbo=True, digest_type=2, entry_count=7, byte_count=70),
    6: LedgerState(exists=False, master_key=KEY, fenced=True),
    8: LedgerState(master_key=KEY, digest_type=3, entry_count=2, byte_count=20),
    9: LedgerState(master_key=KEY, digest_type=3),
}
BK_VALUE = bytes.fromhex("0801" "1001" "1a14") + KEY  # ledger 5, as BookKeeper wrote it
PENDING = [4, 8, 11]  # 11: created by the checkpoint that died (a suspect, M6)
BATCH = 2
CHILD = """
import os, signal, sys
from ledgerindex import index_upgrade, ledger_records
from ledgerindex.kv import KeyValueStore
path, kill_after = sys.argv[1], int(sys.argv[2])
kv = KeyValueStore.open(path)
found = ledger_records.load(kv.items(), kv.path)
def after_batch(batch):
    if batch == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
index_upgrade.carry_over(kv, found, batch_ledgers=int(sys.argv[3]), after_batch=after_batch)
"""


def write_old_index(path) -> None:
    items = [(keys.encode_ledger_key(i), encode_bkld(s, version=1 if i == 9 else 2))
             for i, s in OLD_STATES.items()]
    items += [(keys.encode_ledger_key(5), BK_VALUE), STORAGE_STATE,
              (keys.encode_ledger_key(keys.USAGE_PENDING_LEDGER_ID), encode_raw_pending(PENDING))]
    with KeyValueStore.open(path) as kv:
        kv.write_batch(items, sync=True)


def loaded(path) -> ledger_records.LoadedRecords:
    with KeyValueStore.open(path, read_only=True) as kv:
        return ledger_records.load(kv.items(), kv.path)


def seen(found: ledger_records.LoadedRecords) -> dict[int, LedgerState]:
    """The states as the bookie takes them: the pending key's ledgers not known (M6)."""
    return {i: s.with_(entry_count=-1, byte_count=-1) if i in found.pending and s.exists else s
            for i, s in found.states.items()}


def assert_bookkeeper_reads_every_ledger_key(path) -> None:
    """K7: every key BookKeeper parses (first 8 bytes >= 0) is a live ``LedgerData``."""
    with KeyValueStore.open(path, read_only=True) as kv:
        for key, value in kv.items():
            if int.from_bytes(key[:8], "big", signed=True) >= 0:
                state, form = keys.decode_ledger_value(value)
                assert form != keys.FORM_BKLD and state.exists, (key.hex(), value.hex())


@pytest.fixture
def expected(tmp_path):
    path = tmp_path / "reference"
    write_old_index(path)
    found = loaded(path)
    assert not found.format_present and found.pending == PENDING
    return found


@pytest.mark.parametrize("kill_after", range(len(OLD_STATES) // BATCH))
def test_a_carry_over_killed_after_any_batch_loads_the_same_states(tmp_path, expected,
                                                                   kill_after):
    path = tmp_path / "ledgers"
    write_old_index(path)
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), str(kill_after), str(BATCH)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    half = loaded(path)
    assert not half.format_present  # IU3: written last
    assert 0 < len(half.old_form) < len(expected.old_form)  # some ledgers moved, some not
    assert seen(half) == seen(expected) and half.pending == expected.pending  # IU2
    index = LedgerMetadataIndex.open(path)  # the next start finishes the carry-over
    try:
        assert index.upgraded_count == len(half.old_form)
        assert index.get(3).exists is False and index.get(5) == LedgerState(
            fenced=True, master_key=KEY)
    finally:
        index.close()
    done = loaded(path)
    assert done.format_present and not done.old_form and done.pending == PENDING
    assert seen(done) == seen(expected) and done.tombstone_keys == {3, 6}
    assert_bookkeeper_reads_every_ledger_key(path)
    with KeyValueStore.open(path, read_only=True) as kv:
        assert kv.get(STORAGE_STATE[0]) == STORAGE_STATE[1]  # M4
        assert kv.get(keys.encode_ledger_key(5)) == BK_VALUE  # M5: BookKeeper's stays as is


def test_the_pending_ledgers_stay_not_known_across_the_carry_over(tmp_path):
    path = tmp_path / "ledgers"
    write_old_index(path)
    for _ in range(2):  # the second open finds the format key and carries nothing over
        index = LedgerMetadataIndex.open(path)
        try:
            assert not index.get(4).usage_known and not index.get(8).usage_known  # M6
            assert index.get(1).usage_known and index.get(1).entry_count == 4
        finally:
            index.close()
    assert loaded(path).pending == PENDING


def test_a_bkld_value_after_the_format_key_is_corruption(tmp_path):
    path = tmp_path / "ledgers"
    LedgerMetadataIndex.open(path).close()  # a new index: the format key only
    with KeyValueStore.open(path) as kv:
        kv.put(keys.encode_ledger_key(1), encode_bkld(OLD_STATES[1]), sync=True)
    with pytest.raises(Exception, match="1 BKLD values in an index whose format key"):
        LedgerMetadataIndex.open(path)
