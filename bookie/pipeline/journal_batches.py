"""Journals as Arrow RecordBatches (the ``bkjournal`` data source); no pyspark here."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from bookie.errors import IOFailure
from bookie.pipeline.batches import (_DATA, _ENTRY_FIXED_BYTES, BATCH_BYTES, digest_problem,
                                     journal_schema)
from journal.reader import JournalReader


def journal_batches(reader: JournalReader, uri: str, journal_id: int, *,
                    payload: bool = False, verify: bool = False, problems_only: bool = False,
                    unverified: frozenset[int] = frozenset(), tally: bool = False,
                    batch_bytes: int = BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """The records of one journal as RecordBatches of ``journal_schema(payload, verify,
    tally)``.

    With ``verify``, a data record's digest is checked like an entry's, and damage the reader
    refuses (CorruptRecord: valid records follow it; a version it does not read) becomes a
    problem row where the scan stopped. A torn tail is how a crash leaves the active
    journal (docs/formats.md §3.7), not a problem. ``tally`` (with ``problems_only``) adds
    a last row whose ``entries`` counts the data records scanned.
    """
    assert problems_only or not tally, "a tally is for problems-only scans"
    schema = journal_schema(payload, verify, tally)
    row_bytes = _ENTRY_FIXED_BYTES + 16 + len(uri.encode())
    chunk: list = []
    size = entries = 0
    try:
        for record in reader.scan():
            problem = None
            if record.kind is _DATA:
                entries += 1
                if verify and record.ledger_id not in unverified:
                    problem = digest_problem(record.payload)
            if problems_only and problem is None:
                continue
            chunk.append((record, problem))
            size += row_bytes + (len(record.payload) if payload else 0)
            if size >= batch_bytes:
                yield _journal_batch(schema, chunk, uri, journal_id)
                chunk, size = [], 0
    except IOFailure as err:  # CorruptRecord, UnsupportedJournalVersion
        if not verify:
            raise
        if chunk:
            yield _journal_batch(schema, chunk, uri, journal_id)
        offset = getattr(err, "offset", 0)
        yield _journal_batch(schema, [(None, getattr(err, "reason", str(err)))], uri,
                             journal_id, offset)
    else:
        if chunk:
            yield _journal_batch(schema, chunk, uri, journal_id)
    if tally:
        yield _journal_batch(schema, [(None, None)], uri, journal_id, tally=entries)


def _journal_batch(schema: pa.Schema, chunk: list, uri: str, journal_id: int,
                   problem_offset: int = 0, tally: int | None = None) -> pa.RecordBatch:
    """A batch of (record, problem) pairs; a None record is a row of the file itself: a
    problem, or (``tally`` given) the tally."""
    n = len(chunk)
    records = [record for record, _ in chunk]
    columns = {
        "path": lambda: [uri] * n, "journalId": lambda: [journal_id] * n,
        "offset": lambda: [r.offset if r is not None else problem_offset for r in records],
        "size": lambda: [r.size if r is not None else None for r in records],
        "kind": lambda: [r.kind.value if r is not None else None for r in records],
        "ledgerId": lambda: [r.ledger_id if r is not None else None for r in records],
        "entryId": lambda: [r.entry_id if r is not None else None for r in records],
        "payload": lambda: [bytes(r.payload) if r is not None else None for r in records],
        "problem": lambda: [problem for _, problem in chunk],
        "entries": lambda: [tally] * n,
    }
    return pa.RecordBatch.from_pydict({field.name: columns[field.name]() for field in schema},
                                      schema=schema)
