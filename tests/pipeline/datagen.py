"""Small generated data dirs with known contents and known damage, for the pipeline.

Not a test module. Used by tests/pipeline and scripts/demo/spark_cluster_demo.sh (``python -m
tests.pipeline.datagen DIR``). Logs are written with the
bookie's own writer (BufferedLogChannel) and journals with journal/format.py's encoders, so
the pipeline reads exactly the bytes a bookie writes. Every fact a test asserts (locations,
per-ledger totals, where damage was planted) is recorded in a ``DataDir`` as it is written,
never recomputed with the code under test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import sys

from bookie.disk import OsDisk
from bookie.entry import DigestType, frame_entry
from entrylog.format import SIZE, split_location
from entrylog.writer import BufferedLogChannel
from journal.format import encode_add, encode_fence, encode_header, encode_master_key

PAYLOAD_POOL_BYTES = 1 << 20


@dataclasses.dataclass
class LogTruth:
    path: str
    log_id: int
    finalized: bool
    #: (ledgerId, entryId) -> (offset of the size field, entry bytes)
    entries: dict[tuple[int, int], tuple[int, bytes]]
    totals: dict[int, int]


@dataclasses.dataclass
class DataDir:
    root: str
    logs: list[LogTruth]
    journals: list[str]
    #: (ledgerId, entryId) -> (offset of the len field, entry) of the journal's adds
    journal_adds: dict[tuple[int, int], tuple[int, bytes]]
    #: (path, offset of the size field, ledgerId, entryId) of every entry damaged on purpose
    damaged: list[tuple[str, int, int, int]] = dataclasses.field(default_factory=list)

    @property
    def ledger_dir(self) -> str:
        return os.path.join(self.root, "ledgers", "current")

    def locations(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(ledgerId, entryId) -> (logId, pos) of every entry written."""
        return {key: (log.log_id, offset + SIZE.size)
                for log in self.logs for key, (offset, _) in log.entries.items()}


def payload_pool(seed: int, size: int = PAYLOAD_POOL_BYTES) -> bytes:
    return random.Random(seed).randbytes(size)


def write_log(ledger_dir: str, log_id: int, records, finalize: bool = True) -> LogTruth:
    """Write ``records`` [(ledgerId, entry bytes)] as log ``log_id`` with the bookie's writer."""
    channel = BufferedLogChannel.create(OsDisk(), ledger_dir, log_id)
    entries = {}
    for ledger_id, entry in records:
        location = channel.add_entry(ledger_id, entry)
        entry_id = int.from_bytes(entry[8:16], "big", signed=True)
        entries[(ledger_id, entry_id)] = (split_location(location)[1] - SIZE.size, entry)
    totals = dict(channel.ledger_totals)
    if finalize:
        channel.finalize()
    else:
        channel.flush_and_sync()
        channel.close()
    return LogTruth(channel.path, log_id, finalize, entries, totals)


def interleaved_records(ledger_ids, entries_per_ledger: int, pool: bytes, rng: random.Random,
                        first_entry_id: int = 0, digest_type=DigestType.CRC32C):
    """Entries of several ledgers interleaved as a bookie's checkpoint writes them."""
    records = []
    for entry_id in range(first_entry_id, first_entry_id + entries_per_ledger):
        for ledger_id in ledger_ids:
            size = rng.randrange(0, 2048)
            start = rng.randrange(0, len(pool) - size)
            payload = pool[start:start + size]
            records.append((ledger_id, frame_entry(ledger_id, entry_id, entry_id - 1,
                                                   entry_id * 2048 + size, payload,
                                                   digest_type)))
    return records


def flip_byte(path: str, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))


def write_journal(journal_dir: str, journal_id: int, ledger_records):
    """A V6 journal: a master key per ledger, its adds, a fence each, then zeros (§3).

    Returns (path, {(ledgerId, entryId): (offset of the record's len field, entry)}).
    """
    path = os.path.join(journal_dir, f"{journal_id:x}.txn")
    parts = [encode_header()]
    position = len(parts[0])
    adds = {}
    seen = set()
    for ledger_id, entry in ledger_records:
        if ledger_id not in seen:
            seen.add(ledger_id)
            parts.append(encode_master_key(ledger_id, bytes(20)))
            position += len(parts[-1])
        entry_id = int.from_bytes(entry[8:16], "big", signed=True)
        adds[(ledger_id, entry_id)] = (position, entry)
        parts.append(encode_add(entry))
        position += len(parts[-1])
    parts.extend(encode_fence(ledger_id) for ledger_id in sorted(seen))
    data = b"".join(parts)
    with open(path, "wb") as handle:
        handle.write(data + bytes(-len(data) % 512 + 4096))
    return path, adds


def generate(root: str, seed: int = 7, damage: bool = True) -> DataDir:
    """A data dir: three finalized logs, one unfinalized (active at a crash), one journal.

    With ``damage``: two entries of log 1 and one of log 3 get a flipped payload byte, one
    entry of log 2 a flipped digest byte. Ledger 5 lives only in log 3 (the active log).
    """
    rng = random.Random(seed)
    pool = payload_pool(seed)
    ledger_dir = os.path.join(root, "ledgers", "current")
    journal_dir = os.path.join(root, "journal", "current")
    os.makedirs(ledger_dir)
    os.makedirs(journal_dir)
    plan = [(0, [1, 2], 0, True), (1, [1, 2, 3], 40, True), (2, [3, 4], 80, True),
            (3, [4, 5], 120, False)]
    logs = [write_log(ledger_dir, log_id, interleaved_records(ledgers, 40, pool, rng, first),
                      finalize) for log_id, ledgers, first, finalize in plan]
    journal, adds = write_journal(journal_dir, 1, interleaved_records([1, 2], 5, pool, rng))
    data = DataDir(root, logs, [journal], journal_adds=adds)
    if damage:
        for log_index, key, where in ((1, (1, 45), "payload"), (1, (3, 70), "payload"),
                                      (2, (4, 90), "digest"), (3, (5, 130), "payload")):
            _damage_entry(data, data.logs[log_index], key, where)
    return data


def _damage_entry(data: DataDir, log: LogTruth, key: tuple[int, int], where: str) -> None:
    offset, entry = log.entries[key]
    # Size field, then 32 header bytes, then the 4-byte CRC32C, then the payload.
    inside = 4 + 32 if where == "digest" else 4 + 36 + (len(entry) - 36) // 2
    assert len(entry) > 36, "damage needs a payload byte"
    flip_byte(log.path, offset + inside)
    data.damaged.append((log.path, offset, key[0], key[1]))


BOOKIE_KEY = bytes.fromhex("e793cbc379107648537183605cd361d3bb789a39")  # password "secret"


#: What ``write_bookie_data_dir`` writes: ledgers 11..14 with CRC32C digests, 15 with
#: DUMMY ones, 30 entries each.
BOOKIE_LEDGERS = (11, 12, 13, 14)
BOOKIE_DUMMY_LEDGER = 15
BOOKIE_ENTRIES_PER_LEDGER = 30


async def write_bookie_data_dir(data_dir: str, ledgers=BOOKIE_LEDGERS,
                                entries_per_ledger: int = BOOKIE_ENTRIES_PER_LEDGER,
                                dummy_ledgers=(BOOKIE_DUMMY_LEDGER,)) -> None:
    """A real bookie (tests/support/servers.py) writes interleaved ledgers over HTTP; logs
    of 16 KiB make it roll several times; ``dummy_ledgers`` use DUMMY digests."""
    from api.client import BookieClient
    from bookie.config import BookieConfig
    from tests.support.servers import running_bookie

    config = BookieConfig(data_dir=data_dir, port=0, entrylog_max_bytes=16 * 1024,
                          checkpoint_interval_ms=3_600_000, journal_prealloc_bytes=1 << 20)
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            for entry_id in range(entries_per_ledger):
                for ledger_id in (*ledgers, *dummy_ledgers):
                    digest = DigestType.DUMMY if ledger_id in dummy_ledgers \
                        else DigestType.CRC32C
                    payload = bytes([entry_id]) * (200 + 10 * ledger_id)
                    await client.add_entry(ledger_id, entry_id, frame_entry(
                        ledger_id, entry_id, entry_id - 1, (entry_id + 1) * len(payload),
                        payload, digest), BOOKIE_KEY, digest_type=digest.header_name)
                if entry_id % 10 == 9:
                    await client.checkpoint()


LIVE_LEDGERS = (1, 2, 4, 5)  # ledger 3 counts as deleted: its bytes are garbage


def write_demo_files(data: DataDir) -> dict:
    """truth.json, live.txt and index.jsonl (an export-index with two planted mismatches)
    beside the data dir, for scripts/demo/spark_cluster_demo.sh and tests/pipeline/cluster_check.py.
    """
    parent = os.path.dirname(data.root.rstrip("/"))
    locations = data.locations()
    dropped, moved = (1, 5), (2, 10)
    rows = []
    for (ledger_id, entry_id), (log_id, pos) in sorted(locations.items()):
        if (ledger_id, entry_id) == dropped:
            continue
        if (ledger_id, entry_id) == moved:
            pos += 1
        rows.append({"ledgerId": ledger_id, "entryId": entry_id, "logId": log_id, "pos": pos})
    with open(os.path.join(parent, "index.jsonl"), "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    with open(os.path.join(parent, "live.txt"), "w") as handle:
        handle.write("\n".join(map(str, LIVE_LEDGERS)) + "\n")
    truth = {
        "damaged": [list(item) for item in data.damaged],
        "totals": {log.path: {str(k): v for k, v in log.totals.items()} for log in data.logs},
        "entries": {f"{key[0]}/{key[1]}": [log.path, offset, hashlib.sha256(entry).hexdigest()]
                    for log in data.logs for key, (offset, entry) in log.entries.items()},
        "live": list(LIVE_LEDGERS),
        "index": [["missing-from-index", *dropped], ["missing-from-logs", *moved]],
    }
    with open(os.path.join(parent, "truth.json"), "w") as handle:
        json.dump(truth, handle)
    return truth


def main(argv: list[str]) -> int:
    """``python -m tests.pipeline.datagen DIR``: generate DIR/data, truth.json, live.txt and
    index.jsonl (scripts/demo/spark_cluster_demo.sh)."""
    data = generate(os.path.join(argv[0], "data"))
    truth = write_demo_files(data)
    print(f"{data.root}: {len(truth['entries'])} entries in {len(data.logs)} logs, "
          f"{len(data.damaged)} damaged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
