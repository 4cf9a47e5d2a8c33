"""A bookie data dir as the shell sees it: paths, files, indexes, read-only (docs/http-api.md "Data dirs").

Every command here reads a stopped bookie's files or a copy, so nothing in this module
writes: ``read_mark`` does not delete a leftover ``lastMark.tmp`` as startup does, and the
indexes open read-only (RocksDB takes no lock then, so a running bookie is not disturbed,
though what it has not flushed yet is not seen).
"""

from __future__ import annotations

import fcntl
import os

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.errors import IOFailure
from entrylog.format import LAST_ID_NAME, decode_last_id, log_file_name, parse_hex_id, parse_log_id
from journal.format import LogMark, journal_file_name, parse_journal_id
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex

LAST_MARK = "lastMark"
LOCATIONS = "locations"
LEDGERS = "ledgers"
INDEX_DIRS = (LOCATIONS, LEDGERS)


class UsageError(ValueError):
    """A bad argument: exit code 2 with the message."""


class DataDir:
    """Paths of one data dir (docs/formats.md §2) and read-only access to its parts."""

    def __init__(self, data_dir: str, journal_dir: str | None = None,
                 ledger_dir: str | None = None, journal_index: int | None = None,
                 index_dir: str | None = None) -> None:
        config = BookieConfig(data_dir=data_dir)
        self.root = data_dir
        self.journal_dir = os.path.join(journal_dir, "current") if journal_dir \
            else config.journal_dir
        self.ledger_dir = os.path.join(ledger_dir, "current") if ledger_dir \
            else config.ledger_dir
        #: ``current/`` holding the indexes: the ledger dir's, or its index dir's (index_dirs).
        self.index_dir = os.path.join(index_dir, "current") if index_dir else self.ledger_dir
        #: docs/formats.md §4.1: ``lastMark``, or ``lastMark.<i>`` with several journals.
        self.mark_name = LAST_MARK if journal_index is None else f"{LAST_MARK}.{journal_index}"
        self.disk = OsDisk()
        if (journal_dir or ledger_dir) and data_dir == "./data":
            self.root = ledger_dir or journal_dir  # what require() checks

    @classmethod
    def of(cls, args) -> "DataDir":
        """The data dir the shell's common flags name (--data-dir, --journal-dir,
        --ledger-dir, --journal-index, --index-dir)."""
        return cls(args.data_dir, getattr(args, "journal_dir", None),
                   getattr(args, "ledger_dir", None), getattr(args, "journal_index", None),
                   getattr(args, "index_dir", None))

    def require(self) -> "DataDir":
        """Refuse a data dir that does not exist (a typo), rather than report it empty."""
        if not os.path.isdir(self.root):
            raise UsageError(f"no data dir at {self.root} (see --data-dir)")
        return self

    # -- files ------------------------------------------------------------------------------

    def journal_ids(self) -> list[int]:
        return _ids(self.journal_dir, parse_journal_id)

    def log_ids(self) -> list[int]:
        return _ids(self.ledger_dir, parse_log_id)

    def journal_path(self, journal_id: int) -> str:
        return os.path.join(self.journal_dir, journal_file_name(journal_id))

    def log_path(self, log_id: int) -> str:
        return os.path.join(self.ledger_dir, log_file_name(log_id))

    def resolve(self, arg: str, kind: str) -> str:
        """A journal (``kind`` "journal") or entry log ("log") named by path or hex id.

        An existing path wins, so a file named like a hex id is still found by its name.
        """
        if os.path.exists(arg):
            if os.path.isdir(arg):
                raise UsageError(f"{arg} is a directory, not a {kind} file")
            return arg
        file_id = parse_hex_id(arg)
        if file_id is None:
            raise UsageError(f"{arg!r} is neither an existing file nor a hex {kind} id")
        path = self.journal_path(file_id) if kind == "journal" else self.log_path(file_id)
        if not os.path.exists(path):
            raise UsageError(f"{kind} {arg} not found: no {path}")
        return path

    def read_mark(self) -> tuple[LogMark | None, str]:
        """(mark, note): docs/formats.md §4.4 without startup's side effects. None if missing."""
        path = os.path.join(self.ledger_dir, self.mark_name)
        try:
            with open(path, "rb") as handle:
                data = handle.read(4096)
        except FileNotFoundError:
            if self.mark_name == LAST_MARK and os.path.exists(path + ".0"):
                return None, (f"no {path} but {path}.0: this bookie has several journal "
                              f"dirs; pass --journal-index I and journal I's --journal-dir")
            return None, f"no {path}: a bookie would replay every journal"
        except OSError as exc:
            raise IOFailure(f"cannot read {path}: {exc.strerror}") from exc
        if len(data) < 16:
            return None, (f"{path} is {len(data)} bytes, shorter than 16: a bookie would "
                          f"replay every journal")
        note = "" if len(data) == 16 else f"{path} is {len(data)} bytes; the first 16 count"
        return LogMark.decode(data[:16]), note

    def read_last_id(self) -> int | None:
        try:
            with open(os.path.join(self.ledger_dir, LAST_ID_NAME), "rb") as handle:
                return decode_last_id(handle.read(64))
        except FileNotFoundError:
            return None

    # -- indexes ----------------------------------------------------------------------------

    def index_path(self, name: str) -> str:
        return os.path.join(self.index_dir, name)

    def open_locations(self) -> EntryLocationIndex:
        self.require_index(LOCATIONS)
        return EntryLocationIndex.open(self.index_path(LOCATIONS), create=False, read_only=True)

    def open_ledgers(self) -> LedgerMetadataIndex:
        self.require_index(LEDGERS)
        return LedgerMetadataIndex.open(self.index_path(LEDGERS), create=False, read_only=True)

    def require_index(self, name: str) -> None:
        """A missing data dir or index is named as such, not as RocksDB's "CURRENT is missing"."""
        self.require()
        path = self.index_path(name)
        if not os.path.isdir(path):
            raise IOFailure(f"no {name} index at {path}: not a bookie's data dir, or its "
                            f"bookie never started (see --data-dir, --ledger-dir, "
                            f"--index-dir)")

    def check_not_in_use(self) -> None:
        """Refuse (IOFailure) if another process holds an index's RocksDB lock.

        RocksDB locks ``LOCK`` with fcntl; probing takes and drops the same lock. This
        process must not have the database open itself: closing any descriptor of a file
        drops every fcntl lock this process holds on it.
        """
        for name in INDEX_DIRS:
            lock_path = os.path.join(self.index_path(name), "LOCK")
            if not os.path.exists(lock_path):
                continue
            fd = os.open(lock_path, os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_UN)
            except OSError as exc:
                raise IOFailure(f"{lock_path} is locked ({exc.strerror}): a bookie is "
                                f"running on this data dir; stop it first") from exc
            finally:
                os.close(fd)


def _ids(directory: str, parse) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(i for i in map(parse, names) if i is not None)


def dir_bytes(path: str) -> int:
    """Total size of the files under ``path`` (an index dir), 0 if it does not exist."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass  # RocksDB may delete a file meanwhile (a running bookie)
    return total
