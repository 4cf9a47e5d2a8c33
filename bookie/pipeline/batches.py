"""~4 MiB Arrow RecordBatches from the plain readers (docs/design.md §8); no pyspark here.

The data sources (sources.py) declare these schemas to Spark and yield these batches from
``read()``; export's tasks write them to Parquet with pyarrow (``write_export``). Spark
checks the first batch of a partition against the declared schema (types and nullability),
so every schema here is built by one function and every batch from it.

Columns, one row per entry (``entry_schema``):
    path      string   the file's URI as listed (fs.py)
    logId     bigint   from the file name
    offset    bigint   of the entry's i32 size field; its location's pos is offset + 4
    size      int      the entry's length, not counting the size field (docs/formats.md §5.2)
    ledgerId  bigint
    entryId   bigint
    entry     binary   (payload=true) the entry as stored: BookKeeper framing and digest
    problem   string   (verify=true) null when the entry is sound; else why not. A row with
                       a null ledgerId is a problem of the file itself at ``offset``:
                       corrupt framing, a bad header, a finalized log that ends torn, a
                       ledgersMap that does not read back (docs/formats.md §5.6). With
                       problems_only, only the rows whose problem is set
    entries   bigint   (tally=true, with problems_only) null, but in one more row per file,
                       the tally: problem and ledgerId null, entries = the entries scanned
                       (how scrub counts what it checked without shipping a row for each)

One row per (log, ledger) in ``mode=ledgersmap`` (``ledgers_map_schema``): path, logId,
ledgerId, bytes = sum of (size + 4), source "ledgersMap" or "scan" (a log without a sound
trailer is scanned, never taken as empty), finalized (the header points at a trailer),
mapProblem (why a trailer was not used), fileBytes. A log without entries gives one row
with a null ledgerId, so every log is accounted for.

Journals (``journal_schema``): path, journalId, offset, size (record bytes including the
length word), kind (journal/format.py RecordKind values), ledgerId, entryId, [payload: the
entry, the master key, or the explicit-LAC body], [problem], [entries: as above, the
data records scanned].

Batches are cut by bytes, not rows: about ``BATCH_BYTES`` of Arrow data each, so a batch of
1 KiB entries with payload holds ~4,000 rows and one without payload ~50,000, and an
executor's memory per task stays bounded whatever the entry size.
"""

from __future__ import annotations

import struct
from typing import Iterator

import pyarrow as pa
from crc32c import crc32c  # the C function: bookie.entry.crc32c adds a Python call (~10%)

from bookie.entry import (CRC32_PAYLOAD_OFFSET, CRC32C_PAYLOAD_OFFSET, METADATA_LENGTH,
                          DigestType, digest_mismatch)
from bookie.errors import CorruptRecord
from entrylog.format import SIZE
from entrylog.reader import EntryLogReader
from journal.format import RecordKind

BATCH_BYTES = 4 << 20
#: A location's pos is the entry's first byte, past its i32 size field (docs/formats.md §5.3).
SIZE_FIELD_BYTES = SIZE.size
#: Problem rows per batch in problems-only mode (a log of bad digests stays bounded).
_PROBLEM_ROWS = 4096
#: Arrow bytes of one entry row without payload and path: 4 int64s and an int32.
_ENTRY_FIXED_BYTES = 4 * 8 + 4
_CRC32C_END = CRC32C_PAYLOAD_OFFSET
_U32 = struct.Struct(">I").unpack_from
_DATA = RecordKind.DATA

_ENTRY_COLUMNS = [("path", pa.string()), ("logId", pa.int64()), ("offset", pa.int64()),
                  ("size", pa.int32()), ("ledgerId", pa.int64()), ("entryId", pa.int64())]
_LEDGERS_MAP_COLUMNS = [("path", pa.string()), ("logId", pa.int64()),
                        ("ledgerId", pa.int64()), ("bytes", pa.int64()),
                        ("source", pa.string()), ("finalized", pa.bool_()),
                        ("mapProblem", pa.string()), ("fileBytes", pa.int64())]
_JOURNAL_COLUMNS = [("path", pa.string()), ("journalId", pa.int64()), ("offset", pa.int64()),
                    ("size", pa.int32()), ("kind", pa.string()), ("ledgerId", pa.int64()),
                    ("entryId", pa.int64())]


def _schema(columns) -> pa.Schema:
    # Every field nullable: Spark's DDL types are, and the schemas must be equal.
    return pa.schema([pa.field(name, kind, nullable=True) for name, kind in columns])


def entry_schema(payload: bool = False, verify: bool = False,
                 tally: bool = False) -> pa.Schema:
    columns = list(_ENTRY_COLUMNS)
    if payload:
        columns.append(("entry", pa.binary()))
    if verify:
        columns.append(("problem", pa.string()))
    if tally:
        columns.append(("entries", pa.int64()))
    return _schema(columns)


def ledgers_map_schema() -> pa.Schema:
    return _schema(_LEDGERS_MAP_COLUMNS)


def journal_schema(payload: bool = False, verify: bool = False,
                   tally: bool = False) -> pa.Schema:
    columns = list(_JOURNAL_COLUMNS)
    if payload:
        columns.append(("payload", pa.binary()))
    if verify:
        columns.append(("problem", pa.string()))
    if tally:
        columns.append(("entries", pa.int64()))
    return _schema(columns)


# ----------------------------------------------------------------------- digests

def digest_problem(entry: bytes) -> str | None:
    """Why a stored entry fails its digest, or None. The entry log does not say which digest
    type its ledger uses (the ``ledgers`` index does), so an entry is sound when either CRC
    type matches (docs/formats.md §6.2): CRC32C (4 bytes), or CRC32 (8 bytes, the high 4 zero).
    """
    if len(entry) < CRC32C_PAYLOAD_OFFSET:
        return f"entry of {len(entry)} bytes is too short for its header and digest"
    if digest_mismatch(entry, DigestType.CRC32C) is None or (
            len(entry) >= CRC32_PAYLOAD_OFFSET
            and digest_mismatch(entry, DigestType.CRC32) is None):
        return None
    return (f"digest mismatch: stored {entry[METADATA_LENGTH:_CRC32C_END].hex()} matches "
            f"neither the crc32c nor the crc32 of the entry")


# ----------------------------------------------------------------------- entry logs

def entry_batches(reader: EntryLogReader, uri: str, *, payload: bool = False,
                  verify: bool = False, problems_only: bool = False,
                  unverified: frozenset[int] = frozenset(), tally: bool = False,
                  batch_bytes: int = BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """The entries of one log as RecordBatches of ``entry_schema(payload, verify, tally)``.

    ``problems_only`` (with ``verify``) yields only the problem rows; ``unverified`` names
    ledgers whose digests cannot be checked (MAC, DUMMY), never reported as mismatches.
    ``tally`` (with ``problems_only``) adds the file's tally row last.
    """
    assert problems_only or not tally, "a tally is for problems-only scans"
    schema = entry_schema(payload, verify, tally)
    columns = _EntryColumns(schema, uri, reader.log_id, payload, verify, unverified)
    try:
        if problems_only:
            rows = _bad_entries(reader.scan(payload=True), columns)
        else:
            rows = _entry_rows(reader.scan(payload=payload or verify), columns, verify,
                               batch_bytes)
        yield from rows
    except CorruptRecord as err:
        if not verify:
            raise
        yield columns.one_problem(err.offset, err.reason)
    else:
        problem = _log_problem(reader) if verify else None
        if problem is not None:
            yield columns.one_problem(*problem)
    if tally:
        yield columns.one_row(reader.end.offset if reader.end else 0, entries=columns.scanned)


class _EntryColumns:
    """Column lists of one batch being filled, and the batch they make."""

    def __init__(self, schema: pa.Schema, uri: str, log_id: int, payload: bool,
                 verify: bool, unverified: frozenset[int]) -> None:
        self.schema, self.uri, self.log_id = schema, uri, log_id
        self.payload, self.verify, self.unverified = payload, verify, unverified
        self.row_bytes = _ENTRY_FIXED_BYTES + len(uri.encode()) + 4
        self.tally = "entries" in schema.names
        #: Entries scanned so far (problems-only scans count them for the tally row).
        self.scanned = 0
        self.clear()

    def clear(self) -> None:
        self.offsets, self.sizes, self.ledger_ids, self.entry_ids = [], [], [], []
        self.entries: list[bytes] = []
        self.problems: list[tuple[int, str]] = []

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        columns = [pa.repeat(pa.scalar(self.uri, pa.string()), n),
                   pa.repeat(pa.scalar(self.log_id, pa.int64()), n),
                   pa.array(self.offsets, pa.int64()),
                   pa.array(self.sizes, pa.int64()).cast(pa.int32()),
                   pa.array(self.ledger_ids, pa.int64()), pa.array(self.entry_ids, pa.int64())]
        if self.payload:
            columns.append(pa.array(self.entries, pa.binary()))
        if self.verify:
            columns.append(_problem_column(n, self.problems))
        if self.tally:
            columns.append(pa.nulls(n, pa.int64()))
        self.clear()
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def problem_of(self, found) -> str | None:
        """The slow path, for an entry whose CRC32C did not match."""
        if found.ledger_id in self.unverified:
            return None
        return digest_problem(found.entry)

    def one_problem(self, offset: int, problem: str) -> pa.RecordBatch:
        return self.one_row(offset, problem=problem)

    def one_row(self, offset: int, **values) -> pa.RecordBatch:
        """A row of the file itself (ledgerId null): a problem, or the tally."""
        row = {"path": [self.uri], "logId": [self.log_id], "offset": [offset],
               **{name: [value] for name, value in values.items()}}
        return pa.RecordBatch.from_pydict(
            {field.name: row.get(field.name, [None]) for field in self.schema},
            schema=self.schema)


def _entry_rows(scan, columns: _EntryColumns, verify: bool,
                batch_bytes: int) -> Iterator[pa.RecordBatch]:
    # One pass that appends to column lists and checks each digest while its bytes are
    # still in cache; keeping ScannedEntry objects for a batch measured ~40% slower.
    unpack, crc, head, end = _U32, crc32c, METADATA_LENGTH, _CRC32C_END
    payload = columns.payload
    rows_per_batch = max(1, batch_bytes // columns.row_bytes)
    size_left = batch_bytes
    offsets, sizes, ledger_ids, entry_ids = (columns.offsets, columns.sizes,
                                             columns.ledger_ids, columns.entry_ids)
    for found in scan:
        offsets.append(found.offset)
        sizes.append(found.size)
        ledger_ids.append(found.ledger_id)
        entry_ids.append(found.entry_id)
        if verify:
            entry = found.entry
            if len(entry) < end or unpack(entry, head)[0] != crc(entry[end:],
                                                                 crc(entry[:head])):
                problem = columns.problem_of(found)
                if problem is not None:
                    columns.problems.append((len(offsets) - 1, problem))
        if payload:
            columns.entries.append(found.entry)
            size_left -= found.size + columns.row_bytes
            if size_left > 0:
                continue
        elif len(offsets) < rows_per_batch:
            continue
        yield columns.batch()
        size_left = batch_bytes
        offsets, sizes, ledger_ids, entry_ids = (columns.offsets, columns.sizes,
                                                 columns.ledger_ids, columns.entry_ids)
    if offsets:
        yield columns.batch()


def _bad_entries(scan, columns: _EntryColumns) -> Iterator[pa.RecordBatch]:
    """Only the entries whose digest fails, in batches of at most ``_PROBLEM_ROWS``."""
    # Scrub's hot loop: every name a local (a global lookup per entry measured ~7%).
    unpack, crc, head, end = _U32, crc32c, METADATA_LENGTH, _CRC32C_END
    counted = 0
    try:
        # enumerate counts in C; the count survives a CorruptRecord that ends the scan.
        for counted, found in enumerate(scan, 1):
            entry = found.entry
            if len(entry) >= end and unpack(entry, head)[0] == crc(entry[end:],
                                                                   crc(entry[:head])):
                continue
            yield from _bad_entry(found, columns)
    finally:
        columns.scanned = counted
    if columns.offsets:
        yield columns.batch()


def _bad_entry(found, columns: _EntryColumns) -> Iterator[pa.RecordBatch]:
    """The slow path of ``_bad_entries``: an entry whose CRC32C did not match."""
    problem = columns.problem_of(found)
    if problem is None:
        return
    columns.problems.append((len(columns.offsets), problem))
    columns.offsets.append(found.offset)
    columns.sizes.append(found.size)
    columns.ledger_ids.append(found.ledger_id)
    columns.entry_ids.append(found.entry_id)
    if columns.payload:
        columns.entries.append(found.entry)
    if len(columns.offsets) >= _PROBLEM_ROWS:
        yield columns.batch()


def _problem_column(n: int, bad: list[tuple[int, str]]) -> pa.Array:
    if not bad:
        return pa.nulls(n, pa.string())
    values: list[str | None] = [None] * n
    for index, problem in bad:
        values[index] = problem
    return pa.array(values, pa.string())


def _log_problem(reader: EntryLogReader) -> tuple[int, str] | None:
    """A problem of the log found at the end of its scan: corrupt framing (E3), or a
    finalized log that does not end cleanly or whose trailer does not read back. An active
    log's torn tail is how a crash leaves it (E2), not a problem."""
    end = reader.end
    if reader.corrupt:
        return end.offset, end.reason
    header = reader.header
    if header is None or not header.has_ledgers_map:
        return None
    if not end.clean:
        return end.offset, f"finalized log ends unexpectedly: {end.reason}"
    if reader.ledgers_map() is None:
        return header.map_offset, f"ledgersMap does not read back: {reader.map_problem}"
    return None


def ledgers_map_batch(reader: EntryLogReader, uri: str) -> pa.RecordBatch:
    """One batch, one row per ledger: the trailer's totals, or a scan's where it has none."""
    totals, source = reader.ledger_totals()
    header = reader.header
    finalized = header is not None and header.has_ledgers_map
    problem = None if source == "ledgersMap" else reader.map_problem
    ledger_ids: list[int | None] = sorted(totals) or [None]
    n = len(ledger_ids)
    columns = {
        "path": [uri] * n, "logId": [reader.log_id] * n, "ledgerId": ledger_ids,
        "bytes": [totals.get(ledger_id, 0) for ledger_id in ledger_ids],
        "source": [source] * n, "finalized": [finalized] * n, "mapProblem": [problem] * n,
        "fileBytes": [reader.file_size()] * n,
    }
    return pa.RecordBatch.from_pydict(columns, schema=ledgers_map_schema())


# ----------------------------------------------------------------------- export

#: Exported files hold the entry's location as the index does (pos = offset + 4) and are
#: partitioned by ledger in hive style (ledgerId=N/), which Spark and pyarrow both read.
EXPORT_PARTITION = pa.schema([pa.field("ledgerId", pa.int64())])


def export_schema(payload: bool) -> pa.Schema:
    columns = [("entryId", pa.int64()), ("logId", pa.int64()), ("pos", pa.int64()),
               ("size", pa.int32()), ("path", pa.string())]
    if payload:
        columns.append(("entry", pa.binary()))
    return _schema(columns + [("ledgerId", pa.int64())])


def export_batches(entry_batches_: Iterator[pa.RecordBatch],
                   payload: bool) -> Iterator[pa.RecordBatch]:
    """Entry batches (``entry_schema(payload)``) in ``export_schema(payload)``."""
    import pyarrow.compute as pc  # noqa: PLC0415 (see write_export)

    schema = export_schema(payload)
    for batch in entry_batches_:
        columns = {name: batch.column(name) for name in batch.schema.names}
        columns["pos"] = pc.add(columns["offset"], SIZE_FIELD_BYTES)
        yield pa.RecordBatch.from_arrays([columns[name] for name in schema.names],
                                         schema=schema)


def write_export(batches_: Iterator[pa.RecordBatch], payload: bool, filesystem,
                 base_dir: str, basename: str) -> tuple[int, set[int]]:
    """Write one log's export under ``base_dir``/ledgerId=N/``basename``-i.parquet with
    pyarrow: measured ~2.5x faster than Spark's JVM Parquet writer on 1 KiB entries, whose
    rows would cross from Python to the JVM first. Returns (rows, ledger ids)."""
    # Imported here: pyarrow.dataset and .compute take ~1 s to import, and every planner
    # process and Python worker imports this module; only export needs them.
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.dataset as pads  # noqa: PLC0415
    counted = {"rows": 0, "ledgers": set()}

    def counting(source):
        for batch in source:
            counted["rows"] += batch.num_rows
            counted["ledgers"].update(pc.unique(batch.column("ledgerId")).to_pylist())
            yield batch

    pads.write_dataset(
        counting(export_batches(batches_, payload)), base_dir, filesystem=filesystem,
        schema=export_schema(payload), format="parquet",
        partitioning=pads.partitioning(EXPORT_PARTITION, flavor="hive"),
        basename_template=basename + "-{i}.parquet",
        existing_data_behavior="overwrite_or_ignore")
    return counted["rows"], counted["ledgers"]
