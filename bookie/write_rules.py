"""The write path's rules about entries and ledgers a bookie already holds, as pure functions:
the node (bookie/node/writes.py) applies them, and the deterministic simulator's in-memory
bookie (tests/support/simulation/bookie.py) calls these same functions, so the two cannot
drift apart.

Invariants:
    W6. A re-add of an entry id the bookie holds is the same entry when its length field
        and its payload equal the held copy's: only the piggybacked LAC and the digest over
        the header may differ. BookKeeper's ledger recovery (LedgerRecoveryOp, then
        PendingAddOp) frames every entry it writes back again, with the recovering
        handle's LAC and the same length, and a real bookie stores such a re-add; refusing
        it made BookKeeper's ``openLedger`` change ensembles for ever
        (docs/bookkeeper-protocol.md §6). The held copy is what is stored again
        (``held_copy``), so an entry's stored bytes never change once written (replay's
        RP2 holds: a journal never carries two different copies of one entry from the add
        path) and the add is answered when that record is durable. A different payload or
        length is another entry under the same id: refused EBADREQ, never overwritten.
    W7. A recovery add reviving a tombstoned ledger (W5 in bookie/node/writes.py) must carry
        the tombstone's master key (``check_revive_key``, before anything changes: bug E,
        a wrong password's entry was stored and served); the revived ledger keeps the
        tombstone's key and digest type and comes back fenced (``revived_state``: bug F, an
        unfenced revived copy acknowledged a zombie writer's add). Fenced is always right:
        GM2 deletes copies of CLOSED ledgers only, so no writer may add to it again, and
        copies placed back are recovery adds, which pass a fence.
    W8. Admission of a write to a ledger the bookie knows, in this order: a tombstone
        refuses (``check_not_deleted``: ids are never reused, W5 aside), a stored key that
        differs refuses Unauthorized (``check_key``, in constant time; a key never set,
        empty or all zero, takes any and is adopted: ``adopted_key``), and a fenced ledger
        refuses every add but a recovery add (``check_fence``). The node (bookie/node/
        runtime.py, writes.py) and the simulator's bookie call these same functions.
"""

from __future__ import annotations

import dataclasses
import hmac

from bookie.entry import METADATA_LENGTH, ZERO_KEY, DigestType
from bookie.errors import BadRequest, Fenced, NoLedger, Unauthorized
from ledgerindex.keys import LedgerState

#: Header bytes a re-add may change (W6): the piggybacked LAC, bytes 16..23
#: (docs/formats.md §6.1); everything from the length field on must match, digest aside.
_LAC_FIELD = slice(16, 24)
_LENGTH_FIELD = slice(24, METADATA_LENGTH)


def same_entry(held, data, digest_type: int) -> bool:
    """W6: whether ``data`` is the held entry framed again (ids are the caller's key). A
    digest type of 0, not known yet (replay before any entry proved one), leaves the
    payload's start unknown: identical bytes only."""
    if held == data:
        return True
    if not digest_type:
        return False
    start = METADATA_LENGTH + _digest_room(DigestType(digest_type))
    return len(held) == len(data) and held[_LENGTH_FIELD] == data[_LENGTH_FIELD] and \
        held[start:] == data[start:]


def _digest_room(digest_type: DigestType) -> int:
    """The bytes behind the header a re-add may change. A DUMMY ledger's entries may still
    carry a digest: BookKeeper's protocol never names the type, and a MAC ledger written
    over ``bookie_port`` is stored as DUMMY (docs/bookkeeper-protocol.md §4), its 20 MAC
    bytes over the header changing with the LAC. So for DUMMY the first 20 bytes are
    skipped, the most any digest takes."""
    if digest_type is DigestType.DUMMY:
        return DigestType.MAC.digest_length
    return digest_type.digest_length


def held_copy(ledger_id: int, entry_id: int, held, data, digest_type: DigestType):
    """W6: what a re-add of ``entry_id`` stores: the held copy when ``data`` is the same
    entry framed again, ``data`` when nothing is held; BadRequest for another entry."""
    if held is None or held == data:
        return data  # identical bytes: the caller's own copy, so a batch keeps its body
    if not same_entry(held, data, digest_type):
        raise BadRequest(f"entry {ledger_id}/{entry_id} already exists with a different "
                         f"payload or length; refusing to overwrite it")
    return held


def check_revive_key(ledger_id: int, tombstone_key: bytes, master_key: bytes) -> None:
    """W7: a revive needs the tombstone's master key (an all-zero or empty one, never set,
    takes any, as a new ledger's first add does)."""
    if tombstone_key.strip(b"\0") and not hmac.compare_digest(bytes(tombstone_key),
                                                              bytes(master_key)):
        raise Unauthorized(f"ledger {ledger_id}: master key differs from the one it was "
                           f"deleted with; not reviving it")


def revived_state(tombstone: LedgerState) -> LedgerState:
    """W7: the live state a tombstone comes back as: empty, fenced, its key and digest type
    kept."""
    return dataclasses.replace(LedgerState(), master_key=tombstone.master_key,
                               digest_type=tombstone.digest_type, fenced=True)


def check_not_deleted(ledger_id: int, exists: bool) -> None:
    """W8: a write to a tombstoned ledger is refused (a recovery add may revive it first,
    W5/W7)."""
    if not exists:
        raise NoLedger(f"ledger {ledger_id} was deleted")


def check_key(ledger_id: int, stored_key: bytes, master_key: bytes) -> None:
    """W8: a write must carry the ledger's key once one is set. Constant time: a request's
    master key is a secret, and a compare that stops at the first differing byte tells an
    outsider how many leading bytes were right."""
    if stored_key not in (b"", ZERO_KEY) and \
            not hmac.compare_digest(bytes(stored_key), bytes(master_key)):
        raise Unauthorized(f"master key does not match ledger {ledger_id}'s")


def adopted_key(stored_key: bytes, master_key: bytes) -> bytes:
    """W8: the ledger's key after an admitted write: the stored one, or the writer's if none
    was set."""
    return master_key if stored_key in (b"", ZERO_KEY) else stored_key


def check_fence(ledger_id: int, fenced: bool, recovery: bool) -> None:
    """W8: a fenced ledger takes recovery adds only (its writer's adds are refused: EN3)."""
    if fenced and not recovery:
        raise Fenced(f"ledger {ledger_id} is fenced")
