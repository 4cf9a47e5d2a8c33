"""The older ``ledgers`` values of this project, written the way it wrote them (BKLD version 2
or 1, raw usage-pending ids): fixtures for the reader and the carry-over tests
(ledgerindex/bkld_legacy.py, ledgerindex/index_upgrade.py). The product never writes these."""

from __future__ import annotations

import struct

from ledgerindex.bkld_legacy import (FLAG_EXISTS, FLAG_EXPLICIT_LAC, FLAG_FENCED, FLAG_LIMBO,
                                     STATE_HEADER, STATE_LAC_LENGTH, STATE_MAGIC, STATE_USAGE)
from ledgerindex.keys import LedgerState


def encode_bkld(state: LedgerState, version: int = 2) -> bytes:
    """``state`` as BKLD ``version`` (1: no usage trailer)."""
    flags = ((FLAG_EXISTS if state.exists else 0) | (FLAG_FENCED if state.fenced else 0)
             | (FLAG_LIMBO if state.limbo else 0))
    body = b""
    if state.explicit_lac is not None:
        flags |= FLAG_EXPLICIT_LAC
        body = bytes(state.explicit_lac)
    key = bytes(state.master_key)
    out = (STATE_HEADER.pack(STATE_MAGIC, version, flags, state.digest_type, len(key)) + key
           + STATE_LAC_LENGTH.pack(len(body)) + body)
    if version == 2:
        out += STATE_USAGE.pack(state.entry_count, state.byte_count)
    return out


def encode_raw_pending(ledger_ids) -> bytes:
    """The older usage-pending value: the ids, ascending, i64 BE each."""
    ids = sorted(set(ledger_ids))
    return struct.pack(f">{len(ids)}q", *ids)
