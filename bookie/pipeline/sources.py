"""Spark Python Data Sources ``bkentrylog`` and ``bkjournal`` (docs/design.md §8).

    spark.read.format("bkentrylog").option("verify", "true").load("/data/bookie1")
    spark.read.format("bkjournal").option("paths", '["hdfs://nn/b1", "hdfs://nn/b2"]').load()

PATHs (``load(path)`` or the ``paths`` option, a JSON list) are local paths or pyarrow.fs
URIs naming files, ``current/`` dirs or data dirs (fs.py). **One partition per file**:
rolled logs are immutable and at most 1 GiB, a good task size, while each Python task costs
~30 ms, so splitting a file would buy nothing. ``partitions()`` only lists files (on the
driver); ``read()`` runs the plain readers on the executor and yields the ~4 MiB Arrow
batches of batches.py, whose schemas are the ones declared here.

Options (case-insensitive, as Spark passes them):
    mode          entries (default) | ledgersmap (bkentrylog only; see batches.py)
    payload       true | false (default): add the entry bytes (``entry``; journals
                  ``payload``). Off for scrub and usage: it is most of the bytes
    verify        true | false (default): add ``problem`` (digest, framing, trailer)
    problemsOnly  true | false (default): with verify, emit only rows whose problem is
                  set. Scrub reads ~1M entries per GiB and wants the few bad ones; building
                  and shipping a row per sound entry would cost more than checking it
    tally         true | false (default): with problemsOnly, one more row per file whose
                  ``entries`` column counts the entries (journals: data records) scanned;
                  its problem and ledgerId are null. How scrub reports what it checked
    unverifiedLedgers  a JSON list of ledger ids whose digests cannot be checked (MAC,
                  DUMMY: jobs.unverifiable_ledgers); their mismatches are not problems
    maxEntrySize  bytes (default 5 MiB): as the bookie's max_entry_size
    batchBytes    Arrow bytes per batch (default 4 MiB)

No ``binaryFile`` and no row-at-a-time paths: both were slower or ran out of memory on
1 GiB logs (docs/design.md §8).
"""

from __future__ import annotations

import json
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType)

from bookie.pipeline import batches, fs, journal_batches
from entrylog.reader import DEFAULT_MAX_ENTRY_SIZE, EntryLogReader
from journal.reader import JournalReader

ENTRIES = "entries"
LEDGERS_MAP = "ledgersmap"
_SPARK_TYPES = {pa.string(): StringType(), pa.int64(): LongType(), pa.int32(): IntegerType(),
                pa.binary(): BinaryType(), pa.bool_(): BooleanType()}


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema whose Arrow form is exactly ``schema`` (Spark checks equality)."""
    return StructType([StructField(field.name, _SPARK_TYPES[field.type], True)
                       for field in schema])


def _flag(options, name: str, default: bool = False) -> bool:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"option {name}={value!r}: expected true or false")
    return text == "true"


def _int(options, name: str, default: int) -> int:
    value = options.get(name)
    return default if value is None else int(value)


def paths_option(options) -> list[str]:
    """The PATHs of ``load(path)`` and/or the ``paths`` option (a JSON list of strings)."""
    paths = []
    if options.get("path"):
        paths.append(options["path"])
    if options.get("paths"):
        listed = json.loads(options["paths"])
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise ValueError(f"option paths={options['paths']!r}: expected a JSON list")
        paths.extend(listed)
    if not paths:
        raise ValueError("no PATH: use load(path) or option('paths', '[...]')")
    return paths


class FilePartition(InputPartition):
    """One file: its URI and id (a partition must pickle; a FileRef does)."""

    def __init__(self, ref: fs.FileRef) -> None:
        super().__init__(ref)
        self.ref = ref


class _Settings:
    """The options, parsed once on the driver and pickled to the executors with the reader."""

    def __init__(self, options, kind: str) -> None:
        self.paths = paths_option(options)
        self.kind = kind
        self.mode = str(options.get("mode", ENTRIES)).lower()
        if self.mode not in (ENTRIES, LEDGERS_MAP) or (
                kind == fs.JOURNAL_KIND and self.mode != ENTRIES):
            raise ValueError(f"option mode={self.mode!r} is not supported here")
        self.payload = _flag(options, "payload")
        self.verify = _flag(options, "verify")
        self.problems_only = _flag(options, "problemsOnly")
        if self.problems_only and not self.verify:
            raise ValueError("option problemsOnly needs verify=true")
        self.tally = _flag(options, "tally")
        if self.tally and not self.problems_only:
            raise ValueError("option tally needs problemsOnly=true")
        self.unverified = frozenset(json.loads(options.get("unverifiedLedgers") or "[]"))
        self.max_entry_size = _int(options, "maxEntrySize", DEFAULT_MAX_ENTRY_SIZE)
        self.batch_bytes = _int(options, "batchBytes", batches.BATCH_BYTES)


class _FileReader(DataSourceReader):
    def __init__(self, settings: _Settings) -> None:
        self.settings = settings

    def partitions(self) -> list[InputPartition]:
        return [FilePartition(ref) for ref in fs.list_files(self.settings.paths,
                                                            self.settings.kind)]


class EntryLogSourceReader(_FileReader):
    def read(self, partition: FilePartition) -> Iterator[pa.RecordBatch]:
        settings = self.settings
        disk, path = fs.disk_for(partition.ref.uri)
        with EntryLogReader(disk, path, log_id=partition.ref.file_id,
                            max_entry_size=settings.max_entry_size) as reader:
            if settings.mode == LEDGERS_MAP:
                yield batches.ledgers_map_batch(reader, partition.ref.uri)
                return
            yield from batches.entry_batches(
                reader, partition.ref.uri, payload=settings.payload, verify=settings.verify,
                problems_only=settings.problems_only, unverified=settings.unverified,
                tally=settings.tally, batch_bytes=settings.batch_bytes)


class JournalSourceReader(_FileReader):
    def read(self, partition: FilePartition) -> Iterator[pa.RecordBatch]:
        settings = self.settings
        disk, path = fs.disk_for(partition.ref.uri)
        with JournalReader(disk, path, max_entry_size=settings.max_entry_size) as reader:
            yield from journal_batches.journal_batches(
                reader, partition.ref.uri, partition.ref.file_id, payload=settings.payload,
                verify=settings.verify, problems_only=settings.problems_only,
                unverified=settings.unverified, tally=settings.tally, batch_bytes=settings.batch_bytes)


class EntryLogDataSource(DataSource):
    """``bkentrylog``: the entries of BKLO entry logs, or their ledgersMap totals."""

    @classmethod
    def name(cls) -> str:
        return "bkentrylog"

    def schema(self) -> StructType:
        settings = _Settings(self.options, fs.LOG_KIND)
        if settings.mode == LEDGERS_MAP:
            return spark_schema(batches.ledgers_map_schema())
        return spark_schema(batches.entry_schema(settings.payload, settings.verify,
                                                 settings.tally))

    def reader(self, schema: StructType) -> DataSourceReader:
        return EntryLogSourceReader(_Settings(self.options, fs.LOG_KIND))


class JournalDataSource(DataSource):
    """``bkjournal``: the records of BKLG journals."""

    @classmethod
    def name(cls) -> str:
        return "bkjournal"

    def schema(self) -> StructType:
        settings = _Settings(self.options, fs.JOURNAL_KIND)
        return spark_schema(batches.journal_schema(settings.payload, settings.verify,
                                                   settings.tally))

    def reader(self, schema: StructType) -> DataSourceReader:
        return JournalSourceReader(_Settings(self.options, fs.JOURNAL_KIND))


def register(spark) -> None:
    """Make ``bkentrylog`` and ``bkjournal`` known to ``spark.read.format``."""
    spark.dataSource.register(EntryLogDataSource)
    spark.dataSource.register(JournalDataSource)
