"""``endpointinfo`` and ``activeledgers`` under BookKeeper's names and flags (BookieShell's
EndpointInfoCmd, ListActiveLedgersCmd), with its output lines. Settings and exit codes:
bookie/shell/bk_settings.py (BS1-BS3).

Invariants:
    BI1. ``endpointinfo`` answers from the bookie's registration znode (its service info,
         BookKeeper's BookieServiceInfoFormat), so a BookKeeper bookie of the same cluster is
         shown as well as ours; a bookie that is not registered fails (255), as one that
         published no endpoint.
    BI2. ``activeledgers`` counts an entry log's ledgers (its ledgersMap, else a scan of its
         entries) that the metadata store still lists; a listing that takes longer than
         -timeout fails (255; BookKeeper's logs a line and exits 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from api.client.zookeeper import ZkMetadataStore, bookie_registration
from bookie.disk import OsDisk
from bookie.shell.bk_settings import add, failure, metadata_uri, settings
from bookie.shell.cookie import zookeeper
from bookie.shell.output import EXIT_OK, Output
from entrylog.format import SIZE, log_file_name
from entrylog.reader import EntryLogReader


def register(commands, common: argparse.ArgumentParser) -> None:
    info = add(commands, "endpointinfo", endpoint_info,
               "a registered bookie's endpoints (BookKeeper's name)",
               "Print the endpoints and properties a bookie published in its registration "
               "(BookKeeper's lines). Exit 255 if it is not registered.")
    info.add_argument("-b", "-bookieid", "--bookieid", dest="bookie_id", required=True,
                      metavar="HOST:PORT", help="the bookie")
    active = add(commands, "activeledgers", active_ledgers,
                 "an entry log's ledgers that still exist (BookKeeper's name)",
                 "List the ledgers of entry log LOGID (decimal, as BookKeeper's; the file is "
                 "<hex>.log) that the metadata store still lists, with their bytes.")
    active.add_argument("-l", "-logId", "--logId", dest="log_id", type=int, required=True,
                        help="the entry log's id (decimal)")
    active.add_argument("-t", "-timeout", "--timeout", dest="timeout_ms", type=int,
                        default=1000, help="bound on listing the ledgers, ms (default 1000)")


def endpoint_info(args: argparse.Namespace, out: Output) -> int:
    with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
        endpoints, properties = bookie_registration(client, root, args.bookie_id)
    if endpoints is None:
        return failure(f"Bookie {args.bookie_id} does not exist, or is not registered")
    if not endpoints:  # BI1
        return failure("Bookie did not publish any endpoint info. Maybe it is down")
    out.emit({"type": "endpointinfo", "bookieId": args.bookie_id, "properties": properties,
              "endpoints": [{"id": i, "host": h, "port": p, "protocol": proto}
                            for i, h, p, proto in endpoints]},
             "\n".join([f"BookiedId: {args.bookie_id}"]
                       + (["Properties"] + [f"{k} : {v}" for k, v in sorted(properties.items())]
                          if properties else [])
                       + [line for i, h, p, proto in endpoints for line in (
                           f"Endpoint: {i}", f"Protocol: {proto}", f"Address: {h} : {p}",
                           "Auth: []", "Extensions: []")]))
    return EXIT_OK


def active_ledgers(args: argparse.Namespace, out: Output) -> int:
    config = settings(args)
    name = log_file_name(args.log_id)
    paths = [os.path.join(d, name) for d in config.ledger_dirs_current
             if os.path.exists(os.path.join(d, name))]
    if not paths:
        return failure(f"no entry log {name} (id {args.log_id}) in "
                       f"{', '.join(config.ledger_dirs_current)}")
    totals = _totals(paths[0], args.log_id)
    store = ZkMetadataStore(metadata_uri(config))
    try:
        listed = set(asyncio.run(_listed(store, args.timeout_ms / 1000)))
    except TimeoutError:  # BI2
        return failure("Read active ledgers id from metadata store timeout")
    finally:
        store._stop()
    active = {ledger: size for ledger, size in totals.items() if ledger in listed}
    if not totals:
        out.text(f"Ledgers on log file {args.log_id} is empty")
    out.text(f"Print active ledgers of entrylog {args.log_id} ({args.log_id:x}.log)")
    remaining, total = sum(active.values()), sum(totals.values())
    if remaining == 0:
        out.text(f"No active ledgers on log file {args.log_id}")
    else:
        out.text(f"entryLogId: {args.log_id}, remaining size: {remaining}, total size: "
                 f"{total}, usage: {remaining / total if total else 0.0}")
    for ledger_id, size in sorted(active.items()):
        out.emit({"type": "activeLedger", "logId": args.log_id, "ledgerId": ledger_id,
                  "totalBytes": size},
                 f"--------- Lid={ledger_id}, TotalSizeOfEntriesOfLedger={size}  ---------")
    return EXIT_OK


async def _listed(store: ZkMetadataStore, timeout_s: float) -> list[int]:
    return await asyncio.wait_for(store.ledger_ids(), timeout_s)


def _totals(path: str, log_id: int) -> dict[int, int]:
    """Bytes per ledger in the log: its ledgersMap, else what a scan of its entries adds up
    to (a log not yet finalized: the bookie's current one, or one a crash left)."""
    with EntryLogReader(OsDisk(), path, log_id=log_id) as reader:
        totals = reader.ledgers_map()
        if totals is not None:
            return totals
        scanned: dict[int, int] = {}
        for found in reader.scan(payload=False):
            scanned[found.ledger_id] = scanned.get(found.ledger_id, 0) + found.size + SIZE.size
        return scanned
