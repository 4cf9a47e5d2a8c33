"""``bookie ledger``'s command line: its parser, flags and help (the commands are cli.py).

Every flag has a help text (tests/contract/test_cli_help.py holds that), and the help says
what the code does: which flags a command checks against the writer's, where an answer
comes from (the bookie or the metadata service), what a read past the end does.
"""

from __future__ import annotations

import argparse
import os

from api.client.placement import POLICIES

DEFAULT_URL = "http://127.0.0.1:3180"
PASSWORD_ENV = "BOOKIE_LEDGER_PASSWORD"

DESCRIPTION = """\
Use ledgers on a running bookie from the shell. A ledger is an append-only sequence of
entries (0, 1, 2, ...) written by one writer; readers see entries up to the last add
confirmed (LAC). Entries are framed and digested here, in the client, as BookKeeper's
client does: readers check every digest, so --digest must be the writer's, and so must
--password on a mac ledger (mac digests are keyed by it; other digests are not). write
--append and recover always need the writer's --password: the bookie checks it as the
ledger's master key.
"""

EPILOG = """\
examples:
  printf 'a\\nb\\nc\\n' | bookie ledger write --ledger 7      three entries, one per line
  bookie ledger write --ledger 8 --raw 65536 < big.bin       64 KiB entries
  bookie ledger read --ledger 7                              a, b, c: one per line
  bookie ledger tail --ledger 7 --from 3                     follow new entries as they come
  bookie ledger recover --ledger 7                           fence and close after a crash
  bookie ledger info --ledger 7

With --metadata FILE, ledgers get metadata in a local JSON file, as BookKeeper keeps it in
ZooKeeper: `write` may omit --ledger (an id is allocated); `write`, at its end, and `recover`
mark the ledger CLOSED; `tail` stops at the end of a closed ledger; the digest type comes
from the metadata; and `info`, `list` and `delete` read the metadata, not a bookie (`info`
adds the bookie's view when --url is given).
"""

READ_DESCRIPTION = """\
Print the confirmed entries FROM..TO (default 0..the end), each verified against its
digest. The end is the last entry of a closed ledger, else the LAC: entries past it are not
confirmed, `recover` confirms them after a crash. A range reaching past the end prints the
entries there are, then one line on stderr, 'ledger L ends at entry N; asked up to M' (or
'asked from A' when --from is past the end), and exits 0, as `head` does on a short file.
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None,
                        help=f"the bookie (default {DEFAULT_URL}); `info` with metadata asks "
                        "a bookie only when --url is given")
    parser.add_argument("--password", default=os.environ.get(PASSWORD_ENV, ""),
                        help=f"the ledger's password (default ${PASSWORD_ENV}, else empty); "
                        "write --append and recover need the writer's (the bookie checks it "
                        "as the master key); read and tail check it on a mac ledger only")
    parser.add_argument("--digest", default="crc32c", choices=["crc32c", "crc32", "mac", "dummy"],
                        help="the entry digest type, the writer's (default crc32c); another "
                        "one fails with 'digest does not match'; ignored where metadata "
                        "names the ledger's")
    parser.add_argument("--metadata", metavar="FILE",
                        help="ledger metadata file (FileMetadataStore); optional")
    parser.add_argument("--metadata-service-uri", metavar="URI",
                        default=os.environ.get("BOOKIE_METADATA_SERVICE_URI"),
                        help="ledger metadata service instead: zk://host:port/ledgers (a "
                        "cluster's ZooKeeper) or file:///path (default "
                        "$BOOKIE_METADATA_SERVICE_URI)")


def _ledger(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--ledger", type=int, required=required, metavar="ID",
                        help="ledger id (>= 0)")


def _payload_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", action="store_true",
                        help="write payloads back to back (default: each followed by a "
                        "newline, the inverse of `write`'s one entry per line)")


def _command(commands, name: str, help_text: str, description: str,
             ledger_required: bool = True) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=description)
    _common(parser)
    _ledger(parser, required=ledger_required)
    return parser


def _add_write(commands) -> None:
    write = _command(commands, "write",
                     "append stdin to a ledger, one entry per line (or --raw N bytes)",
                     "Append stdin as entries, pipelined, then close the ledger (publishing "
                     "its last entry as the LAC). Prints {ledgerId, lastEntryId, length} as "
                     "JSON. A ledger that exists is refused unless --append.",
                     ledger_required=False)
    write.add_argument("--raw", type=int, metavar="N",
                       help="entries are N-byte chunks of stdin (the last may be shorter) "
                       "instead of lines without their newline")
    write.add_argument("--append", action="store_true",
                       help="append to an existing ledger (no other writer may hold it)")
    write.add_argument("--batch", type=int, default=100, metavar="N",
                       help="most queued entries sent in one request (default 100)")
    write.add_argument("--ensemble", type=int, metavar="E",
                       help="a replicated ledger on E bookies of the cluster "
                       "(--metadata-service-uri zk://...): each entry on --write-quorum of "
                       "them, acknowledged at --ack-quorum (docs/cluster.md)")
    write.add_argument("--write-quorum", type=int, metavar="QW",
                       help="bookies each entry is written to (default: E)")
    write.add_argument("--ack-quorum", type=int, metavar="QA",
                       help="acknowledgements an entry waits for (default: QW)")
    write.add_argument("--placement", default="rack", choices=POLICIES,
                       help="how the ensemble spreads over the bookies' racks, zones or hosts "
                       "(docs/cluster.md §6; default rack, as BookKeeper's client)")
    write.add_argument("--placement-strict", action="store_true",
                       help="refuse the ledger when the policy cannot be met")


def _add_read_and_tail(commands) -> None:
    read = _command(commands, "read", "print entries' payloads to stdout", READ_DESCRIPTION)
    read.add_argument("--from", dest="first", type=int, default=0, metavar="A",
                      help="first entry (default 0)")
    read.add_argument("--to", dest="to", type=int, metavar="B",
                      help="last entry (default: the end, the LAC or a closed ledger's "
                      "last entry; past the end: a note on stderr, exit 0)")
    read.add_argument("--last", dest="last_only", action="store_true",
                      help="print only the last confirmed entry")
    _payload_format(read)
    tail = _command(commands, "tail", "follow a ledger, printing entries as confirmed",
                    "Print each confirmed entry once, in order, waiting for new ones with "
                    "the LAC long poll. Stops at --until, at the end of a ledger closed in "
                    "--metadata, or on Ctrl-C. A ledger unknown to the bookie (no entry "
                    "written yet) and without metadata is refused, as read refuses it; a "
                    "ledger in the metadata with no entries yet is waited for.")
    tail.add_argument("--from", dest="first", type=int, default=0, metavar="A",
                      help="first entry to print (default 0)")
    tail.add_argument("--until", type=int, metavar="B", help="stop after entry B")
    _payload_format(tail)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bookie ledger", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_write(commands)
    _add_read_and_tail(commands)
    _command(commands, "recover",
             "fence a ledger whose writer died and close it at its last good entry",
             "Fence the ledger (its writer, if alive, gets EFENCED), verify the entries "
             "after the LAC, close the ledger before the first gap or bad digest and publish "
             "that as the LAC. Prints the result as JSON. Safe to run twice. Never creates "
             "a ledger: one the metadata (if given) or else the bookie does not know is "
             "refused (ENOLEDGER).")
    _command(commands, "info", "a ledger's metadata, or the bookie's view of it, as JSON",
             "With --metadata or --metadata-service-uri: the ledger's metadata, "
             "{ledgerId, metadata}, read from there without a bookie (with --url also "
             "the bookie's view, GET /v1/ledgers/ID). Without: the bookie's view.")
    listing = _command(commands, "list", "the ledgers the metadata service knows",
                       "One line per ledger with metadata: id, state, E/Qw/Qa, last entry, "
                       "length, ensembles (--json: one JSON object per line). Needs "
                       "--metadata or --metadata-service-uri.", ledger_required=False)
    listing.add_argument("--json", action="store_true", help="JSON lines")
    _command(commands, "delete", "delete a ledger's metadata",
             "Delete the ledger's metadata (compare-and-set on the version read). In a "
             "cluster every bookie then deletes its copies at its next garbage collection "
             "(gc_metadata_grace_ms later). Needs --metadata or --metadata-service-uri.")
    return parser
