"""``bookieformat`` and ``initbookie``: a bookie's own dirs and cookie, under BookKeeper's
names and flags (BookieShell's BookieFormatCmd, InitBookieCmd). The dirs, the bookie id and
the ZooKeeper come from the bookie's settings (bookie/shell/bk_settings.py BS1-BS3).

The Pulsar helm chart runs ``bookieformat -nonInteractive -force -deleteCookie`` in the init
container of a bookie without persistent volumes, so that a pod on new empty disks starts as
a new member instead of being refused by its old cookie (CK1 in api/cluster/member.py).

Invariants:
    BF1. As BookKeeper's BookieImpl.format: without -force in non-interactive mode, a journal
         dir that holds anything stops the command (exit 1) before anything is deleted;
         interactive, the operator confirms.
    BF2. The dirs' contents go, the dirs stay (created if missing), as BookKeeper's cleanDir.
    BF3. Never under a running bookie: a held RocksDB lock in a ledger dir stops the command
         before anything is deleted (BookKeeper has no such check).
    BF4. With -deleteCookie, ZooKeeper is reached before anything is deleted, so an
         unreachable ZooKeeper leaves the data and the cookie as they were (BookKeeper
         formats first and fails after). No cookie to delete fails (255) as in BookKeeper;
         the chart ends the command with ``|| true``.
"""

from __future__ import annotations

import argparse
import os
import shutil

from api.client.zookeeper import alive_bookies
from api.cluster.zookeeper import ZkCookies
from bookie.shell.bk_settings import (EXIT_BK_FALSE, add, bookie_id, confirm, every_dir,
                                      failure, metadata_uri, settings)
from bookie.shell.cookie import zookeeper
from bookie.shell.datadir import DataDir
from bookie.shell.output import EXIT_OK, Output


def register(commands, common: argparse.ArgumentParser) -> None:
    fmt = add(commands, "bookieformat", bookie_format,
              "wipe this bookie's journal and ledger dirs (BookKeeper's name)",
              "Delete the contents of the bookie's journal and ledger dirs (from its "
              "settings: -conf, --config, BOOKIE_*). Interactive, it asks first if a journal "
              "dir holds data; -nonInteractive without -force refuses then (exit 1). "
              "-deleteCookie also deletes the bookie's cookie in ZooKeeper (exit 255 if it "
              "has none). Refuses while a bookie runs on the dirs.")
    fmt.add_argument("-n", "-nonInteractive", "--nonInteractive", dest="non_interactive",
                     action="store_true", help="do not ask; see -force")
    fmt.add_argument("-f", "-force", "--force", dest="force", action="store_true",
                     help="with -nonInteractive: delete existing data")
    fmt.add_argument("-d", "-deleteCookie", "--deleteCookie", dest="delete_cookie",
                     action="store_true", help="also delete the cookie in ZooKeeper")
    add(commands, "initbookie", init_bookie,
        "check that a new bookie may start here (BookKeeper's name)",
        "Check that the bookie's journal and ledger dirs are empty, that no bookie with its "
        "id is registered and that ZooKeeper holds no cookie of it. Exit 1 if not.")


def _not_empty(directory: str) -> bool:
    return os.path.isdir(directory) and bool(os.listdir(directory))


def _clean(directory: str) -> None:
    """BF2."""
    if not os.path.isdir(directory):
        os.makedirs(directory)
        return
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def bookie_format(args: argparse.Namespace, out: Output) -> int:
    config = settings(args)
    journals = [os.path.dirname(d) for d in config.journal_dirs_current]
    if any(_not_empty(d) for d in journals):  # BF1
        confirmed = args.force if args.non_interactive else \
            confirm("Are you sure to format Bookie data..?")
        if not confirmed:
            return failure("Bookie format aborted!! (the journal dir holds data: add -force "
                           "to delete it)", EXIT_BK_FALSE)
    for ledger_dir in config.ledger_dirs_current:  # BF3
        DataDir(config.data_dir, ledger_dir=os.path.dirname(ledger_dir)).check_not_in_use()
    if not args.delete_cookie:
        _format(config, out)
        return EXIT_OK
    uri, me = metadata_uri(config), bookie_id(config)
    with zookeeper(uri) as (client, root):  # BF4: reached before anything is deleted
        cookies = ZkCookies(client, root)
        _format(config, out)
        if not cookies.delete(me):
            return failure(f"Cookie not found for bookie '{me}' in {uri}")
    out.emit({"type": "cookieDeleted", "bookieId": me},
             f"Removed cookie from {root}/cookies for bookie {me}.")
    return EXIT_OK


def _format(config, out: Output) -> None:
    dirs = every_dir(config)
    for directory in dirs:
        _clean(directory)
    out.emit({"type": "formatted", "dirs": dirs}, "Bookie format completed successfully")


def init_bookie(args: argparse.Namespace, out: Output) -> int:
    config = settings(args)
    kinds = ["JournalDir"] * len(config.journal_dirs_current) + \
        ["LedgerDir"] * len(config.ledger_dirs_current)
    for kind, directory in zip(kinds, every_dir(config)):
        if _not_empty(directory):
            return failure(f"{kind}: {directory} is existing and its not empty, try "
                           f"formatting the bookie", EXIT_BK_FALSE)
    me = bookie_id(config)
    with zookeeper(metadata_uri(config)) as (client, root):
        if me in alive_bookies(client, root):
            return failure(f"Bookie with bookieId: {me} is still registered, If this node "
                           f"is running bookie process, try stopping it first.", EXIT_BK_FALSE)
        if ZkCookies(client, root).read(me) is not None:
            return failure(f"Cookie still exists in the ZK for this bookie: {me}, try "
                           f"formatting the bookie", EXIT_BK_FALSE)
    out.emit({"type": "initbookie", "bookieId": me}, f"bookie {me} may start as a new bookie")
    return EXIT_OK
