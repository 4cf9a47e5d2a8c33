"""One RocksDB database as a bytes-to-bytes store (BookKeeper's KeyValueStorageRocksDB).

The only module that imports ``rocksdict`` (docs/design.md §5 rule 5); the indexes above it see
bytes keys and values, big-endian, compared bytewise (docs/formats.md §7).

Invariants:
    V1. A write with ``sync=True`` returns only after RocksDB has fsynced its WAL, so it
        survives power loss; ``sync=False`` survives ``kill -9`` (A2), not power loss.
    V2. A failed write or read raises ``bookie.errors.IOFailure`` naming the path and the
        operation. It is never retried here (docs/design.md §1.5, A5): the caller goes READ_ONLY.
    V3. A batch is atomic: after a crash all of it or none of it is visible.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator

import rocksdict

from bookie.errors import IOFailure

#: BookKeeper's ``locations`` settings that matter for reading its files: LZ4 blocks
#: (docs/formats.md §7). The rest is tuning, not contract: 64 KiB blocks and a 10-bit bloom filter
#: as in KeyValueStorageRocksDB, for point gets on the read path.
_BLOCK_SIZE_BYTES = 64 * 1024
_BLOOM_BITS_PER_KEY = 10
#: The table file format of every database we write, BookKeeper's default for all of its
#: (KeyValueStorageRocksDB, conf/*_rocksdb.conf.default): block-based format_version 5 with
#: xxHash32 block checksums (kxxHash, ``ChecksumType.xxhash``). rocksdict's RocksDB (9.7, 9.8)
#: would otherwise write format 6 with XXH3, which no RocksDB before 8.6 reads: not Debian's
#: 7.8 ``ldb``, not the RocksDB 7.9/7.10 of BookKeeper 4.16/4.17, so a data dir once opened
#: here could not go back (issue 37; Pulsar issue 22051). RocksDB reads every format whatever
#: this says: a format-6 dir still opens, and only files written from now on (flushes,
#: compactions) take format 5 (docs/formats.md §7.3).
_TABLE_FORMAT_VERSION = 5
#: The only column family our databases (and BookKeeper's) have.
_DEFAULT_COLUMN_FAMILY = "default"
#: RocksDB keeps 1000 info LOG files by default; a long-running bookie needs far fewer.
_KEEP_LOG_FILE_NUM = 10


def _is_status(error: Exception) -> bool:
    """Whether ``error`` is a RocksDB status (V2). rocksdict raises those as plain
    ``Exception``; its subclasses (DbClosedError: use after close) and KeyError (a non-bytes
    key in raw mode) are programmer errors and pass through unchanged."""
    return type(error) is Exception


def _failure(path: str, operation: str, error: Exception) -> IOFailure:
    return IOFailure(f"RocksDB {path}: {operation} failed: {error}")


@contextlib.contextmanager
def _io(path: str, operation: str) -> Iterator[None]:
    """Raise a RocksDB status error in the block as IOFailure naming database and operation.

    The hot ``get`` and ``put`` inline this: a generator context manager costs about a
    microsecond, as much as the RocksDB call itself (measured).
    """
    try:
        yield
    except Exception as error:  # noqa: BLE001 - narrowed by _is_status
        if not _is_status(error):
            raise
        raise _failure(path, operation, error) from error


def _require_existing(path: str) -> None:
    """Refuse a missing database before RocksDB and rocksdict create files in its place."""
    if not os.path.isfile(os.path.join(path, "CURRENT")):
        raise IOFailure(f"RocksDB {path}: open failed: no database there (CURRENT is missing)")


def _check_range(start: bytes, end: bytes) -> None:
    """Refuse a reversed range before RocksDB sees it: RocksDB rejects it only after the WAL
    write and then fails every later write until the database is reopened (measured)."""
    if bytes(start) > bytes(end):
        raise ValueError(f"delete range end {bytes(end).hex()} is below start "
                         f"{bytes(start).hex()}")


def _options(*, lz4: bool, create: bool, secondary: bool) -> rocksdict.Options:
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(create)
    options.set_keep_log_file_num(_KEEP_LOG_FILE_NUM)
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(_TABLE_FORMAT_VERSION)
    table.set_checksum_type(rocksdict.ChecksumType.xxhash())
    if lz4:
        options.set_compression_type(rocksdict.DBCompressionType.lz4())
        table.set_block_size(_BLOCK_SIZE_BYTES)
        table.set_bloom_filter(_BLOOM_BITS_PER_KEY, False)
    options.set_block_based_table_factory(table)
    if secondary:
        # RocksDB requires a secondary instance to keep every table file open.
        options.set_max_open_files(-1)
    return options


class KeyValueStore:
    """A RocksDB database with bytes keys and values (raw mode).

    Thread-safety: RocksDB is safe for concurrent use, and so is this wrapper: the loop
    thread reads while the checkpoint thread writes batches (docs/design.md §3.7). rocksdict
    holds the GIL through ``write``, a synced write's WAL fsync included (measured: a
    126,000-key batch stopped every other thread for 18-25 ms), and releases it in
    ``flush_wal``; so large batches go in chunks (``locations.WRITE_CHUNK``). Only
    ``close`` must not race other calls; its owner calls it after the threads are joined.
    """

    def __init__(self, db: rocksdict.Rdict, path: str, *, read_only: bool) -> None:
        self._db: rocksdict.Rdict | None = db
        self.path = path
        self.read_only = read_only
        self._sync_write = rocksdict.WriteOptions()
        self._sync_write.sync = True
        self._async_write = rocksdict.WriteOptions()
        self._async_write.sync = False

    @classmethod
    def open(cls, path: str | os.PathLike, *, lz4: bool = False, create: bool = True,
             read_only: bool = False, secondary_path: str | os.PathLike | None = None,
             ) -> "KeyValueStore":
        """Open (or create, if ``create``) the database at ``path``.

        ``lz4`` selects LZ4 block compression, as BookKeeper uses for ``locations``; a
        database is readable whatever its blocks were compressed with. ``read_only`` opens
        without the write lock; ``secondary_path`` opens a secondary instance that follows a
        running primary (``catch_up``), for ``bookie shell export-index`` (docs/design.md §8).
        """
        path = os.fspath(path)
        secondary = secondary_path is not None
        if not (create and not read_only and not secondary):
            _require_existing(path)
        options = _options(lz4=lz4, create=create and not (read_only or secondary),
                           secondary=secondary)
        if secondary:
            access = rocksdict.AccessType.secondary(os.fspath(secondary_path))
        elif read_only:
            access = rocksdict.AccessType.read_only(False)
        else:
            access = rocksdict.AccessType.read_write()
        with _io(path, "open"):
            # The options go to the default column family too, by name: given none, rocksdict
            # takes an existing database's column-family options (compression, table format)
            # from its latest OPTIONS file, and ours would reach only new databases (measured
            # with 0.3.29: a format-6 dir kept writing format 6, issue 37).
            db = rocksdict.Rdict(path, options, column_families={_DEFAULT_COLUMN_FAMILY: options},
                                 access_type=access)
        return cls(db, path, read_only=read_only or secondary)

    @property
    def _rdict(self) -> rocksdict.Rdict:
        assert self._db is not None, f"RocksDB {self.path} used after close"
        return self._db

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._rdict.get(key)
        except Exception as error:  # noqa: BLE001 - narrowed by _is_status
            if not _is_status(error):
                raise
            raise _failure(self.path, "get", error) from error

    def put(self, key: bytes, value: bytes, sync: bool = False) -> None:
        options = self._write_options(sync)
        try:
            self._rdict.put(key, value, options)
        except Exception as error:  # noqa: BLE001 - narrowed by _is_status
            if not _is_status(error):
                raise
            raise _failure(self.path, "put", error) from error

    def delete(self, key: bytes, sync: bool = False) -> None:
        with _io(self.path, "delete"):
            self._rdict.delete(key, self._write_options(sync))

    def write_batch(self, puts: Iterable[tuple[bytes, bytes]],
                    deletes: Iterable[bytes] = (),
                    delete_ranges: Iterable[tuple[bytes, bytes]] = (),
                    sync: bool = True) -> int:
        """Apply puts, then deletes, then range deletes ([start, end)) atomically (V3).

        Deletions come last so that in one batch a deletion wins over a put of the same key:
        a delete is the later, durable decision (docs/design.md §1.3). Returns the operation count.
        """
        batch = rocksdict.WriteBatch(raw_mode=True)
        collections.deque(itertools.starmap(batch.put, puts), maxlen=0)  # a C loop
        for key in deletes:
            batch.delete(key)
        for start, end in delete_ranges:
            _check_range(start, end)
            batch.delete_range(start, end)
        count = batch.len()
        if count == 0:
            return 0
        with _io(self.path, f"write batch of {count}"):
            self._rdict.write(batch, self._write_options(sync))
        return count

    def delete_range(self, start: bytes, end: bytes, sync: bool = True) -> None:
        """Delete every key in [start, end) (RocksDB's end is exclusive)."""
        _check_range(start, end)
        with _io(self.path, "delete range"):
            self._rdict.delete_range(start, end, self._write_options(sync))

    def floor(self, key: bytes) -> tuple[bytes, bytes] | None:
        """The entry with the largest key <= ``key``, or None (BookKeeper's getFloor)."""
        with _io(self.path, "floor"):
            iterator = self._rdict.iter()
            iterator.seek_for_prev(key)
            if not iterator.valid():
                return None
            return iterator.key(), iterator.value()

    def items(self, start: bytes | None = None, end: bytes | None = None,
              ) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs with start <= key < end, in key order.

        The iterator reads a consistent snapshot. Exhaust or close it before ``close``: a
        live RocksDB iterator keeps the database (and its lock) open.
        """
        read_options = rocksdict.ReadOptions()
        if end is not None:
            # The bound lets RocksDB stop at ``end`` instead of stepping over range tombstones.
            read_options.set_iterate_upper_bound(end)
        with _io(self.path, "iterate"):
            iterator = self._rdict.iter(read_options)
            if start is None:
                iterator.seek_to_first()
            else:
                iterator.seek(start)
        while True:
            with _io(self.path, "iterate"):
                if not iterator.valid():
                    return
                key, value = iterator.key(), iterator.value()
                iterator.next()
            yield key, value

    def items_list(self, start: bytes, end: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` (key, value) pairs with start <= key < end, in key order, as one
        list: a batch read's range, drained with no Python frame per pair (item_chunks)."""
        read_options = rocksdict.ReadOptions()
        read_options.set_iterate_upper_bound(end)
        with _io(self.path, "iterate"):
            return list(itertools.islice(self._rdict.items(from_key=start, read_opt=read_options),
                                         limit))

    def item_chunks(self, chunk_size: int = 65536) -> Iterator[list[tuple[bytes, bytes]]]:
        """Every (key, value) pair in key order, in lists of up to ``chunk_size``.

        For bulk readers (scrub, export): ``items()`` checks errors around every key, ~1.3 µs
        a key (measured), while the RocksDB iterator underneath yields a pair in ~0.2 µs when
        ``islice`` drains it with no Python frame per pair; the error check here is per chunk.
        """
        pairs = self._rdict.items()
        while True:
            with _io(self.path, "iterate"):
                chunk = list(itertools.islice(pairs, chunk_size))
            if not chunk:
                return
            yield chunk

    def compact_range(self, start: bytes | None = None, end: bytes | None = None) -> None:
        """Compact [start, end] (None: unbounded), e.g. after deleting ledgers."""
        with _io(self.path, "compact range"):
            self._rdict.compact_range(start, end)

    def checkpoint(self, dest_path: str | os.PathLike) -> None:
        """A consistent copy at ``dest_path`` (must not exist), hard-linked where possible."""
        with _io(self.path, f"checkpoint to {os.fspath(dest_path)}"):
            rocksdict.Checkpoint(self._rdict).create_checkpoint(os.fspath(dest_path))

    def catch_up(self) -> None:
        """Secondary instance only: read what the primary has written since."""
        with _io(self.path, "catch up with primary"):
            self._rdict.try_catch_up_with_primary()

    def sync(self) -> None:
        """Write and fsync the WAL, making every earlier ``sync=False`` write durable (V1)."""
        with _io(self.path, "sync WAL"):
            self._rdict.flush_wal(True)

    def property_value(self, name: str) -> str | None:
        """A RocksDB property, e.g. ``rocksdb.estimate-num-keys``, for metrics and tests."""
        with _io(self.path, f"property {name}"):
            return self._rdict.property_value(name)

    def close(self) -> None:
        """Flush the memtable (a faster next open, not durability: see V1) and close.

        Idempotent.
        """
        db, self._db = self._db, None
        if db is None:
            return
        with _io(self.path, "close"):
            db.close()

    @property
    def closed(self) -> bool:
        return self._db is None

    def _write_options(self, sync: bool) -> rocksdict.WriteOptions:
        assert not self.read_only, f"RocksDB {self.path} is open read-only"
        return self._sync_write if sync else self._async_write

    def __enter__(self) -> "KeyValueStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
