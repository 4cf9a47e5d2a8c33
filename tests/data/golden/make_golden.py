"""Generate the golden journals beside this file (DESIGN.md §6 "Golden files").

    .venv/bin/python tests/data/golden/make_golden.py

v6.txn is written by the project's writer (journal.journal.Journal, 8 KiB preallocation).
v4.txn and v5.txn are laid out by hand from journal/format.py the way FORMATS.md §3 says Apache
BookKeeper writes them: V4 with its 8-byte header and no padding, V5 with the 512-byte header
and a padding record after every group; both zero-filled to 4 KiB like a preallocated file.
tests/contract/test_golden_journal.py checks the files against FORMATS.md §10 and that this
script still writes exactly them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from bookie.disk import OsDisk  # noqa: E402
from bookie.entry import frame_entry, frame_lac, master_key  # noqa: E402
from journal.format import (  # noqa: E402
    encode_add, encode_explicit_lac, encode_fence, encode_header, encode_master_key,
    padding_record)
from journal.group_commit import GroupCommitPolicy  # noqa: E402
from journal.journal import Journal  # noqa: E402

KEY_1 = master_key(b"secret")
KEY_2 = master_key(b"")
HAND_MADE_BYTES = 4096


def entry(ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    """A CRC32C entry (FORMATS.md §6.1); length = 5 * (entry_id + 1) like the §6.5 vector."""
    return frame_entry(ledger_id, entry_id, entry_id - 1, 5 * (entry_id + 1), payload)


def sized_add(ledger_id: int, entry_id: int, record_size: int) -> bytes:
    """A data record of exactly ``record_size`` bytes (4 + 36 of entry header + payload)."""
    record = encode_add(entry(ledger_id, entry_id, b"g" * (record_size - 40)))
    assert len(record) == record_size
    return record


#: v6.txn's groups, one flush each (None: a FORCE marker, no bytes). Positions noted.
V6_GROUPS = [
    # 512 + 44 + 45 + 415 = 1016: gap 8, padding of 8 bytes with padLen 0 -> 1024
    [encode_master_key(1, KEY_1), encode_add(entry(1, 0, b"hello")), sized_add(1, 1, 415)],
    # 1024 + 44 + 417 + 44 = 1529: gap 7, padLen 511, a 519-byte padding -> 2048
    [encode_master_key(2, KEY_2), sized_add(2, 0, 417),
     encode_explicit_lac(1, frame_lac(1, 1))],
    # 2048 + 20 + 45 + 20 = 2133: padLen 419 -> 2560
    [encode_fence(1), encode_add(entry(2, 1, b"world")), encode_fence(2)],
    # 2560 + 512 = 3072: aligned, no padding
    [sized_add(2, 2, 512), None, None],
    # 3072 + 44 = 3116: padLen 452 -> 3584
    [encode_explicit_lac(2, frame_lac(2, 2)), None, None],
]


def v6_journal() -> bytes:
    """Written by Journal: all groups queued before start, three items per flush."""
    with tempfile.TemporaryDirectory() as directory:
        done = threading.Event()
        journal = Journal(OsDisk(), directory, prealloc_bytes=8192, clock=lambda: 0.0,
                          policy=GroupCommitPolicy(group_entries_max=3),
                          complete_group=lambda tokens, exc: done.set())
        for group in V6_GROUPS:
            assert len(group) == 3
            for record in group:
                journal.submit(record, None)
        journal.submit(None, "last")
        journal.start()
        try:
            assert done.wait(10)
        finally:
            journal.close()
        [name] = os.listdir(directory)
        with open(os.path.join(directory, name), "rb") as handle:
            return handle.read()


def _by_hand(version: int, groups: list[list[bytes]]) -> bytes:
    data = bytearray(encode_header(version))
    for group in groups:
        for record in group:
            data += record
        if version >= 5:
            data += padding_record(len(data))
    assert len(data) <= HAND_MADE_BYTES
    return bytes(data + bytes(HAND_MADE_BYTES - len(data)))


def v5_journal() -> bytes:
    return _by_hand(5, [
        [encode_master_key(1, KEY_1), encode_add(entry(1, 0, b"hello")),
         encode_add(entry(1, 1, b"world"))],
        [encode_fence(1)],
        [encode_master_key(3, KEY_2), sized_add(3, 0, 600)],
    ])


def v4_journal() -> bytes:
    return _by_hand(4, [
        [encode_master_key(1, KEY_1), encode_add(entry(1, 0, b"hello"))],
        [encode_add(entry(1, 1, b"world")), encode_fence(1)],
    ])


GOLDEN = {"v4.txn": v4_journal, "v5.txn": v5_journal, "v6.txn": v6_journal}


def main() -> int:
    for name, build in GOLDEN.items():
        data = build()
        with open(os.path.join(HERE, name), "wb") as handle:
            handle.write(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
