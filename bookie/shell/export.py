"""``export-index``: the ``locations`` index as JSON lines, for the pipeline's index check.

Reads through a RocksDB secondary instance (``KeyValueStore.open(secondary_path=...)``), so
a running bookie keeps running: the export is the index as of the ``catch_up`` at its start
(docs/design.md §8: the pipeline's ``index-check`` anti-joins these lines against the logs).

One line per entry, in (ledgerId, entryId) order:
    {"ledgerId": L, "entryId": E, "logId": X, "pos": P, "location": (X << 32) | P}
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile

from bookie.shell.datadir import LOCATIONS, DataDir
from bookie.shell.output import Output, Progress
from ledgerindex import keys
from ledgerindex.kv import KeyValueStore

_PROGRESS_EVERY = 65536


def register(commands, common: argparse.ArgumentParser) -> None:
    export = commands.add_parser(
        "export-index", parents=[common], help="write the locations index as JSON lines",
        description="Write every (ledgerId, entryId) -> location of the locations index as "
        "one JSON object a line (ledgerId, entryId, logId, pos, location), read through a "
        "RocksDB secondary instance so that a running bookie is not disturbed. The pipeline's "
        "index check reads this file.")
    export.add_argument("--out", required=True, metavar="FILE",
                        help="output file, written via FILE.tmp and renamed; - for stdout")
    export.set_defaults(handler=export_index)


def export_index(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    data_dir.require_index(LOCATIONS)
    secondary = tempfile.mkdtemp(prefix="bookie-export-index-")
    try:
        kv = KeyValueStore.open(data_dir.index_path(LOCATIONS), lz4=True,
                                secondary_path=secondary)
        try:
            kv.catch_up()
            count = _write(args, out, data_dir, kv)
        finally:
            kv.close()
    finally:
        shutil.rmtree(secondary, ignore_errors=True)
    summary = {"type": "summary", "entries": count, "out": args.out}
    text = f"exported {count} locations to {args.out}"
    if args.out == "-":
        out.err.write(text + "\n")
    else:
        out.emit(summary, text)
    return out.exit_code()


def _write(args, out: Output, data_dir: DataDir, kv: KeyValueStore) -> int:
    progress = Progress("export-index", out.err, enabled=not args.no_progress)
    to_stdout = args.out == "-"
    tmp = args.out + ".tmp"
    handle = sys.stdout if to_stdout else open(tmp, "w", encoding="ascii")
    count = 0
    try:
        for key, value in kv.items():
            ledger_id, entry_id = keys.decode_location_key(key)
            location = keys.decode_location_value(value)
            if location == 0:
                continue  # "absent" (docs/formats.md §7.1)
            handle.write(f'{{"ledgerId":{ledger_id},"entryId":{entry_id},'
                         f'"logId":{location >> 32},"pos":{location & 0xFFFFFFFF},'
                         f'"location":{location}}}\n')
            count += 1
            if count % _PROGRESS_EVERY == 0:
                progress.update(count, None, unit="entries")
    finally:
        progress.finish()
        if not to_stdout:
            handle.close()
    if not to_stdout:
        data_dir.disk.rename(tmp, args.out)
    return count
