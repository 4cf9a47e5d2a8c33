"""Which keys hold a ledger's state on disk: tombstones out of BookKeeper's key space (K7) and
a record at key L winning over the tombstone of L (LR1, LR3 in ledgerindex/ledger_records.py)."""

from __future__ import annotations

import pytest

from bookie.entry import master_key
from bookie.errors import IOFailure
from ledgerindex import keys
from ledgerindex.keys import LedgerState
from ledgerindex.kv import KeyValueStore
from ledgerindex.ledgers import LedgerMetadataIndex

KEY = master_key(b"secret")
BK_VALUE = bytes.fromhex("0801" "1000" "1a14") + KEY


def disk(path) -> dict[bytes, bytes]:
    with KeyValueStore.open(path, read_only=True) as kv:
        return dict(kv.items())


def test_delete_moves_the_state_off_key_l_and_revive_and_purge_move_it_back(tmp_path):
    path = tmp_path / "ledgers"
    index = LedgerMetadataIndex.open(path)
    try:
        index.set_master_key(7, KEY, 3)
        index.flush()
        assert keys.encode_ledger_key(7) in disk(path)
        index.mark_deleted(7)
        values = disk(path)
        assert keys.encode_ledger_key(7) not in values  # BookKeeper: ledger 7 does not exist
        assert keys.decode_ledger_state(values[keys.encode_tombstone_key(7)]) == LedgerState(
            exists=False, master_key=KEY, digest_type=3, entry_count=0, byte_count=0)
        index.revive(7, lambda tomb: tomb.with_(exists=True, fenced=True))
        values = disk(path)
        assert keys.encode_tombstone_key(7) not in values
        assert keys.decode_ledger_state(values[keys.encode_ledger_key(7)]).fenced
        index.mark_deleted(7)
        index.purge(7)
        assert not {keys.encode_ledger_key(7), keys.encode_tombstone_key(7)} & set(disk(path))
    finally:
        index.close()


def test_a_tombstone_survives_reopen_and_keeps_replay_out(tmp_path):
    path = tmp_path / "ledgers"
    index = LedgerMetadataIndex.open(path)
    index.mark_deleted(9)  # never seen: replay must not create it
    index.close()
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.is_deleted(9) and index.deleted_ids() == [9] and len(index) == 0
    finally:
        index.close()


def test_a_record_bookkeeper_wrote_at_l_after_our_delete_wins(tmp_path):
    path = tmp_path / "ledgers"
    index = LedgerMetadataIndex.open(path)
    index.set_master_key(5, KEY)
    index.flush()
    index.mark_deleted(5)
    index.close()
    with KeyValueStore.open(path) as kv:  # BookKeeper's replay or a recovery add re-created 5
        kv.put(keys.encode_ledger_key(5), BK_VALUE, sync=True)
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.get(5) == LedgerState(master_key=KEY) and not index.is_deleted(5)
        index.set_fenced(5)
        index.flush()  # the ledger's next write drops the stale tombstone
    finally:
        index.close()
    values = disk(path)
    assert keys.encode_tombstone_key(5) not in values
    assert keys.decode_ledger_state(values[keys.encode_ledger_key(5)]).fenced


@pytest.mark.parametrize("key", [b"\x00\x01", bytes(12), bytes.fromhex("ffffffffffff4ff4") * 2])
def test_a_key_of_no_known_shape_is_refused_naming_it(tmp_path, key):
    path = tmp_path / "ledgers"
    with KeyValueStore.open(path) as kv:
        kv.put(key, BK_VALUE, sync=True)
    with pytest.raises(IOFailure, match=f"RocksDB {path}: ledgers key of {len(key)} bytes"):
        LedgerMetadataIndex.open(path)


def test_a_tombstone_key_holding_a_live_value_is_corruption(tmp_path):
    path = tmp_path / "ledgers"
    with KeyValueStore.open(path) as kv:
        kv.put(keys.encode_tombstone_key(3), keys.encode_ledger_state(LedgerState()), sync=True)
    with pytest.raises(IOFailure, match="tombstone of ledger 3 is not a LedgerData"):
        LedgerMetadataIndex.open(path)
