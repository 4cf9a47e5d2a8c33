"""``bk-ready``: can BookKeeper's DbLedgerStorage bookie start on these ledger dirs and find
every ledger? A check on a stopped bookie's dirs before swapping the software (the index
form it checks: docs/formats.md §7.2).

Two things BookKeeper cannot do, which this bookie can leave behind:
    BR1. DbLedgerStorage looks for ledger L only in ledger dir ``L mod n`` (n = the number of
         ledger dirs, in the order ``ledgerDirectories`` lists them). A ledger this bookie
         placed elsewhere because its own dir was full (PL2 in bookie/storage_routes.py) is
         not found there: its reads fail as NoSuchLedger. A tombstone elsewhere is harmless
         to BookKeeper, but is listed for the same reason.
    BR2. An index still of the older BKLD form (never opened by this version, or its
         carry-over not finished) is unreadable to BookKeeper: start this bookie once.
With ``--move``, BR1's ledgers and tombstones are first moved to dir ``L mod n``, copied
before they are forgotten (MH1-MH3 in bookie/ledger_move.py; kill -9 safe, run it again).
Exit 0: ready; 1: problems listed; 2: usage or I/O error.
"""

from __future__ import annotations

import argparse
import os

from bookie import ledger_move
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.shell.datadir import DataDir, UsageError
from bookie.storage_dirs import DirsStorage
from bookie.shell.output import Output
from ledgerindex.ledgers import LedgerMetadataIndex


def register(commands, common: argparse.ArgumentParser) -> None:
    ready = commands.add_parser(
        "bk-ready", parents=[common],
        help="check that BookKeeper's DbLedgerStorage can serve these ledger dirs",
        description="Before starting Apache BookKeeper's DbLedgerStorage bookie on a stopped "
        "bookie's dirs: check that every ledger is in the ledger dir BookKeeper looks in "
        "(ledger id mod the number of dirs) and that every ledgers index is in BookKeeper's "
        "LedgerData form. Exit 0 ready, 1 problems found, 2 usage or I/O error.")
    ready.add_argument("--ledger-dirs", required=True, metavar="D1,D2,...",
                       help="every ledger dir, in the order the bookie's ledger_dirs (and "
                       "BookKeeper's ledgerDirectories) list them")
    ready.add_argument("--index-dirs", metavar="I1,I2,...",
                       help="the index dirs, one for each ledger dir, when the indexes are "
                       "kept apart (index_dirs)")
    ready.add_argument("--move", action="store_true",
                       help="first move every ledger outside dir L mod n there (copied, "
                       "synced, then removed from where it was; safe to run again)")
    ready.set_defaults(handler=bk_ready)


def bk_ready(args: argparse.Namespace, out: Output) -> int:
    ledger_dirs = [d for d in args.ledger_dirs.split(",") if d]
    index_dirs = [d for d in (args.index_dirs or "").split(",") if d] or [None] * len(ledger_dirs)
    if len(index_dirs) != len(ledger_dirs):
        raise UsageError(f"{len(index_dirs)} index dirs for {len(ledger_dirs)} ledger dirs: "
                         f"give one index dir for each ledger dir, in the same order")
    count = len(ledger_dirs)
    ledgers = 0
    data_dirs = [DataDir(os.path.dirname(os.path.abspath(ledger_dir)), ledger_dir=ledger_dir,
                         index_dir=index_dir)
                 for ledger_dir, index_dir in zip(ledger_dirs, index_dirs)]
    for data_dir in data_dirs:
        data_dir.check_not_in_use()
    if args.move:
        for data_dir in data_dirs:
            data_dir.require_index("ledgers")
        _move(out, ledger_dirs, index_dirs)
    for position, (ledger_dir, data_dir) in enumerate(zip(ledger_dirs, data_dirs)):
        index = data_dir.open_ledgers()
        try:
            ledgers += _check_dir(out, position, count, ledger_dir, index)
        finally:
            index.close()
    out.emit({"type": "summary", "ledgerDirs": count, "ledgers": ledgers,
              "problems": out.problems},
             f"{count} ledger dirs, {ledgers} ledgers: "
             + ("ready for BookKeeper's DbLedgerStorage" if not out.problems
                else f"{out.problems} problems: not ready"))
    return out.exit_code()


def _check_dir(out: Output, position: int, count: int, ledger_dir: str,
               index: LedgerMetadataIndex) -> int:
    if not index.format_current:  # BR2
        out.problem({"type": "olderForm", "ledgerDir": ledger_dir},
                    f"{ledger_dir}: the ledgers index is still of the older BKLD form; start "
                    f"this bookie once on these dirs so it carries the index over")
    live = index.ledger_ids()
    for ledger_id in sorted(live + index.deleted_ids()):
        if ledger_id % count != position:  # BR1
            kind = "ledger" if index.get(ledger_id).exists else "tombstone of ledger"
            out.problem({"type": "offHome", "ledgerId": ledger_id, "ledgerDir": ledger_dir,
                         "bookkeeperDir": ledger_id % count, "exists": kind == "ledger"},
                        f"{kind} {ledger_id} is in ledger dir {position} ({ledger_dir}); "
                        f"BookKeeper looks for it only in dir {ledger_id % count} "
                        f"({ledger_id} mod {count})")
    return len(live)


def _move(out: Output, ledger_dirs: list[str], index_dirs: list) -> None:
    """MH1-MH3: every ledger and tombstone outside its dir moved there, one at a time."""
    config = BookieConfig(data_dir=os.path.dirname(os.path.abspath(ledger_dirs[0])),
                          ledger_dirs=",".join(ledger_dirs),
                          index_dirs=",".join(index_dirs) if index_dirs[0] else None)
    storage = DirsStorage(OsDisk(), config)
    storage.open()
    try:
        for ledger_id, source in ledger_move.off_home(storage):
            moved = ledger_move.move_home(storage, ledger_id, source)
            kind = "tombstone of ledger" if moved.tombstone else "ledger"
            out.emit({"type": "moved", "ledgerId": ledger_id, "from": source,
                      "to": moved.target, "entries": moved.entries},
                     f"moved {kind} {ledger_id} from ledger dir {source} to dir "
                     f"{moved.target}" + ("" if moved.tombstone else
                                          f" ({moved.entries} entries)"))
        for ledger_id, position in ledger_move.drop_leftover_locations(storage):
            out.emit({"type": "leftoverLocations", "ledgerId": ledger_id, "ledgerDir": position},
                     f"deleted ledger {ledger_id}'s leftover locations in ledger dir {position}")
    finally:
        storage.close()
