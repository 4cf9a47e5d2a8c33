"""``readjournal`` and ``lastmark``: a journal's records and where replay would start.

``readjournal`` applies the reader rules of docs/formats.md §3.7 through the daemon's own
``JournalReader`` and says how the file ends: clean (a zero length word or the end of the
file), torn at an offset (the normal result of a crash: exit 1, since bytes were cut), or
corrupt at an offset (damage followed by valid records).
"""

from __future__ import annotations

import argparse
import collections
import os

from bookie.entry import (LAC_METADATA_LENGTH, DigestType, has_piggybacked_lac, parse_lac_body,
                          piggybacked_lac)
from bookie.errors import CorruptRecord
from bookie.shell.datadir import DataDir, UsageError
from bookie.shell.output import Output
from journal.format import ALIGNMENT, V5, RecordKind, detect_version, header_size
from journal.reader import JournalReader, UnsupportedJournalVersion


def register(commands, common: argparse.ArgumentParser) -> None:
    read = commands.add_parser(
        "readjournal", parents=[common], help="print a journal's records and how it ends",
        description="Print every record of a journal file (offset, kind, ledger, entry, "
        "length), count padding records, and say where the data ends and how: clean, torn "
        "at an offset (a crash cut a write) or corrupt at an offset (damage followed by "
        "valid records). Same rules as replay (docs/formats.md §3.7). Exit 0 clean, 1 torn, "
        "corrupt or unreadable version, 2 usage or I/O error.")
    read.add_argument("journal", help="journal file path, or hex journal id in --data-dir")
    read.add_argument("--from", dest="from_offset", type=int, default=0, metavar="OFFSET",
                      help="start at this record offset (default: after the header)")
    read.add_argument("--payload", action="store_true",
                      help="also print each record's payload in hex (entry, key, LAC body)")
    read.add_argument("--padding", action="store_true",
                      help="also print padding records (they are always counted)")
    read.add_argument("--summary", action="store_true",
                      help="print only how the file ends and the record counts")
    read.set_defaults(handler=read_journal)
    mark = commands.add_parser(
        "lastmark", parents=[common], help="print the persisted lastMark",
        description="Print the lastMark of --data-dir (journal id and offset, docs/formats.md §4) "
        "and which journals a start would replay. Exit 1 if the mark is missing, points at a "
        "missing journal or at an offset a V5+ writer cannot leave (not 512-aligned).")
    mark.set_defaults(handler=last_mark)


# -- readjournal ------------------------------------------------------------------------------


def read_journal(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    path = data_dir.resolve(args.journal, "journal")
    with JournalReader(data_dir.disk, path) as reader:
        if reader.foreign is not None:  # said before "version 1", which it is not
            message = f"{path}: not a journal: {reader.foreign}"
            out.problem({"file": path, "offset": 0, "reason": message,
                         "status": "not-a-journal"}, message)
            return out.exit_code()
        _check_start(reader, args.from_offset)
        out.text(f"journal {path}: {_version_text(reader.version)}, "
                 f"{os.path.getsize(path)} bytes")
        counts: collections.Counter = collections.Counter()
        try:
            for record in reader.scan(args.from_offset, include_padding=True):
                counts[record.kind.value] += 1
                if not args.summary and (args.padding or record.kind is not RecordKind.PADDING):
                    _emit_record(out, record, args.payload)
        except UnsupportedJournalVersion as exc:
            out.problem({"file": path, "offset": 4, "reason": exc.message,
                         "status": "unsupported"}, exc.message)
            return out.exit_code()
        except CorruptRecord as exc:
            out.problem({"file": path, "offset": exc.offset, "reason": exc.reason,
                         "status": "corrupt"},
                        f"{path}: corrupt at offset {exc.offset}: {exc.reason}")
        else:
            out.scan_end(path, reader.end)
        _emit_counts(out, reader, counts)
    return out.exit_code()


def _check_start(reader: JournalReader, from_offset: int) -> None:
    if reader.version is None or from_offset <= 0:
        return
    first = header_size(reader.version)
    if from_offset < first:
        raise UsageError(f"--from {from_offset} lies inside the {first}-byte header")


def _version_text(version: int | None) -> str:
    if version is None:
        return "empty journal (no header: a crash during creation)"
    return f"version {version} ({header_size(version)}-byte header)"


def _emit_record(out: Output, record, payload: bool) -> None:
    kind = record.kind
    length = record.size - (8 if kind is RecordKind.PADDING else 4)
    item = {"type": "record", "offset": record.offset, "kind": kind.value,
            "ledgerId": record.ledger_id, "entryId": record.entry_id, "length": length,
            "size": record.size}
    detail = ""
    if kind is RecordKind.DATA and has_piggybacked_lac(record.payload):
        item["lac"] = piggybacked_lac(record.payload)
        detail = f"lac {item['lac']}"
    elif kind is RecordKind.LEDGER_KEY:
        detail = f"key {record.payload.hex()}"
        if record.digest_type:
            item["digestType"] = DigestType(record.digest_type).header_name
            detail += f" digest {item['digestType']}"
    elif kind is RecordKind.EXPLICIT_LAC and len(record.payload) >= LAC_METADATA_LENGTH:
        item["lac"] = parse_lac_body(record.payload)[1]
        detail = f"explicit lac {item['lac']}"
    if payload and record.payload:
        item["payload"] = record.payload.hex()
        detail += f" payload {item['payload']}"
    ids = "" if kind is RecordKind.PADDING else f"{record.ledger_id:>10} {record.entry_id:>8}"
    out.emit(item, f"{record.offset:>12}  {kind.value:<13}{ids:>19} {length:>9}  {detail}"
             .rstrip())


def _emit_counts(out: Output, reader: JournalReader, counts: collections.Counter) -> None:
    records = {kind: n for kind, n in sorted(counts.items()) if kind != "padding"}
    out.emit({"type": "summary", "version": reader.version, "records": sum(records.values()),
              "byKind": records, "paddingRecords": reader.padding_records,
              "paddingBytes": reader.padding_bytes},
             f"records: {sum(records.values())}"
             + "".join(f", {n} {kind}" for kind, n in records.items())
             + f"; padding: {reader.padding_records} records, {reader.padding_bytes} bytes")


# -- lastmark -------------------------------------------------------------------------------


def last_mark(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args).require()
    mark, note = data_dir.read_mark()
    journal_ids = data_dir.journal_ids()
    if mark is None:
        out.problem({"file": os.path.join(data_dir.ledger_dir, data_dir.mark_name), "offset": 0,
                     "reason": note}, note)
        return out.exit_code()
    if note:
        out.text(f"note: {note}")
    replay = [i for i in journal_ids if i >= mark.journal_id]
    path = data_dir.journal_path(mark.journal_id)
    exists = mark.journal_id in journal_ids
    out.emit({"type": "lastmark", "journalId": mark.journal_id,
              "journalFile": os.path.basename(path), "offset": mark.offset, "exists": exists,
              "replayJournals": [f"{i:x}" for i in replay]},
             f"lastMark: journal {mark.journal_id:x} ({os.path.basename(path)}), offset "
             f"{mark.offset}\nreplay would read {len(replay)} journal(s): "
             + (" ".join(f"{i:x}" for i in replay) or "none"))
    if mark.journal_id > 0 and not exists:
        reason = f"recovery log {os.path.basename(path)} is missing: a start would refuse"
        out.problem({"file": path, "offset": mark.offset, "reason": reason}, reason)
    elif exists and mark.offset > 0:
        _check_alignment(out, path, mark.offset)
    return out.exit_code()


def _check_alignment(out: Output, path: str, offset: int) -> None:
    with open(path, "rb") as handle:
        version = detect_version(handle.read(8))
    if version is not None and version >= V5 and offset % ALIGNMENT:
        reason = f"mark offset {offset} in a V{version} journal is not {ALIGNMENT}-aligned (J1)"
        out.problem({"file": path, "offset": offset, "reason": reason}, reason)
