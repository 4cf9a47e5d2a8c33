"""Which ``ledgers`` records hold which ledger states: reading every key at open, and the
RocksDB writes of one state. docs/formats.md §7.2; the keys and values are ``keys``'.

Invariants:
    LR1. A record at key L wins over the tombstone of L. Our bookie writes "delete L + put
         tombstone" and "put L + delete tombstone" each as one atomic batch, so both exist
         only when BookKeeper re-created L after our delete (a replayed or recovery add):
         BookKeeper's write is the newer. The stale tombstone is deleted by the ledger's next
         state write (``writes_for``).
    LR2. While the format key is absent (an index not carried over yet, or carried over half
         way before a crash), each key may hold the old form or the new: BKLD or
         ``LedgerData`` at L, a tombstone at L (exists=0) or under its own key, a raw or a
         wrapped usage-pending value. Both forms load to the same states, so a carry-over
         killed at any point loads as if it had not started. Once the format key is there,
         an old-form value is corruption.
    LR3. A key that is neither a ledger (8 bytes >= 0), a tombstone key nor an 8-byte
         negative key is refused: nothing may sit where BookKeeper's loader would read past
         a key's end (keys shorter than 8 bytes) or where we do not know what it means.
"""

from __future__ import annotations

import dataclasses

from bookie.errors import IOFailure
from ledgerindex import keys
from ledgerindex.keys import LedgerState


@dataclasses.dataclass
class LoadedRecords:
    """Everything one pass over a ``ledgers`` RocksDB found (``load``)."""

    states: dict[int, LedgerState] = dataclasses.field(default_factory=dict)
    #: Ledgers with a tombstone key on disk: a state write of L must delete it (LR1).
    tombstone_keys: set[int] = dataclasses.field(default_factory=set)
    #: Ledgers whose record on disk is in an older form (BKLD at L): the carry-over's work.
    old_form: set[int] = dataclasses.field(default_factory=set)
    #: Ids named by the usage-pending key (M6), [] when absent.
    pending: list[int] = dataclasses.field(default_factory=list)
    pending_present: bool = False
    format_present: bool = False
    #: The writer mark's newest journal id, None when absent.
    writer_mark: int | None = None
    #: Values per form (keys.FORM_*), and negative keys left untouched (M4).
    forms: dict[str, int] = dataclasses.field(default_factory=dict)
    reserved_key_count: int = 0


def load(items, path) -> LoadedRecords:
    """Read every (key, value) of ``items``; IOFailure naming ``path`` and the key on
    anything this bookie cannot take for what it is (LR2, LR3)."""
    found = LoadedRecords()
    tombstones: dict[int, LedgerState] = {}
    raw_pending = None
    for key, value in items:
        ledger_id = keys.decode_tombstone_key(key)
        if ledger_id is not None:
            tombstones[ledger_id] = _tombstone(path, ledger_id, value)
            continue
        ledger_id = _ledger_id_of(path, key)
        if ledger_id >= 0:
            state, form = _decode(path, ledger_id, value)
            found.states[ledger_id] = state
            found.forms[form] = found.forms.get(form, 0) + 1
            if form == keys.FORM_BKLD:
                found.old_form.add(ledger_id)
        elif ledger_id == keys.USAGE_PENDING_LEDGER_ID:
            raw_pending = bytes(value)
        elif ledger_id == keys.FORMAT_LEDGER_ID:
            _marker(path, "format key", value)
            found.format_present = True
        elif ledger_id == keys.WRITER_MARK_LEDGER_ID:
            found.writer_mark = _marker(path, "writer mark", value).journal_id
        else:
            found.reserved_key_count += 1
    if found.format_present and found.forms.get(keys.FORM_BKLD):
        raise IOFailure(f"RocksDB {path}: {found.forms[keys.FORM_BKLD]} BKLD values in an index "
                        f"whose format key says every value is LedgerData (LR2)")
    for ledger_id, tombstone in tombstones.items():
        found.tombstone_keys.add(ledger_id)
        found.states.setdefault(ledger_id, tombstone)  # LR1: a record at L wins
    if raw_pending is not None:
        found.pending = _pending(path, raw_pending, raw_allowed=not found.format_present)
        found.pending_present = True
    return found


def _ledger_id_of(path, key: bytes) -> int:
    try:
        return keys.decode_ledger_key(key)
    except ValueError as error:
        raise IOFailure(f"RocksDB {path}: {error}") from error


def _decode(path, ledger_id: int, value: bytes) -> tuple[LedgerState, str]:
    try:
        return keys.decode_ledger_value(value)
    except keys.LedgerStateCorrupt as error:
        raise IOFailure(
            f"RocksDB {path}: ledger {ledger_id}: corrupt state: {error}") from error


def _tombstone(path, ledger_id: int, value: bytes) -> LedgerState:
    state, form = _decode(path, ledger_id, value)
    if state.exists or form != keys.FORM_OURS:
        raise IOFailure(f"RocksDB {path}: tombstone of ledger {ledger_id} is not a LedgerData "
                        f"with exists=false and the bookie extension")
    return state


def _marker(path, name: str, value: bytes):
    try:
        return keys.decode_marker(value)
    except keys.LedgerStateCorrupt as error:
        raise IOFailure(f"RocksDB {path}: {name}: {error}") from error


def _pending(path, value: bytes, raw_allowed: bool) -> list[int]:
    try:
        return keys.decode_usage_pending(value, raw_allowed=raw_allowed)
    except keys.LedgerStateCorrupt as error:
        raise IOFailure(f"RocksDB {path}: usage-pending key: {error}") from error


def writes_for(ledger_id: int, state: LedgerState, found: LoadedRecords
               ) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """(puts, deletes) that make the disk say ``state`` for ``ledger_id``, for one atomic
    batch. A live state goes to key L, a tombstone to its own key (K7). ``found``'s
    tombstone keys are updated as if the batch was written: if it fails, a stale tombstone
    may stay beside a live record, which LR1 resolves at the next load."""
    value = keys.encode_ledger_state(state)
    if state.exists:
        deletes = [keys.encode_tombstone_key(ledger_id)] if ledger_id in found.tombstone_keys \
            else []
        found.tombstone_keys.discard(ledger_id)
        return [(keys.encode_ledger_key(ledger_id), value)], deletes
    found.tombstone_keys.add(ledger_id)
    # Key L is deleted even when not known to be there: BookKeeper may have created it since.
    return [(keys.encode_tombstone_key(ledger_id), value)], [keys.encode_ledger_key(ledger_id)]


def writes_for_all(states, found: LoadedRecords
                   ) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """``writes_for`` of every (ledger id, state) of ``states``, in ledger order, for one batch."""
    puts: list[tuple[bytes, bytes]] = []
    deletes: list[bytes] = []
    for ledger_id, state in sorted(states):
        more_puts, more_deletes = writes_for(ledger_id, state, found)
        puts += more_puts
        deletes += more_deletes
    return puts, deletes


def purge_deletes(ledger_id: int, found: LoadedRecords) -> list[bytes]:
    """The deletes that forget ``ledger_id`` entirely: its tombstone key and key L."""
    found.tombstone_keys.discard(ledger_id)
    return [keys.encode_tombstone_key(ledger_id), keys.encode_ledger_key(ledger_id)]
