"""The disk's own read rates, for benchmarks that compare bookies reading from it (issue 41):
sequential reads of a cold file in 1 MiB requests, and 4 KiB random reads with O_DIRECT (no
page cache, one request at a time, as a bookie's single-entry miss costs). As 1 KiB entries:
a sequential read returns ~1,000 entries a MiB, a random read one entry. And the journal's
floor (``sync_floor``): how many small and large writes a second the disk syncs.

    sudo .venv/bin/python scripts/bench/disk_floor.py [--dir DIR] [--mb 1024] [--seconds 5]
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import sys
import time

MiB = 1024 * 1024
#: A 1 KiB entry as stored: 4 bytes of size, 16 of ids, the payload, and its digest.
ENTRY_ON_DISK = 1024 + 4 + 16 + 8
DROP_CACHES = "/proc/sys/vm/drop_caches"


def cold_caches_possible() -> bool:
    return os.access(DROP_CACHES, os.W_OK)


def drop_caches() -> None:
    """Write back what is dirty, then drop the page cache (root only)."""
    os.sync()
    with open(DROP_CACHES, "w") as handle:
        handle.write("3\n")


def _write_file(path: str, mb: int) -> None:
    block = os.urandom(MiB)
    with open(path, "wb") as handle:
        for _ in range(mb):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())


def _sequential(path: str) -> float:
    drop_caches()
    begun, total = time.monotonic(), 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(MiB):
            total += len(chunk)
    return total / MiB / (time.monotonic() - begun)


def _random(path: str, seconds: float) -> float:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buffer = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    blocks = os.fstat(fd).st_size // 4096
    rng = random.Random(41)
    try:
        begun = time.monotonic()
        reads = 0
        while time.monotonic() - begun < seconds:
            os.preadv(fd, [buffer], rng.randrange(blocks) * 4096)
            reads += 1
        return reads / (time.monotonic() - begun)
    finally:
        os.close(fd)
        buffer.close()


def sync_floor(directory: str, seconds: float = 3.0,
               sizes: tuple[int, ...] = (4096, 512 * 1024), file_mb: int = 64) -> dict:
    """The disk's journal floor: for each size, writes of that size into a file written
    and synced first (as both bookies' journals preallocate theirs), each followed by
    ``fdatasync``, one at a time for ``seconds``: {size: (syncs/s, MB/s)}. A journal that
    syncs a group at a time writes at most syncs/s groups a second (512 KiB: both journals'
    largest group, our group_max_bytes and BookKeeper's journalBufferedWritesThreshold)."""
    path = os.path.join(directory, "disk-floor-sync.bin")
    found = {}
    try:
        for size in sizes:
            block = os.urandom(size)
            _write_file(path, file_mb)
            fd = os.open(path, os.O_WRONLY)
            try:
                begun, syncs, offset = time.monotonic(), 0, 0
                while time.monotonic() - begun < seconds:
                    os.pwrite(fd, block, offset)
                    os.fdatasync(fd)
                    syncs += 1
                    offset = (offset + size) % (file_mb * MiB)
                took = time.monotonic() - begun
            finally:
                os.close(fd)
            found[size] = (syncs / took, syncs * size / MiB / took)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return found


def say_sync_floor(found: dict) -> str:
    return "; ".join(f"{size // 1024} KiB writes each synced: {rate:,.0f} syncs/s = "
                     f"{mb_s:,.1f} MB/s" for size, (rate, mb_s) in found.items())


def disk_floor(directory: str, mb: int = 1024, seconds: float = 5.0) -> dict:
    path = os.path.join(directory, "disk-floor.bin")
    try:
        _write_file(path, mb)
        seq = _sequential(path)
        iops = _random(path, seconds)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return {"seq_mb_s": seq, "seq_entries_s": seq * MiB / ENTRY_ON_DISK, "random_iops": iops}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if not cold_caches_possible():
        print(f"needs root: a cold read drops the page cache ({DROP_CACHES})")
        return 2
    floor = disk_floor(args.dir, args.mb, args.seconds)
    print(f"sequential {floor['seq_mb_s']:,.0f} MB/s = {floor['seq_entries_s']:,.0f} entries/s "
          f"of 1 KiB; random 4 KiB {floor['random_iops']:,.0f} reads/s")
    print(say_sync_floor(sync_floor(args.dir, min(args.seconds, 3.0))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
