"""What a bookie started on the other implementation's dirs must serve (issue 58), checked over
BookKeeper's protocol (v3) with our BkBookieClient, so the same check runs against our bookie
(tests/cluster/test_bookkeeper_dirs.py, on BookKeeper-written fixtures) and BookKeeper's
(scripts/interop/interop_bookkeeper_our_dirs.py, on dirs ours wrote).

``written`` maps a role to ``{"ledger", "last"[, "explicit_lac"]}``: every entry 0..last reads
back byte for byte as ``payload(ledger, entry)`` and nothing past it; an explicit LAC reads
back as the LAC; a ``fenced`` ledger refuses an add with its own key (Fenced); an open one
refuses a wrong key and then takes an add with its own, which reads back; a ``deleted`` one
has nothing to read. The wrong key goes first, so a key lost on the way (all zeros, which
BookKeeper's ``LedgerMetadataIndex.setMasterKey`` would overwrite) is seen. Ours answers it
EUA (Unauthorized); BookKeeper's answers EIO (IOFailure) while the ledger is not in its
handle cache, from that same check ("Ledger masterKey in db can only be set once")."""

from __future__ import annotations

import struct

import pytest

from api.client.bkport.client import BkBookieClient
from api.client.codec import LedgerCodec
from bookie.errors import Fenced, IOFailure, NoEntry, NoLedger, Unauthorized

ENTRY_SIZE = 1024
AFTER_THE_SWAP = b"after the swap"


def payload(ledger: int, entry: int, size: int = ENTRY_SIZE) -> bytes:
    """FixtureWriter.java's (and RecoveryDrill.java's) payload of (ledger, entry)."""
    head = struct.pack(">qq", ledger, entry)
    return head + bytes((ledger * 131 + entry * 31 + i) & 0xFF for i in range(16, size))


async def served_as_written(address: str, written: dict[str, dict], password: str,
                            digest: str, fenced=(), deleted=(), closed=()) -> list[str]:
    """Every check of the module docstring; the checks made, one line each."""
    made = []
    async with BkBookieClient(address) as client:
        for role, info in written.items():
            ledger, last = info["ledger"], info["last"]
            codec = LedgerCodec.for_password(ledger, password, digest)
            if role in deleted:
                with pytest.raises((NoLedger, NoEntry)):
                    await client.read_entry(ledger, 0)
                made.append(f"{role} (ledger {ledger}): deleted, nothing to read")
                continue
            for entry in range(last + 1):
                got = codec.decode(await client.read_entry(ledger, entry), entry)
                assert got.payload == payload(ledger, entry), (role, entry)
            with pytest.raises(NoEntry):
                await client.read_entry(ledger, last + 1)
            made.append(f"{role} (ledger {ledger}): entries 0..{last} byte for byte")
            if "explicit_lac" in info:  # above the piggybacked LAC (last - 1) of the last add
                assert await client.read_lac(ledger) == info["explicit_lac"], role
                made.append(f"{role}: explicit LAC {info['explicit_lac']}")
            add = codec.frame(last + 1, last, 0, AFTER_THE_SWAP)
            wrong = LedgerCodec.for_password(ledger, b"not the password").master_key
            if role in fenced:
                with pytest.raises(Fenced):
                    await client.add_entry(ledger, last + 1, add, codec.master_key)
                made.append(f"{role}: fenced")
            elif role not in closed:
                with pytest.raises((Unauthorized, IOFailure)):
                    await client.add_entry(ledger, last + 1, add, wrong)
                await client.add_entry(ledger, last + 1, add, codec.master_key)
                assert await client.read_entry(ledger, last + 1) == add
                made.append(f"{role}: master key kept (a wrong one refused)")
    return made
