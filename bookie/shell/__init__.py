"""``bookie shell``: offline tools on a stopped bookie's files, or a copy (docs/http-api.md "CLI").

Apache BookKeeper's ``bookkeeper shell`` and Kafka's DumpLogSegments are the models. Every
tool reads the files through the same format modules the daemon uses (``journal.reader``,
``entrylog.reader``, ``ledgerindex``), so the shell and the daemon cannot disagree about a
byte. Output conventions and exit codes: ``bookie/shell/output.py``.

Commands, one module each (or a few grouped):
    readjournal, lastmark                   journals.py
    readlog, readlogmetadata                logs.py
    listfiles, listledgers, ledger, info    overview.py
    scrub                                   scrub_cmd.py (engine: bookie/scrub.py)
    check-index                             check_index.py
    bk-ready                                bk_ready.py
    rebuild-index                           rebuild.py
    export-index                            export.py
    gc                                      gc.py (engine: bookie/gc.py)
    cookie, listbookies                     cookie.py (ZooKeeper)
    listunderreplicated, decommission,
    autorecovery                            autorecovery_cmd.py (ZooKeeper; api/cluster/autorecovery/)

BookKeeper's own names and flags (``-nonInteractive``, ``-bookieId``...), their settings from
the bookie's (``-conf bookkeeper.conf``...; bk_settings.py), as ``bookkeeper shell`` runs them
(bookie/bk_entry.py):
    whatisinstanceid, initnewcluster,
    forceauditchecks                        bk_cluster.py
    bookieformat, initbookie                bk_format.py
    cookie_create|delete|get|update|generate
                                            bk_cookie.py
    updatecookie                            bk_updatecookie.py
    endpointinfo, activeledgers             bk_info.py

This is an entry point: nothing imports it but ``bookie.cli`` and ``bookie.bk_entry``
(docs/design.md §5).
"""

from __future__ import annotations

import argparse
import logging
import sys

from api.client.metadata import MetadataError
from bookie.errors import IOFailure
from bookie.shell import (autorecovery_cmd, bk_cluster, bk_cookie, bk_format, bk_info, bk_ready,
                          bk_updatecookie, check_index, cookie, export, gc, journals, logs,
                          overview, rebuild, scrub_cmd)
from bookie.shell.bk_settings import EXIT_BK_FAILURE, metadata_uri, settings
from bookie.shell.datadir import UsageError
from bookie.shell.output import EXIT_ERROR, EXIT_OK, Output

_MODULES = (journals, logs, overview, scrub_cmd, check_index, bk_ready, rebuild, export, gc,
            cookie, autorecovery_cmd, bk_cluster, bk_format, bk_cookie, bk_updatecookie,
            bk_info)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default="./data",
                        help="the bookie's data dir (default ./data)")
    common.add_argument("--journal-dir", metavar="DIR",
                        help="one journal dir of a bookie with several (journal_dirs): "
                        "read DIR/current instead of <data-dir>/journal/current")
    common.add_argument("--ledger-dir", metavar="DIR",
                        help="one ledger dir of a bookie with several (ledger_dirs): "
                        "read DIR/current instead of <data-dir>/ledgers/current")
    common.add_argument("--index-dir", metavar="DIR",
                        help="the index dir of that ledger dir, when the bookie keeps its "
                        "indexes apart (index_dirs): read DIR/current/locations and "
                        "DIR/current/ledgers instead of the ledger dir's")
    common.add_argument("--journal-index", type=int, default=None, metavar="I",
                        help="lastmark: the mark of journal I (lastMark.I) of a bookie "
                        "with several journal dirs; pass that journal's --journal-dir")
    common.add_argument("--json", action="store_true",
                        help="one JSON object per line instead of text")
    common.add_argument("--no-progress", action="store_true",
                        help="no progress bar or progress lines on stderr")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="also log the readers' warnings to stderr")
    parser = argparse.ArgumentParser(
        prog="bookie shell",
        description="Offline tools on a bookie's files: run them on a stopped bookie or a "
        "copy. Exit codes: 0 clean, 1 problems found, 2 usage or I/O error. "
        "'bookie shell COMMAND --help' explains each command.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _MODULES:
        module.register(commands, common)
    return parser


def _bk_named(parser: argparse.ArgumentParser, name: str | None) -> bool:
    """Whether ``name`` is one of BookKeeper's commands (bk_settings.py BS2 exit codes)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        chosen = getattr(action, "choices", {}).get(name)
        if chosen is not None:
            return bool(chosen.get_default("bk_command"))
    return False


def main(argv: list[str], conf: str | None = None) -> int:
    """Run one shell command; returns the exit code (never raises for expected failures).
    ``conf``: the BookKeeper configuration file of BookKeeper-named commands given no -conf
    (``bookkeeper shell``'s $BOOKIE_CONF, bookie/bk_entry.py BE1)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2): argparse printed it
        if exit_.code in (0, None):
            return EXIT_OK
        return EXIT_BK_FAILURE if argv and _bk_named(parser, argv[0]) else EXIT_ERROR
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    if (getattr(args, "bk_command", False) or getattr(args, "zk_command", False)) \
            and args.conf is None:
        args.conf = conf
    _setup_logging(args.verbose)
    out = Output(args.json)
    try:
        if getattr(args, "zk_command", False):  # the URI from the flag, env or -conf (BS1)
            args.metadata_service_uri = metadata_uri(settings(args, zookeeper_only=True))
        return args.handler(args, out)
    except UsageError as exc:
        out.error(str(exc))
        return EXIT_ERROR
    except IOFailure as exc:
        out.error(exc.message)
        return EXIT_ERROR
    except MetadataError as exc:  # ZooKeeper's refusal or silence (ZK5): said, no traceback
        out.error(str(exc))
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. piped into head: the reader has what it wanted
        return EXIT_OK
    except OSError as exc:
        out.error(f"{exc.filename or ''}: {exc.strerror or exc}")
        return EXIT_ERROR


def _setup_logging(verbose: bool) -> None:
    # The readers log what the commands also print as records; repeat it only on request.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("bookie shell: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.ERROR + 10)
