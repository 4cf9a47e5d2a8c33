"""ledgerindex.ledgers: LedgerMetadataIndex (docs/formats.md §7.2) over a real RocksDB."""

from __future__ import annotations

import threading

import pytest

from bookie.entry import DigestType, master_key
from bookie.errors import IOFailure, NoLedger, Unauthorized
from ledgerindex import keys
from ledgerindex.keys import LedgerState
from ledgerindex.kv import KeyValueStore
from ledgerindex.ledgers import LedgerMetadataIndex

KEY = master_key(b"secret")
OTHER_KEY = master_key(b"other")
ZERO_KEY = bytes(20)
#: BookKeeper's LedgerData{exists: true, fenced: false, masterKey: KEY}, as protobuf-java
#: writes it: 08 01 | 10 00 | 1a 14 <20 bytes>.
BK_VALUE = bytes.fromhex("0801" "1000" "1a14") + KEY
STORAGE_STATE_KEY = bytes.fromhex("ffffffffffff1103")
STORAGE_STATE_VALUE = (1).to_bytes(8, "big")


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledgers"


@pytest.fixture
def index(path):
    index = LedgerMetadataIndex.open(path)
    yield index
    index.close()


def reopen(index: LedgerMetadataIndex, path) -> LedgerMetadataIndex:
    index.close()
    return LedgerMetadataIndex.open(path)


def raw_values(path) -> dict[bytes, bytes]:
    with KeyValueStore.open(path, read_only=True) as kv:
        return dict(kv.items())


def seed(path, items: dict[bytes, bytes]) -> None:
    with KeyValueStore.open(path) as kv:
        kv.write_batch(list(items.items()))


# --- state rules (LedgerMetadataIndex.setMasterKey) -------------------------------------


def test_new_ledger_exists_unfenced_with_the_key_and_digest_type(index):
    state = index.set_master_key(1, KEY, DigestType.CRC32C)
    # A new ledger holds nothing yet, so its usage counters are known: 0 and 0 (K5).
    assert state == LedgerState(exists=True, fenced=False, master_key=KEY, digest_type=3,
                                entry_count=0, byte_count=0)
    assert index.get(1) == state and index.dirty_count == 1


def test_same_key_again_changes_nothing(index):
    index.set_master_key(1, KEY, 3)
    index.flush()
    assert index.set_master_key(1, KEY, 3).master_key == KEY
    assert index.dirty_count == 0


def test_stored_zero_key_is_replaced(index):
    index.set(1, LedgerState(master_key=ZERO_KEY))
    assert index.set_master_key(1, KEY).master_key == KEY


def test_stored_empty_key_counts_as_all_zeros(index):
    index.set(1, LedgerState(master_key=b""))
    assert index.set_master_key(1, KEY).master_key == KEY


def test_different_key_is_unauthorized_naming_the_ledger(index):
    index.set_master_key(1, KEY)
    with pytest.raises(Unauthorized, match="ledger 1: master key differs"):
        index.set_master_key(1, OTHER_KEY)
    assert index.get(1).master_key == KEY


def test_given_zero_key_is_accepted_unchanged_as_bookkeeper_does(index):
    index.set_master_key(1, KEY)
    assert index.set_master_key(1, ZERO_KEY).master_key == KEY


def test_unknown_digest_type_is_filled_and_a_known_one_kept(index):
    index.set_master_key(1, KEY)
    assert index.get(1).digest_type == 0
    assert index.set_master_key(1, KEY, DigestType.MAC).digest_type == 2
    assert index.set_master_key(1, KEY, DigestType.CRC32).digest_type == 2


def test_fence_limbo_and_explicit_lac(index):
    index.set_master_key(1, KEY)
    assert index.set_fenced(1) is True
    assert index.set_fenced(1) is False
    index.set_limbo(1)
    body = bytes(16) + b"\x01\x02\x03\x04"
    index.set_explicit_lac(1, body)
    assert index.get(1) == LedgerState(fenced=True, limbo=True, master_key=KEY,
                                       explicit_lac=body, entry_count=0, byte_count=0)


def test_updates_of_an_unknown_ledger_are_no_ledger(index):
    with pytest.raises(NoLedger, match="ledger 9 does not exist"):
        index.set_fenced(9)


@pytest.mark.parametrize("ledger_id", [-1, 2**63])
def test_ledger_ids_outside_i64_range_are_refused(index, ledger_id):
    with pytest.raises(ValueError, match="not in 0..2\\*\\*63-1"):
        index.set_master_key(ledger_id, KEY)


# --- flush and reopen -------------------------------------------------------------------


def test_flush_writes_dirty_states_once_as_ledger_data_with_the_extension(index, path):
    index.set_master_key(1, KEY, 3)
    index.set_master_key(2, KEY, 3)
    assert index.flush() == 2
    assert index.flush() == 0
    index = reopen(index, path)
    try:
        assert index.get(1) == LedgerState(master_key=KEY, digest_type=3, entry_count=0,
                                           byte_count=0)
        assert index.ledger_ids() == [1, 2]
    finally:
        index.close()
    value = raw_values(path)[keys.encode_ledger_key(1)]
    assert value[:2] == b"\x08\x01" and keys.decode_ledger_value(value)[1] == keys.FORM_OURS


def test_close_does_not_flush(index, path):
    # States reach disk only at a checkpoint; until then the journal is their durable copy.
    index.set_master_key(1, KEY)
    index = reopen(index, path)
    try:
        assert index.get(1) is None
    finally:
        index.close()


def test_ledger_ids_are_sorted_from_start_up_to_limit(index):
    for ledger_id in (50, 3, 7, 0, 2**63 - 1):
        index.set_master_key(ledger_id, KEY)
    index.mark_deleted(7)
    assert index.ledger_ids() == [0, 3, 50, 2**63 - 1]
    assert index.ledger_ids(start=4, limit=2) == [50, 2**63 - 1]
    assert len(index) == 4


# --- deletion: a synced tombstone (docs/design.md §1.3) --------------------------------------


def test_deleted_ledger_is_a_tombstone_that_refuses_changes(index):
    index.set_master_key(1, KEY)
    assert index.mark_deleted(1) is True
    assert index.get(1).exists is False and index.is_deleted(1)
    assert 1 not in index.ledger_ids()
    with pytest.raises(NoLedger, match="ledger 1 was deleted"):
        index.set_master_key(1, KEY)
    with pytest.raises(NoLedger, match="ledger 1 was deleted"):
        index.set(1, LedgerState(master_key=KEY))
    with pytest.raises(NoLedger, match="ledger 1 was deleted"):
        index.set_fenced(1)


def test_tombstone_is_durable_without_flush(index, path):
    index.set_master_key(1, KEY)
    index.mark_deleted(1)
    assert index.dirty_count == 0
    index = reopen(index, path)
    try:
        assert index.is_deleted(1) and index.get(1).master_key == KEY
    finally:
        index.close()


def test_deleting_an_unknown_ledger_still_writes_a_tombstone(index, path):
    # Replay must not create it from journal records written before the delete.
    assert index.mark_deleted(5) is False
    index = reopen(index, path)
    try:
        assert index.is_deleted(5)
    finally:
        index.close()


def test_set_cannot_delete(index):
    with pytest.raises(ValueError, match="use mark_deleted"):
        index.set(1, LedgerState(exists=False))


def test_purge_removes_a_tombstone_but_not_a_live_ledger(index, path):
    index.set_master_key(1, KEY)
    with pytest.raises(ValueError, match="ledger 1 is live"):
        index.purge(1)
    index.mark_deleted(1)
    assert index.deleted_ids() == [1]
    index.purge(1)
    assert index.get(1) is None and not index.is_deleted(1)
    assert keys.encode_ledger_key(1) not in raw_values_after_close(index, path)


def raw_values_after_close(index, path):
    index.close()
    return raw_values(path)


def test_tombstone_survives_kill_9(path, killed_child):
    killed_child(f"""
        from ledgerindex.ledgers import LedgerMetadataIndex
        index = LedgerMetadataIndex.open({str(path)!r})
        index.set_master_key(3, bytes(range(20)))
        index.mark_deleted(3)
    """)
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.is_deleted(3)
    finally:
        index.close()


def test_synced_flush_survives_kill_9(path, killed_child):
    killed_child(f"""
        from ledgerindex.ledgers import LedgerMetadataIndex
        index = LedgerMetadataIndex.open({str(path)!r})
        index.set_master_key(3, bytes(range(20)), 3)
        index.set_fenced(3)
        index.flush(sync=True)
    """, how="exit")
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.get(3) == LedgerState(fenced=True, master_key=bytes(range(20)),
                                           digest_type=3, entry_count=0, byte_count=0)
    finally:
        index.close()


# --- foreign values: BookKeeper's protobuf and storage-state keys ----------------------


def test_bookkeeper_ledger_data_is_read_and_gets_the_extension_on_next_write(path):
    seed(path, {keys.encode_ledger_key(4): BK_VALUE})
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.ledger_data_count == 1
        assert index.get(4) == LedgerState(master_key=KEY, digest_type=0)
        assert index.flush() == 0  # M5: loading alone rewrites nothing
        assert raw_values(path)[keys.encode_ledger_key(4)] == BK_VALUE
        index.set_fenced(4)
        index.flush()
    finally:
        index.close()
    value = raw_values(path)[keys.encode_ledger_key(4)]
    assert keys.decode_ledger_value(value) == (LedgerState(fenced=True, master_key=KEY),
                                               keys.FORM_OURS)


def test_bookkeeper_zero_key_is_replaced(path):
    seed(path, {keys.encode_ledger_key(4): bytes.fromhex("080110001a14") + ZERO_KEY})
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.set_master_key(4, KEY).master_key == KEY
    finally:
        index.close()


def test_storage_state_flags_are_preserved_across_open_flush_close(path):
    seed(path, {STORAGE_STATE_KEY: STORAGE_STATE_VALUE})
    for round_number in range(2):
        index = LedgerMetadataIndex.open(path)
        assert index.reserved_key_count == 1
        assert index.ledger_ids() == list(range(round_number))
        index.set_master_key(round_number, KEY)
        index.mark_deleted(100 + round_number)
        index.flush()
        index.close()
    values = raw_values(path)
    assert values[STORAGE_STATE_KEY] == STORAGE_STATE_VALUE
    assert sorted(keys.decode_ledger_key(k) for k in values if len(k) == 8) == [
        -0xEEFD, keys.FORMAT_LEDGER_ID, 0, 1]
    assert sorted(keys.decode_tombstone_key(k) for k in values if len(k) == 16) == [100, 101]


def test_negative_ids_are_not_ledgers(path):
    seed(path, {STORAGE_STATE_KEY: STORAGE_STATE_VALUE})
    index = LedgerMetadataIndex.open(path)
    try:
        assert index.get(-0xEEFD) is None and len(index) == 0
    finally:
        index.close()


def test_corrupt_state_at_load_names_path_ledger_and_rule(path):
    value = keys.encode_ledger_state(LedgerState(master_key=KEY))[:-1]
    seed(path, {keys.encode_ledger_key(12): value})
    with pytest.raises(IOFailure, match=f"RocksDB {path}: ledger 12: corrupt state: "
                                        "LedgerData field 1000 at offset 26: length 2 runs"):
        LedgerMetadataIndex.open(path)


def test_a_key_of_the_wrong_size_is_an_io_failure(path):
    seed(path, {b"\x01\x02": BK_VALUE})
    with pytest.raises(IOFailure, match="ledgers key of 2 bytes"):
        LedgerMetadataIndex.open(path)


# --- the loop thread mutates while the checkpoint thread flushes ------------------------


class GatedStore:
    """A real store whose next write waits at a sequence point, recording write order."""

    def __init__(self, kv: KeyValueStore) -> None:
        self.kv = kv
        self.path = kv.path
        self.writes: list[tuple[str, object]] = []
        self.gate_next = False
        self.fail_next = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name):
        return getattr(self.kv, name)

    def _arrive(self) -> None:
        if self.fail_next:
            self.fail_next = False
            raise IOFailure(f"RocksDB {self.path}: write batch failed: injected")
        if self.gate_next:
            self.gate_next = False
            self.entered.set()
            assert self.release.wait(timeout=30), "test never released the gate"

    def write_batch(self, puts, *args, **kwargs):
        puts = list(puts)
        self._arrive()
        self.writes.append(("batch", puts))
        return self.kv.write_batch(puts, *args, **kwargs)

    def put(self, key, value, sync=False):
        self._arrive()
        self.writes.append(("put", (key, value)))
        return self.kv.put(key, value, sync)


class ObservedLock:
    """A Lock that says when a second thread starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc_info):
        self._lock.release()


@pytest.fixture
def gated(path):
    store = GatedStore(KeyValueStore.open(path))
    index = LedgerMetadataIndex(store)
    store.writes.clear()  # the format key of a new index (IU3)
    yield index, store
    store.release.set()
    index.close()


def run_in_thread(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args)
    thread.start()
    return thread


def test_a_change_during_flush_stays_dirty_for_the_next_flush(gated, path):
    index, store = gated
    index.set_master_key(1, KEY)
    store.gate_next = True
    flusher = run_in_thread(index.flush)
    assert store.entered.wait(timeout=30)
    index.set_fenced(1)  # the loop thread: must not wait for the flush's I/O
    assert index.dirty_count == 1
    store.release.set()
    flusher.join()
    assert index.dirty_count == 1
    assert index.flush() == 1
    index.close()
    assert keys.decode_ledger_state(raw_values(path)[keys.encode_ledger_key(1)]).fenced


def test_delete_during_flush_is_written_after_it_so_the_tombstone_wins(gated, path):
    index, store = gated
    index._write_lock = observed = ObservedLock()
    index.set_master_key(1, KEY)
    store.gate_next = True
    flusher = run_in_thread(index.flush)
    assert store.entered.wait(timeout=30)
    deleter = run_in_thread(index.mark_deleted, 1)
    assert observed.contended.wait(timeout=30)
    store.release.set()
    flusher.join()
    deleter.join()
    assert [kind for kind, _ in store.writes] == ["batch", "batch"]
    index.close()
    values = raw_values(path)
    assert keys.encode_ledger_key(1) not in values  # K7: BookKeeper sees no ledger 1
    assert keys.decode_ledger_state(values[keys.encode_tombstone_key(1)]).exists is False


def test_a_failed_flush_leaves_its_states_dirty(gated):
    index, store = gated
    index.set_master_key(1, KEY)
    store.fail_next = True
    with pytest.raises(IOFailure, match="injected"):
        index.flush()
    assert index.dirty_count == 1
    assert index.flush() == 1
