"""``listfiles``, ``listledgers``, ``ledger <L>`` and ``info``: a data dir at a glance."""

from __future__ import annotations

import argparse
import collections
import os

from bookie.entry import DigestType, entry_digest_ok, piggybacked_lac
from bookie.errors import IOFailure
from bookie.scrub_report import TYPE_NAMES
from bookie.shell.datadir import INDEX_DIRS, DataDir, UsageError, dir_bytes
from bookie.shell.output import Output, human_bytes
from entrylog.format import HEADER_SIZE, decode_header, split_location
from entrylog.reader import EntryLogReader
from journal.format import detect_version


def register(commands, common: argparse.ArgumentParser) -> None:
    files = commands.add_parser(
        "listfiles", parents=[common], help="list journals, entry logs and index dirs",
        description="List the journals (with format version), entry logs (finalized or not), "
        "index dirs and other files of --data-dir, with sizes.")
    files.set_defaults(handler=list_files)
    ledgers = commands.add_parser(
        "listledgers", parents=[common], help="list the ledgers of the ledgers index",
        description="List every ledger of the ledgers index: digest type, fenced, limbo, "
        "master key, explicit LAC.")
    ledgers.add_argument("--deleted", action="store_true", help="include deleted ledgers")
    ledgers.add_argument("--entries", action="store_true",
                         help="count each ledger's entries in the locations index (slower)")
    ledgers.set_defaults(handler=list_ledgers)
    ledger = commands.add_parser(
        "ledger", parents=[common], help="one ledger's state and entry locations",
        description="Print a ledger's state and every entry the locations index holds for "
        "it, with the entry log and position. Exit 1 if the ledger is unknown or, with "
        "--read, an entry cannot be read back or fails its digest.")
    # --ledger as in `bookie ledger`; the positional form of earlier releases stays.
    ledger.add_argument("--ledger", dest="ledger_flag", type=int, metavar="ID",
                        help="the ledger id")
    ledger.add_argument("ledger_id", type=int, nargs="?", metavar="ID",
                        help="the ledger id, the same as --ledger (kept for scripts)")
    ledger.add_argument("--read", action="store_true",
                        help="read every entry back: ids, framing and CRC digest")
    ledger.set_defaults(handler=show_ledger)
    info = commands.add_parser(
        "info", parents=[common], help="the data dir at a glance",
        description="Summarize --data-dir: lastMark, journals, entry logs, indexes, ledgers. "
        "Exit 1 if it notices a problem (missing marked journal, unreadable index).")
    info.set_defaults(handler=show_info)


# -- listfiles ----------------------------------------------------------------------------


def list_files(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args).require()
    for journal_id in data_dir.journal_ids():
        path = data_dir.journal_path(journal_id)
        with open(path, "rb") as handle:
            version = detect_version(handle.read(8))
        _emit_file(out, "journal", path, f"{journal_id:x}", version=version)
    for log_id in data_dir.log_ids():
        path = data_dir.log_path(log_id)
        _emit_file(out, "entrylog", path, f"{log_id:x}", finalized=_finalized(path))
    for name in INDEX_DIRS:
        path = data_dir.index_path(name)
        if os.path.isdir(path):
            _emit_file(out, "index", path, name, size=dir_bytes(path))
    known = {os.path.basename(data_dir.journal_path(i)) for i in data_dir.journal_ids()}
    known |= {os.path.basename(data_dir.log_path(i)) for i in data_dir.log_ids()}
    known |= set(INDEX_DIRS)
    for folder in dict.fromkeys((data_dir.journal_dir, data_dir.ledger_dir,
                                 data_dir.index_dir)):
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            if name not in known:
                path = os.path.join(folder, name)
                _emit_file(out, "other", path, os.path.relpath(path, data_dir.root),
                           size=dir_bytes(path) if os.path.isdir(path) else None)
    return out.exit_code()


def _emit_file(out: Output, kind: str, path: str, name: str, size: int | None = None,
               **extra) -> None:
    size = os.path.getsize(path) if size is None else size
    detail = ""
    if "version" in extra:
        detail = "empty (no header)" if extra["version"] is None else f"V{extra['version']}"
    elif "finalized" in extra:
        detail = "finalized" if extra["finalized"] else "no ledgersMap (not finalized)"
    out.emit({"type": "file", "kind": kind, "name": name, "path": path, "size": size, **extra},
             f"{kind:<9} {name:<20} {human_bytes(size):>10}  {detail}".rstrip())


def _finalized(path: str) -> bool:
    with open(path, "rb") as handle:
        data = handle.read(HEADER_SIZE)
    return len(data) == HEADER_SIZE and decode_header(data).has_ledgers_map


# -- listledgers --------------------------------------------------------------------------


def list_ledgers(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    ledgers = data_dir.open_ledgers()
    locations = data_dir.open_locations() if args.entries else None
    try:
        ids = ledgers.ledger_ids()
        if args.deleted:
            ids = sorted(ids + ledgers.deleted_ids())
        for ledger_id in ids:
            item, text = _describe_ledger(ledger_id, ledgers.get(ledger_id))
            if locations is not None:
                count, last = locations.count_and_max(ledger_id)
                item.update(entries=count, lastEntryId=last)
                text += f", {count} entries, last {last}"
            out.emit(item, text)
        out.text(f"{len(ids)} ledgers")
    finally:
        ledgers.close()
        if locations is not None:
            locations.close()
    return out.exit_code()


def _ledger_id(args: argparse.Namespace) -> int:
    if args.ledger_flag is None and args.ledger_id is None:
        raise UsageError("name the ledger: --ledger ID")
    if None not in (args.ledger_flag, args.ledger_id) and args.ledger_flag != args.ledger_id:
        raise UsageError(f"two ledgers named: --ledger {args.ledger_flag} and {args.ledger_id}")
    return args.ledger_flag if args.ledger_flag is not None else args.ledger_id


def _describe_ledger(ledger_id: int, state) -> tuple[dict, str]:
    lac = None
    if state.explicit_lac is not None and len(state.explicit_lac) >= 16:
        lac = int.from_bytes(state.explicit_lac[8:16], "big", signed=True)
    item = {"type": "ledger", "ledgerId": ledger_id, "exists": state.exists,
            "fenced": state.fenced, "limbo": state.limbo,
            "digestType": TYPE_NAMES.get(state.digest_type, str(state.digest_type)),
            "masterKey": state.master_key.hex(), "explicitLac": lac}
    flags = [name for name, on in (("deleted", not state.exists), ("fenced", state.fenced),
                                   ("limbo", state.limbo)) if on]
    text = (f"ledger {ledger_id}: {item['digestType']}" + "".join(f", {f}" for f in flags)
            + f", key {item['masterKey'] or '-'}"
            + (f", explicit lac {lac}" if lac is not None else ""))
    return item, text


# -- ledger <L> ---------------------------------------------------------------------------


def show_ledger(args: argparse.Namespace, out: Output) -> int:
    args.ledger_id = _ledger_id(args)
    data_dir = DataDir.of(args)
    ledgers = data_dir.open_ledgers()
    locations = data_dir.open_locations()
    readers: dict[int, EntryLogReader] = {}
    try:
        state = ledgers.get(args.ledger_id)
        if state is None:
            reason = f"ledger {args.ledger_id} is not in the ledgers index"
            out.problem({"ledgerId": args.ledger_id, "reason": reason}, reason)
        else:
            out.emit(*_describe_ledger(args.ledger_id, state))
        count = 0
        for entry_id, location in locations.entries(args.ledger_id):
            count += 1
            _emit_location(out, data_dir, args.ledger_id, entry_id, location,
                           state if args.read else None, readers)
        out.text(f"{count} entries in the locations index")
    finally:
        for reader in readers.values():
            reader.close()
        ledgers.close()
        locations.close()
    return out.exit_code()


def _emit_location(out: Output, data_dir: DataDir, ledger_id: int, entry_id: int,
                   location: int, state, readers: dict) -> None:
    log_id, pos = split_location(location)
    path = data_dir.log_path(log_id)
    item = {"type": "entry", "ledgerId": ledger_id, "entryId": entry_id,
            "location": location, "logId": log_id, "pos": pos, "file": path}
    text = f"entry {entry_id}: log {log_id:x} pos {pos}"
    if state is None:
        out.emit(item, text)
        return
    try:
        reader = readers.get(log_id)
        if reader is None:
            reader = readers[log_id] = EntryLogReader(data_dir.disk, path, log_id=log_id)
        entry = reader.read_entry(pos, ledger_id, entry_id)
    except IOFailure as exc:
        out.problem({**item, "offset": pos - 4, "reason": exc.message},
                    f"{text}: {exc.message}")
        return
    item.update(size=len(entry), lac=piggybacked_lac(entry))
    digest = DigestType(state.digest_type) if state.digest_type else None
    if digest is not None and digest.verifiable and not entry_digest_ok(entry, digest):
        reason = f"{digest.header_name} digest mismatch"
        out.problem({**item, "offset": pos - 4, "reason": reason}, f"{text}: {reason}")
        return
    checked = "digest ok" if digest is not None and digest.verifiable else "not verifiable"
    out.emit({**item, "digest": checked}, f"{text}, {len(entry)} bytes, lac {item['lac']}, "
             f"{checked}")


# -- info ---------------------------------------------------------------------------------


def show_info(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args).require()
    mark, note = data_dir.read_mark()
    journal_ids = data_dir.journal_ids()
    log_ids = data_dir.log_ids()
    log_paths = [data_dir.log_path(i) for i in log_ids]
    unfinalized = [f"{i:x}" for i, p in zip(log_ids, log_paths) if not _finalized(p)]
    summary = {
        "type": "info", "dataDir": data_dir.root,
        "lastMark": None if mark is None else {"journalId": f"{mark.journal_id:x}",
                                               "offset": mark.offset},
        "journals": {"count": len(journal_ids), "ids": [f"{i:x}" for i in journal_ids],
                     "bytes": sum(os.path.getsize(data_dir.journal_path(i))
                                  for i in journal_ids)},
        "entryLogs": {"count": len(log_ids), "bytes": sum(map(os.path.getsize, log_paths)),
                      "unfinalized": unfinalized, "lastId": _hex(data_dir.read_last_id())},
        "indexes": {name: dir_bytes(data_dir.index_path(name)) for name in INDEX_DIRS},
        "ledgers": _ledger_counts(out, data_dir),
    }
    if mark is not None and mark.journal_id > 0 and mark.journal_id not in journal_ids:
        reason = f"lastMark points at journal {mark.journal_id:x}, which is missing"
        out.problem({"reason": reason}, reason)
    out.emit(summary, _info_text(summary, note))
    return out.exit_code()


def _hex(value: int | None) -> str | None:
    return None if value is None else f"{value:x}"


def _ledger_counts(out: Output, data_dir: DataDir) -> dict | None:
    try:
        ledgers = data_dir.open_ledgers()
    except IOFailure as exc:
        out.problem({"reason": exc.message}, f"ledgers index: {exc.message}")
        return None
    try:
        live = [ledgers.get(i) for i in ledgers.ledger_ids()]
        types = collections.Counter(TYPE_NAMES.get(s.digest_type, "?") for s in live)
        return {"live": len(live), "deleted": len(ledgers.deleted_ids()),
                "fenced": sum(1 for s in live if s.fenced), "digestTypes": dict(types)}
    finally:
        ledgers.close()


def _info_text(summary: dict, note: str) -> str:
    mark = summary["lastMark"]
    journals, logs, ledgers = summary["journals"], summary["entryLogs"], summary["ledgers"]
    lines = [
        f"data dir   {summary['dataDir']}",
        "lastMark   " + (f"journal {mark['journalId']} offset {mark['offset']}" if mark
                         else f"none ({note})"),
        f"journals   {journals['count']} ({human_bytes(journals['bytes'])})"
        + (f": {journals['ids'][0]} .. {journals['ids'][-1]}" if journals["ids"] else ""),
        f"entry logs {logs['count']} ({human_bytes(logs['bytes'])}), lastId {logs['lastId']}"
        + (f", not finalized: {' '.join(logs['unfinalized'])}" if logs["unfinalized"]
           else ""),
        "indexes    " + ", ".join(f"{name} {human_bytes(size)}"
                                  for name, size in summary["indexes"].items()),
    ]
    if ledgers is not None:
        lines.append(f"ledgers    {ledgers['live']} live ({ledgers['fenced']} fenced), "
                     f"{ledgers['deleted']} deleted; digest types "
                     + ", ".join(f"{k} {v}" for k, v in sorted(ledgers["digestTypes"].items())))
    return "\n".join(lines)
