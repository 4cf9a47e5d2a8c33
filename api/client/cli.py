"""``bookie ledger``: write, read, tail, recover and inspect ledgers on a running bookie.

The shell face of the ledger library (api/client/ledger.py): ``bookie.cli`` dispatches
``bookie ledger ARGS...`` here. Payloads go through stdin and stdout so the commands compose
with pipes; summaries are one JSON object per line; diagnostics go to stderr.

Exit codes: 0 done, 1 the bookie or the ledger refused (the message names why), 2 usage,
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from typing import AsyncIterator, BinaryIO

import aiohttp

from api.client.bookie_client import BookieClient
from api.client.ledger import (LedgerClosedError, LedgerReader, LedgerWriter, WriterOptions,
                               recover_ledger)
from api.client.metadata import FileMetadataStore, MetadataError
from api.client.placement import POLICIES
from api.client import cli_replicated as replicated
from api.client.metadata_service import open_metadata_store
from bookie.errors import BookieError

DEFAULT_URL = "http://127.0.0.1:3180"
PASSWORD_ENV = "BOOKIE_LEDGER_PASSWORD"
STDIN_CHUNK_BYTES = 1 << 16
#: A line longer than this cannot be an entry (docs/http-api.md's default max_entry_size); refusing it
#: bounds the buffer a stream without newlines could grow.
LINE_BYTES_MAX = 5 * 1024 * 1024

DESCRIPTION = """\
Use ledgers on a running bookie from the shell. A ledger is an append-only sequence of
entries (0, 1, 2, ...) written by one writer; readers see entries up to the last add
confirmed (LAC). Entries are framed and digested here, in the client, as BookKeeper's
client does: readers check every digest, so --password and --digest must match the writer's
(the password is also the ledger's master key on the bookie).
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
mark the ledger CLOSED; and `tail` stops at the end of a closed ledger.
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the bookie (default {DEFAULT_URL})")
    parser.add_argument("--password", default=os.environ.get(PASSWORD_ENV, ""),
                        help=f"the ledger's password (default ${PASSWORD_ENV}, else empty)")
    parser.add_argument("--digest", default="crc32c", choices=["crc32c", "crc32", "mac", "dummy"],
                        help="entry digest type (default crc32c; mac needs the password to "
                        "read too)")
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
                     "JSON.", ledger_required=False)
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
    write.add_argument("--write-quorum", type=int, metavar="QW", help="default: E")
    write.add_argument("--ack-quorum", type=int, metavar="QA", help="default: QW")
    write.add_argument("--placement", default="rack", choices=POLICIES,
                       help="how the ensemble spreads over the bookies' racks, zones or hosts "
                       "(docs/cluster.md §6; default rack, as BookKeeper's client)")
    write.add_argument("--placement-strict", action="store_true",
                       help="refuse the ledger when the policy cannot be met")


def _add_read_and_tail(commands) -> None:
    read = _command(commands, "read", "print entries' payloads to stdout",
                    "Print entries FROM..TO (default 0..LAC), each verified against its "
                    "digest.")
    read.add_argument("--from", dest="first", type=int, default=0, metavar="A")
    read.add_argument("--to", dest="to", type=int, metavar="B",
                      help="last entry (default: the LAC)")
    read.add_argument("--last", dest="last_only", action="store_true",
                      help="print only the last confirmed entry")
    _payload_format(read)
    tail = _command(commands, "tail", "follow a ledger, printing entries as confirmed",
                    "Print each confirmed entry once, in order, waiting for new ones with "
                    "the LAC long poll. Stops at --until, at the end of a ledger closed in "
                    "--metadata, or on Ctrl-C.")
    tail.add_argument("--from", dest="first", type=int, default=0, metavar="A")
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
             "that as the LAC. Prints the result as JSON. Safe to run twice.")
    _command(commands, "info", "the bookie's view of a ledger, as JSON",
             "GET /v1/ledgers/ID, plus the metadata if --metadata or "
             "--metadata-service-uri is given.")
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


# -- commands -------------------------------------------------------------------------------


def _store(args):
    """The metadata store the flags name (one per run, closed by ``main``), or None."""
    if getattr(args, "store", None) is None:
        if args.metadata_service_uri:
            args.store = open_metadata_store(args.metadata_service_uri)
        elif args.metadata:
            args.store = FileMetadataStore(args.metadata)
    return getattr(args, "store", None)


def _required_store(args):
    store = _store(args)
    if store is None:
        raise ValueError("needs --metadata FILE or --metadata-service-uri URI")
    return store


def _print_json(value: dict) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def _records(stream: BinaryIO, raw_size: int | None) -> AsyncIterator[bytes]:
    """stdin as entries: lines without their newline, or ``raw_size``-byte chunks."""
    pending = b""
    while True:
        chunk = await asyncio.to_thread(stream.read1, STDIN_CHUNK_BYTES)
        pending += chunk
        if raw_size:
            while len(pending) >= raw_size or (not chunk and pending):
                record, pending = pending[:raw_size], pending[raw_size:]
                yield record
        else:
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line
            if len(pending) > LINE_BYTES_MAX:
                raise ValueError(f"a line of stdin is over {LINE_BYTES_MAX} bytes; "
                                 f"use --raw N to cut binary input into entries")
            if not chunk and pending:
                yield pending
                pending = b""
        if not chunk:
            return


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # the writer's error is reported once, from writer.error


async def cmd_write(args) -> int:
    if args.raw is not None and args.raw < 1:
        raise ValueError("--raw needs a size of at least 1 byte")
    if args.ensemble:
        return await replicated.write(args, _store(args),
                                      _records(sys.stdin.buffer, args.raw), _print_json)
    if args.ledger is None and (args.append or _store(args) is None):
        raise ValueError("--ledger is needed (unless --metadata allocates an id for a new "
                         "ledger)")
    options = WriterOptions(batch_max_entries=max(1, args.batch))
    if args.append:
        writer = await LedgerWriter.open(args.url, args.ledger, args.password, args.digest,
                                         metadata_store=_store(args), options=options)
    else:
        writer = await LedgerWriter.create(args.url, args.password, args.digest,
                                           ledger_id=args.ledger, metadata_store=_store(args),
                                           options=options)
    async with writer:
        try:
            async for record in _records(sys.stdin.buffer, args.raw):
                (await writer.append_async(record)).add_done_callback(_consume)
        except (BookieError, LedgerClosedError):
            pass  # the writer stopped; its error is reported below
    if writer.error is not None:
        raise writer.error
    _print_json({"ledgerId": writer.ledger_id, "lastEntryId": writer.lac,
                 "length": writer.length})
    return 0


def _emit(payload: bytes, raw: bool) -> None:
    out = sys.stdout.buffer
    out.write(payload)
    if not raw:
        out.write(b"\n")


async def cmd_read(args) -> int:
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.read(args, False, _emit, _print_json)
    async with await LedgerReader.open(args.url, args.ledger, args.password, args.digest,
                                       metadata_store=_store(args)) as reader:
        if args.last_only:
            _emit((await reader.read_last()).payload, args.raw)
            sys.stdout.buffer.flush()
            return 0
        last = await reader.read_lac() if args.to is None else args.to
        if last < args.first:
            return 0  # nothing confirmed in the range
        async for batch in reader.iter_range(args.first, last):
            for entry in batch:
                _emit(entry.payload, args.raw)
            sys.stdout.buffer.flush()
    return 0


async def cmd_tail(args) -> int:
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.tail(args, _emit)
    async with await LedgerReader.open(args.url, args.ledger, args.password, args.digest,
                                       metadata_store=_store(args)) as reader:
        async for entry in reader.tail(args.first, args.until):
            _emit(entry.payload, args.raw)
            sys.stdout.buffer.flush()  # a follower shows each entry as it is confirmed
    return 0


async def cmd_recover(args) -> int:
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.read(args, True, _emit, _print_json)
    result = await recover_ledger(args.url, args.ledger, args.password, args.digest,
                                  metadata_store=_store(args))
    _print_json({"ledgerId": result.ledger_id, "lastEntryId": result.lac,
                 "length": result.length, "fencedLac": result.fenced_lac,
                 "storedLastEntryId": result.last_entry_id, "cut": result.cut,
                 "alreadyClosed": result.already_closed})
    return 0


async def cmd_info(args) -> int:
    async with BookieClient(args.url) as client:
        info = await client.ledger_info(args.ledger)
    store = _store(args)
    if store is not None:
        info["metadata"] = (await store.read(args.ledger)).to_json()
    _print_json(info)
    return 0


async def cmd_list(args) -> int:
    store = _required_store(args)
    for ledger_id in await store.ledger_ids():
        try:
            metadata = await store.read(ledger_id)
        except BookieError:
            continue  # deleted meanwhile
        if args.json:
            _print_json({"ledgerId": ledger_id, **metadata.to_json()})
            continue
        ensembles = "; ".join(f"{first}: {','.join(members)}"
                              for first, members in metadata.ensembles) or "-"
        sys.stdout.write(
            f"{ledger_id:>10}  {metadata.state.value:<11} E/Qw/Qa "
            f"{metadata.ensemble_size}/{metadata.write_quorum}/{metadata.ack_quorum}  "
            f"last {metadata.last_entry_id:>6}  length {metadata.length:>10}  {ensembles}\n")
    return 0


async def cmd_delete(args) -> int:
    store = _required_store(args)
    metadata = await store.read(args.ledger)
    await store.delete(args.ledger, metadata.version)
    _print_json({"ledgerId": args.ledger, "deleted": True, "version": metadata.version})
    return 0


COMMANDS = {"write": cmd_write, "read": cmd_read, "tail": cmd_tail, "recover": cmd_recover,
            "info": cmd_info, "list": cmd_list, "delete": cmd_delete}


async def _run(args) -> int:
    try:
        return await COMMANDS[args.command](args)
    finally:
        store = getattr(args, "store", None)
        if store is not None and hasattr(store, "close"):
            await store.close()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect warnings: ZK5's line
    try:
        return asyncio.run(_run(args))
    except (BookieError, MetadataError, LedgerClosedError) as exc:
        code = getattr(exc, "code", type(exc).__name__)
        print(f"bookie ledger {args.command}: {code}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # usage the parser could not see (combinations of options)
        print(f"bookie ledger {args.command}: {exc}", file=sys.stderr)
        return 2
    except aiohttp.ClientError as exc:
        # The URL the error names, not --url's default: a replicated read reaches others.
        where = getattr(getattr(exc, "request_info", None), "url", None) or \
            getattr(exc, "host", None) or args.url
        print(f"bookie ledger {args.command}: cannot reach {where}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of our stdout went away (`| head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
