"""``readlog`` and ``readlogmetadata``: an entry log's entries and its ledgersMap.

Both read through the daemon's ``EntryLogReader`` with the rules of docs/formats.md §5.6: the
index path (the ledgersMap trailer the header points at) when it is whole and its ledger
count matches the header, the scan path otherwise, saying which was used and why.
"""

from __future__ import annotations

import argparse
import os

from bookie.entry import has_piggybacked_lac, piggybacked_lac
from bookie.errors import CorruptRecord
from bookie.shell.datadir import DataDir
from bookie.shell.output import Output
from entrylog.format import MAP_BATCH_HEAD, SIZE
from entrylog.reader import EntryLogReader

#: Bounds the batch walk of a damaged trailer (BookKeeper writes 10,000 ledgers a batch).
_BATCHES_MAX = 1 << 20


def register(commands, common: argparse.ArgumentParser) -> None:
    read = commands.add_parser(
        "readlog", parents=[common], help="print an entry log's entries",
        description="Scan an entry log (docs/formats.md §5.6 scan path) and print every entry: "
        "offset of its size field, size, ledger, entry, piggybacked LAC. Ledgers map batches "
        "are skipped. Says how the scan ended: clean, torn at an offset, or corrupt at an "
        "offset (a size of 1..15). Exit 0 clean, 1 torn or corrupt, 2 usage or I/O error.")
    read.add_argument("log", help="entry log file path, or hex log id in --data-dir")
    read.add_argument("--ledger", type=int, help="only entries of this ledger")
    read.add_argument("--entry", type=int, help="only entries with this entry id")
    read.add_argument("--payload", action="store_true", help="also print each entry in hex")
    read.add_argument("--summary", action="store_true",
                      help="print only how the scan ended and the counts")
    read.set_defaults(handler=read_log)
    meta = commands.add_parser(
        "readlogmetadata", parents=[common], help="print an entry log's ledgersMap",
        description="Print the ledgers map of an entry log (ledger -> bytes, docs/formats.md §5.4) "
        "read from its trailer, or from a scan where the trailer is missing or unusable, and "
        "whether the header's ledger count and the map agree. Exit 1 when the trailer is "
        "missing or unusable (the log was not finalized, or is damaged), or when --scan "
        "finds the map and the entries disagree.")
    meta.add_argument("log", help="entry log file path, or hex log id in --data-dir")
    meta.add_argument("--scan", action="store_true",
                      help="also scan the entries and compare their totals with the map")
    meta.set_defaults(handler=read_log_metadata)


# -- readlog ----------------------------------------------------------------------------------


def read_log(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    path = data_dir.resolve(args.log, "log")
    with EntryLogReader(data_dir.disk, path, log_id=_log_id(path)) as reader:
        if not _emit_header(out, reader):
            return out.exit_code()
        count = 0
        for found in reader.scan(payload=True):
            if (args.ledger is not None and found.ledger_id != args.ledger) or \
                    (args.entry is not None and found.entry_id != args.entry):
                continue
            count += 1
            if not args.summary:
                _emit_entry(out, found, args.payload)
        out.scan_end(reader.path, reader.end, reader.corrupt)
        notes = _scan_notes(reader)
        out.emit({"type": "summary", "entries": count, "paddingBytes": reader.padding_bytes,
                  "oversizeEntries": reader.oversize_entries},
                 f"entries: {count}" + "".join(f"; {note}" for note in notes))
    return out.exit_code()


def _log_id(path: str) -> int:
    """The log id from the name, or 0 for a file named otherwise (a copy); only locations
    in the output depend on it."""
    stem = os.path.basename(path).split(".", 1)[0]
    try:
        return int(stem, 16)
    except ValueError:
        return 0


def _emit_header(out: Output, reader: EntryLogReader) -> bool:
    """Print the header; False (a problem reported) if it is corrupt."""
    try:
        header = reader.header
    except CorruptRecord as exc:
        out.problem({"file": reader.path, "offset": exc.offset, "reason": exc.reason,
                     "status": "corrupt"}, f"corrupt header at offset {exc.offset}: "
                                           f"{exc.reason}")
        return False
    size = reader.file_size()
    if header is None:
        out.emit({"type": "header", "file": reader.path, "fileSize": size, "logId": None},
                 f"entry log {reader.path}: {size} bytes, shorter than the 1024-byte header "
                 f"(allocated, never written): no entries")
        return True
    out.emit({"type": "header", "file": reader.path, "fileSize": size,
              "logId": reader.log_id, "version": header.version,
              "ledgersMapOffset": header.map_offset, "ledgersCount": header.ledgers_count},
             f"entry log {reader.path}: log id {reader.log_id:x}, {size} bytes, version "
             f"{header.version}, ledgersMap offset {header.map_offset}, ledgers count "
             f"{header.ledgers_count}")
    return True


def _emit_entry(out: Output, found, payload: bool) -> None:
    entry = found.entry
    lac = piggybacked_lac(entry) if has_piggybacked_lac(entry) else None
    item = {"type": "entry", "offset": found.offset, "pos": found.offset + SIZE.size,
            "size": found.size, "ledgerId": found.ledger_id, "entryId": found.entry_id,
            "location": found.location, "lac": lac}
    text = (f"{found.offset:>12} {found.size:>9} {found.ledger_id:>12} {found.entry_id:>10}"
            f"  lac {lac}")
    if payload:
        item["payload"] = entry.hex()
        text += f" {item['payload']}"
    out.emit(item, text)


def _scan_notes(reader: EntryLogReader) -> list[str]:
    notes = []
    if reader.padding_bytes:
        notes.append(f"skipped {reader.padding_bytes} bytes of sizes <= 0 between records "
                     f"(Apache BookKeeper's padding tolerance)")
    if reader.oversize_entries:
        notes.append(f"{reader.oversize_entries} entries above the maximum entry size")
    return notes


# -- readlogmetadata --------------------------------------------------------------------------


def read_log_metadata(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    path = data_dir.resolve(args.log, "log")
    with EntryLogReader(data_dir.disk, path, log_id=_log_id(path)) as reader:
        if not _emit_header(out, reader):
            return out.exit_code()
        totals = reader.ledgers_map()
        if totals is None:
            totals = _scan_instead(out, reader)
            source, batches = "scan", 0
        else:
            source, batches = "ledgersMap", _count_batches(path, reader.header.map_offset)
            if args.scan:
                _compare_with_scan(out, reader, totals)
        for ledger_id, total in sorted(totals.items()):
            out.emit({"type": "ledger", "ledgerId": ledger_id, "totalBytes": total},
                     f"ledger {ledger_id}: {total} bytes")
        header = reader.header
        out.emit({"type": "summary", "source": source, "ledgers": len(totals),
                  "headerCount": header.ledgers_count if header else 0, "batches": batches,
                  "agree": source == "ledgersMap"},
                 f"{len(totals)} ledgers from the {source}"
                 + (f" ({batches} batches), matching the header's count"
                    if source == "ledgersMap" else ""))
    return out.exit_code()


def _scan_instead(out: Output, reader: EntryLogReader) -> dict[int, int]:
    """Totals by scanning. A missing or unusable map is a problem when the log holds entries
    (it was never finalized: a crash) or the header promised a map (damage); an empty log
    (0 bytes, header only, or Apache BookKeeper's empty finalized log) is not."""
    totals: dict[int, int] = {}
    for found in reader.scan(payload=False):
        totals[found.ledger_id] = totals.get(found.ledger_id, 0) + found.size + SIZE.size
    end = reader.end
    reason = (f"no usable ledgersMap ({reader.map_problem}); scanned instead: the entries end "
              f"at offset {end.offset} ({end.reason})")
    header = reader.header
    if totals or (header is not None and header.has_ledgers_map):
        out.problem({"file": reader.path, "offset": end.offset, "reason": reason,
                     "status": "no-ledgers-map"}, reason)
    else:
        out.emit({"type": "note", "file": reader.path, "offset": end.offset,
                  "reason": reason}, f"note: {reason}; the log holds no entries")
    out.scan_end(reader.path, end, reader.corrupt, quiet_if_clean=True)
    return totals


def _compare_with_scan(out: Output, reader: EntryLogReader, totals: dict[int, int]) -> None:
    scanned: dict[int, int] = {}
    for found in reader.scan(payload=False):
        scanned[found.ledger_id] = scanned.get(found.ledger_id, 0) + found.size + SIZE.size
    out.scan_end(reader.path, reader.end, reader.corrupt, quiet_if_clean=True)
    for ledger_id in sorted(set(totals) | set(scanned)):
        in_map, in_scan = totals.get(ledger_id, 0), scanned.get(ledger_id, 0)
        if in_map != in_scan:
            reason = (f"ledger {ledger_id}: the ledgersMap says {in_map} bytes, the entries "
                      f"add up to {in_scan}")
            out.problem({"file": reader.path, "offset": reader.header.map_offset,
                         "ledgerId": ledger_id, "reason": reason}, reason)


def _count_batches(path: str, map_offset: int) -> int:
    """Batches from ``map_offset`` to the end of the file (already validated by the reader)."""
    count = 0
    with open(path, "rb") as handle:
        offset = map_offset
        while count < _BATCHES_MAX:
            handle.seek(offset)
            head = handle.read(MAP_BATCH_HEAD.size)
            if len(head) < MAP_BATCH_HEAD.size:
                break
            batch_len = MAP_BATCH_HEAD.unpack(head)[0]
            if batch_len <= 0:
                break
            count += 1
            offset += SIZE.size + batch_len
    return count
