"""Where the pipeline's files are: pyarrow.fs URIs, file listing, and a read-only Disk.

A PATH given to the pipeline is a plain local path or a ``pyarrow.fs`` URI (``file://``,
``hdfs://``, ``s3://``, ``gs://``...). It may name one file, a ``current/`` dir, or a whole
data dir: ``list_files`` looks under ``ledgers/current`` for ``*.log`` and under
``journal/current`` for ``*.txn`` (docs/formats.md §2), and returns one URI per file, which is
what a Spark partition carries to an executor.

The readers (entrylog/reader.py, journal/reader.py) take a ``Disk`` (bookie/disk.py). Plain
paths go through ``OsDisk``: pread, no copy beyond the one into ``bytes``. URIs go through
``ArrowDisk``, a read-only adapter over a ``pyarrow.fs`` input file, so the same reader code
runs over HDFS or S3. It implements only what the readers call: ``open`` -> read_at, size,
close.

Thread-safety: ``ArrowDisk`` holds only its filesystem (pyarrow filesystems are thread-safe);
an ``ArrowFile`` belongs to the one reader that opened it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath

import pyarrow.fs as pafs

from bookie.disk import OsDisk
from entrylog.format import parse_log_id

LOG_KIND = "log"
JOURNAL_KIND = "txn"
#: Where each kind lives inside a data dir (docs/http-api.md, "Data dirs").
_DATA_SUBDIRS = {LOG_KIND: ("ledgers", "current"), JOURNAL_KIND: ("journal", "current")}


@dataclasses.dataclass(frozen=True, order=True)
class FileRef:
    """One file to read: its URI (or local path), numeric id and size in bytes."""

    uri: str
    file_id: int
    size: int


class ArrowFile:
    """A ``pyarrow.fs`` random-access file seen as a read-only ``DiskFile``."""

    def __init__(self, path: str, handle) -> None:
        self.path = path
        self._handle = handle

    def read_at(self, offset: int, size: int) -> bytes:
        # The Disk contract: up to ``size`` bytes, fewer only at the end of the file.
        file_size = self._handle.size()
        size = max(0, min(size, file_size - offset))
        if size == 0:
            return b""
        data = self._handle.read_at(size, offset)
        return data if isinstance(data, bytes) else data.to_pybytes()

    def size(self) -> int:
        return self._handle.size()

    def close(self) -> None:
        self._handle.close()

    def write_at(self, offset: int, data) -> None:
        raise OSError(f"{self.path}: the pipeline never writes a bookie file")

    def fdatasync(self) -> None:
        raise OSError(f"{self.path}: read-only")

    fsync = fdatasync

    def drop_cache(self, offset: int, length: int) -> None:
        pass  # a hint for files the bookie writes; the pipeline writes none


class ArrowDisk:
    """The read side of ``bookie.disk.Disk`` over one ``pyarrow.fs`` filesystem."""

    def __init__(self, filesystem) -> None:
        self.filesystem = filesystem

    def open(self, path: str, writable: bool = False) -> ArrowFile:
        if writable:
            raise OSError(f"{path}: the pipeline opens bookie files read-only")
        return ArrowFile(path, self.filesystem.open_input_file(path))

    def exists(self, path: str) -> bool:
        return self.filesystem.get_file_info(path).type != pafs.FileType.NotFound

    def file_size(self, path: str) -> int:
        return self.filesystem.get_file_info(path).size


def is_uri(path: str) -> bool:
    return "://" in path


def split_uri(uri: str):
    """(filesystem, path inside it, prefix) so that prefix + path names the file again."""
    if not is_uri(uri):
        return pafs.LocalFileSystem(), os.path.abspath(uri), ("", "")
    base, _, query = uri.partition("?")
    filesystem, path = pafs.FileSystem.from_uri(uri)
    if not base.endswith(path):
        raise ValueError(f"cannot tell the prefix of {uri!r} (its path is {path!r})")
    prefix = base[:len(base) - len(path)]
    return filesystem, path, (prefix, "?" + query if query else "")


def disk_for(uri: str):
    """(Disk, path for the readers) of one file named by ``uri``."""
    if not is_uri(uri):
        return OsDisk(), uri
    filesystem, path = pafs.FileSystem.from_uri(uri)
    return ArrowDisk(filesystem), path


def file_id(name: str, kind: str) -> int | None:
    """The hex id of ``<hex>.log`` / ``<hex>.txn`` (docs/formats.md §2), else None."""
    if kind == LOG_KIND:
        return parse_log_id(name)
    stem, dot, suffix = name.partition(".")
    if suffix != JOURNAL_KIND or not stem:
        return None
    try:
        return int(stem, 16)
    except ValueError:
        return None


def list_files(paths: list[str], kind: str) -> list[FileRef]:
    """Every ``*.log`` (kind "log") or ``*.txn`` (kind "txn") file under ``paths``.

    Sorted largest first: Spark starts tasks in partition order, so the long ones start
    early and a small one never ends up alone at the end of the stage.
    """
    found: dict[str, FileRef] = {}
    for given in paths:
        for ref in _list_one(given, kind):
            found[ref.uri] = ref
    if not found:
        raise FileNotFoundError(f"no *.{kind} files under {', '.join(paths)}")
    return sorted(found.values(), key=lambda ref: (-ref.size, ref.uri))


def _list_one(given: str, kind: str) -> list[FileRef]:
    filesystem, path, prefix = split_uri(given)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{given}: no such file or directory")
    if info.type == pafs.FileType.File:
        return [_ref(info, kind, prefix, given)]
    data_subdir = posixpath.join(path, *_DATA_SUBDIRS[kind])
    if filesystem.get_file_info(data_subdir).type == pafs.FileType.Directory:
        path = data_subdir  # a data dir: its current/ dir holds the files
    listing = filesystem.get_file_info(pafs.FileSelector(path, recursive=False))
    return [_ref(info, kind, prefix, given) for info in listing
            if info.type == pafs.FileType.File and file_id(info.base_name, kind) is not None]


def _ref(info, kind: str, prefix, given: str) -> FileRef:
    ident = file_id(info.base_name, kind)
    if ident is None:
        raise ValueError(f"{given}: {info.base_name} is not named <hex id>.{kind}")
    uri = prefix[0] + info.path + prefix[1]
    return FileRef(uri, ident, info.size)


# ----------------------------------------------------------------------- reports

def read_parquet_rows(uri: str) -> list[dict]:
    """Every row of a Parquet dir Spark wrote (a report: small by construction)."""
    import pyarrow.dataset as pads  # noqa: PLC0415 (slow to import; the driver's only)
    filesystem, path, _ = split_uri(uri)
    return pads.dataset(path, filesystem=filesystem, format="parquet").to_table().to_pylist()


def parquet_counts(uri: str, partition: str) -> tuple[int, int]:
    """(rows, distinct values of the hive ``partition``) from footers and names alone."""
    import pyarrow.dataset as pads  # noqa: PLC0415 (slow to import; the driver's only)
    filesystem, path, _ = split_uri(uri)
    dataset = pads.dataset(path, filesystem=filesystem, format="parquet",
                           partitioning="hive")
    values = {segment for name in dataset.files for segment in name.split("/")
              if segment.startswith(partition + "=")}
    return dataset.count_rows(), len(values)


def write_json_lines(uri: str, rows: list[dict]) -> None:
    """One JSON object a line, written by the driver (local path or URI)."""
    filesystem, path, _ = split_uri(uri)
    filesystem.create_dir(posixpath.dirname(path), recursive=True)
    text = "".join(json.dumps(row, default=_json_default, sort_keys=True) + "\n"
                   for row in rows)
    with filesystem.open_output_stream(path) as stream:
        stream.write(text.encode("utf-8"))


def _json_default(value):
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def remove_dir(uri: str) -> None:
    """Delete a dir and what it holds, if it exists (an output being overwritten)."""
    filesystem, path, _ = split_uri(uri)
    if filesystem.get_file_info(path).type == pafs.FileType.Directory:
        filesystem.delete_dir(path)


def mark_success(uri: str) -> None:
    """An empty ``_SUCCESS`` file, as Hadoop's committers leave after a complete write."""
    filesystem, path, _ = split_uri(uri)
    filesystem.create_dir(path, recursive=True)
    with filesystem.open_output_stream(posixpath.join(path, "_SUCCESS")):
        pass
