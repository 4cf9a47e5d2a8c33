"""RocksDB's own tools and file footers, to check our index as other RocksDB versions see it.

Debian's ``rocksdb-tools`` (``ldb``, ``sst_dump``; RocksDB 7.8 on bookworm) is an older RocksDB
than rocksdict's: what it reads, BookKeeper 4.16/4.17 (RocksDB 7.9/7.10) reads too
(docs/formats.md §7). ``sst_footer`` reads a table file's format version and checksum type
without any RocksDB, so a test can tell what was written whatever ``ldb`` the machine has.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import struct
import subprocess

#: The block-based table's magic number, the last 8 bytes of every SST file (little-endian).
BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
#: The footer is the file's last 53 bytes from format_version 1 on: checksum type (1 byte)
#: first, format_version (u32 LE) and the magic number (u64 LE) last.
FOOTER_BYTES = 53
#: RocksDB's ChecksumType numbers (include/rocksdb/table.h).
CHECKSUM_NAMES = {0: "kNoChecksum", 1: "kCRC32c", 2: "kxxHash", 3: "kxxHash64", 4: "kXXH3"}

INSTALL = "apt-get install -y rocksdb-tools"


def missing() -> str | None:
    """Why Debian's RocksDB tools cannot run here, or None."""
    for tool in ("ldb", "sst_dump"):
        if shutil.which(tool) is None:
            return f"RocksDB's `{tool}` is not installed (Debian: {INSTALL}; scripts/test.sh " \
                   f"installs it)"
    if "RocksDB" not in version():
        return f"`ldb` on PATH is not RocksDB's ({version()!r}); install Debian's: {INSTALL}"
    return None


def version() -> str:
    """``ldb --version``'s line, e.g. ``ldb from RocksDB 7.8.3``."""
    done = subprocess.run(["ldb", "--version"], capture_output=True, text=True, timeout=60)
    return (done.stdout + done.stderr).strip()


def ldb_scan(db_path: str) -> dict[bytes, bytes]:
    """Every key and value of the database at ``db_path``, as ``ldb scan`` reads them.

    ``scan`` opens the database read-only (no lock, nothing written). The database's OPTIONS
    file comes from a newer RocksDB than Debian's, with options 7.8 does not know
    (``metadata_write_temperature`` ...): without ``--ignore_unknown_options`` ldb refuses it
    ("Could not find option"). With it, ldb loads the rest of our options and skips those.
    Raises AssertionError with ldb's own words when it fails.
    """
    done = subprocess.run(["ldb", f"--db={db_path}", "--ignore_unknown_options", "scan",
                           "--hex"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"{version()} could not read {db_path}: "
                             f"{(done.stdout + done.stderr).strip()}")
    pairs = {}
    for line in done.stdout.splitlines():
        key, separator, value = line.partition(" : ")
        assert separator and key.startswith("0x") and value.startswith("0x"), line
        pairs[bytes.fromhex(key[2:])] = bytes.fromhex(value[2:])
    return pairs


def sst_dump_refusals(db_path: str) -> list[str]:
    """What ``sst_dump`` says of each table file it cannot open (none: every file readable)."""
    refused = []
    for path in table_files(db_path):
        done = subprocess.run(["sst_dump", f"--file={path}", "--command=check"],
                              capture_output=True, text=True, timeout=300)
        said = done.stdout + done.stderr
        if done.returncode != 0 or "is not a valid SST file" in said or "Corrupt" in said:
            refused.append(f"{os.path.basename(path)}: {said.strip()}")
    return refused


def table_files(db_path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(db_path, "*.sst")))


@dataclasses.dataclass(frozen=True)
class Footer:
    format_version: int
    checksum: str


def sst_footer(path: str) -> Footer:
    """The format version and checksum type a block-based SST file was written with."""
    with open(path, "rb") as file:
        file.seek(-FOOTER_BYTES, os.SEEK_END)
        footer = file.read(FOOTER_BYTES)
    format_version, magic = struct.unpack("<IQ", footer[-12:])
    assert magic == BLOCK_BASED_MAGIC, f"{path}: not a block-based table ({magic:#x})"
    assert format_version >= 1, f"{path}: a legacy (format 0) footer"
    return Footer(format_version, CHECKSUM_NAMES.get(footer[0], f"unknown {footer[0]}"))


def footers(db_path: str) -> dict[str, Footer]:
    """``sst_footer`` of every table file of the database, by file name."""
    return {os.path.basename(path): sst_footer(path) for path in table_files(db_path)}
