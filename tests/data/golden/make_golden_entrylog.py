"""Writes the golden entry logs of tests/data/golden/ with the project's own writer.

    .venv/bin/python tests/data/golden/make_golden_entrylog.py

entrylog-finalized.log    log 2a: 4 ledgers, every digest type, one ledgersMap batch
entrylog-unfinalized.log  log 2b: the same entries, header offset 0 (active at a crash)

tests/contract/test_golden_entrylog.py regenerates both in memory, compares them with the
files byte for byte, and reads them with ported BookKeeper rules (docs/formats.md §10). The
two-batch case (10,001 ledgers, 611 KB) is generated inside that test instead.
"""

from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bookie.disk import OsDisk  # noqa: E402
from bookie.entry import DigestType, frame_entry, mac_key  # noqa: E402
from entrylog.writer import BufferedLogChannel  # noqa: E402

GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))
FINALIZED = ("entrylog-finalized.log", 0x2A, True)
UNFINALIZED = ("entrylog-unfinalized.log", 0x2B, False)
LEDGERS = {0: DigestType.CRC32C, 1: DigestType.CRC32, 2**40 + 5: DigestType.MAC,
           7: DigestType.DUMMY}


def golden_records() -> list[tuple[int, bytes]]:
    """Entries in checkpoint order, (ledgerId, entryId), 3 per ledger."""
    records = []
    for ledger_id in sorted(LEDGERS):
        digest_type = LEDGERS[ledger_id]
        key = mac_key(b"secret") if digest_type is DigestType.MAC else None
        length = 0
        for entry_id in range(3):
            payload = b"golden %d/%d " % (ledger_id, entry_id) * (entry_id + 1)
            length += len(payload)
            records.append((ledger_id, frame_entry(ledger_id, entry_id, entry_id - 1, length,
                                                   payload, digest_type, key)))
    return records


def build(log_id: int, finalize: bool) -> tuple[bytes, list[int]]:
    """The log's bytes and each record's location, written by BufferedLogChannel."""
    with tempfile.TemporaryDirectory() as ledger_dir:
        channel = BufferedLogChannel.create(OsDisk(), ledger_dir, log_id)
        locations = [channel.add_entry(ledger_id, entry) for ledger_id, entry in
                     golden_records()]
        if finalize:
            channel.finalize()
        else:
            channel.flush_and_sync()
            channel.close()
        with open(channel.path, "rb") as handle:
            return handle.read(), locations


def main() -> None:
    for name, log_id, finalize in (FINALIZED, UNFINALIZED):
        data, _ = build(log_id, finalize)
        with open(os.path.join(GOLDEN_DIR, name), "wb") as handle:
            handle.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
