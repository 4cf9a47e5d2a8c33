"""``bookie ledger``: write, read, tail, recover and inspect ledgers on a running bookie.

The shell face of the ledger library (api/client/ledger.py): ``bookie.cli`` dispatches
``bookie ledger ARGS...`` here. Payloads go through stdin and stdout so the commands compose
with pipes; summaries are one JSON object per line; diagnostics go to stderr.

Exit codes: 0 done, 1 the bookie or the ledger refused (the message names why), 2 usage,
130 interrupted.
"""

from __future__ import annotations

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
from api.client.codec import DigestMismatch
from api.client.metadata import FileMetadataStore, LedgerExists, MetadataError
from api.client import cli_replicated as replicated
from api.client.cli_messages import digest_advice, past_end_note
from api.client.cli_parser import DEFAULT_URL, build_parser
from api.client.metadata_service import open_metadata_store
from bookie.errors import BookieError, IOFailure, NoLedger

STDIN_CHUNK_BYTES = 1 << 16
#: A line longer than this cannot be an entry (docs/http-api.md's default max_entry_size); refusing it
#: bounds the buffer a stream without newlines could grow.
LINE_BYTES_MAX = 5 * 1024 * 1024


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
        try:
            writer = await LedgerWriter.create(args.url, args.ledger, args.password, args.digest,
                                               metadata_store=_store(args), options=options)
        except LedgerExists as exc:
            # The library's "open it to append" in the flag that does it.
            where = str(exc).split(";")[0]
            raise LedgerExists(f"{where}; --append to add to it (recover it first if its "
                               f"writer died)") from None
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


def note_past_end(args, end: int) -> None:
    """READ_DESCRIPTION's note, on stderr, when the asked range reaches past ``end``."""
    note = past_end_note(args.ledger, end, args.first, args.to)
    if note is not None:
        print(f"bookie ledger {args.command}: {note}", file=sys.stderr)


async def cmd_read(args) -> int:
    if args.to is not None and args.to < args.first:
        raise ValueError(f"--to {args.to} is before --from {args.first}")
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.read(args, False, _emit, _print_json, note_past_end)
    async with await LedgerReader.open(args.url, args.ledger, args.password, args.digest,
                                       metadata_store=_store(args)) as reader:
        if args.last_only:
            _emit((await reader.read_last()).payload, args.raw)
            sys.stdout.buffer.flush()
            return 0
        # Confirmed entries only, whether or not --to is given: one end for both edges of
        # the range (the entries past the LAC are recover's to decide).
        end = await reader.read_lac()
        last = end if args.to is None else min(args.to, end)
        if args.first <= last:
            async for batch in reader.iter_range(args.first, last):
                for entry in batch:
                    _emit(entry.payload, args.raw)
                sys.stdout.buffer.flush()
        note_past_end(args, end)
    return 0


async def cmd_tail(args) -> int:
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.tail(args, _emit)
    async with await LedgerReader.open(args.url, args.ledger, args.password, args.digest,
                                       metadata_store=_store(args)) as reader:
        if _store(args) is None:
            # Without metadata nothing but the bookie knows of the ledger: one it has never
            # seen is a mistyped id (BookKeeper's NoSuchLedgerExists), not one to wait for.
            # A ledger in the metadata with no entry yet is waited for (its metadata was read).
            await _bookie_knows(reader.ledger_id, args.url)
        async for entry in reader.tail(args.first, args.until):
            _emit(entry.payload, args.raw)
            sys.stdout.buffer.flush()  # a follower shows each entry as it is confirmed
    return 0


async def _bookie_knows(ledger_id: int, url: str) -> None:
    """NoLedger, naming the way out, if the bookie at ``url`` has never seen the ledger."""
    try:
        async with BookieClient(url) as client:
            await client.ledger_info(ledger_id)
    except NoLedger:
        raise NoLedger(f"ledger {ledger_id} is unknown to the bookie at {url} and has no "
                       f"metadata here; check --ledger, or give --metadata or "
                       f"--metadata-service-uri where it was created") from None


async def cmd_recover(args) -> int:
    if await replicated.metadata_of(args, _store(args)) is not None:
        return await replicated.read(args, True, _emit, _print_json)
    if _store(args) is None:
        # The fence would create the ledger (the bookie fences unknown ledgers, as
        # BookKeeper's does, for a writer that has not written yet): recover of a mistyped
        # id must refuse, as BookKeeper's openLedger does (NoSuchLedgerExists). With a store
        # recover_ledger reads the metadata first and refuses there.
        await _bookie_knows(args.ledger, args.url)
    result = await recover_ledger(args.url, args.ledger, args.password, args.digest,
                                  metadata_store=_store(args))
    _print_json({"ledgerId": result.ledger_id, "lastEntryId": result.lac,
                 "length": result.length, "fencedLac": result.fenced_lac,
                 "storedLastEntryId": result.last_entry_id, "cut": result.cut,
                 "alreadyClosed": result.already_closed})
    return 0


async def cmd_info(args) -> int:
    store = _store(args)
    metadata = None if store is None else (await store.read(args.ledger)).to_json()
    info = {"ledgerId": args.ledger}
    if store is None or args.url_given:  # the metadata is the ledger's record: no bookie needed
        async with BookieClient(args.url) as client:
            info = await client.ledger_info(args.ledger)
    if metadata is not None:
        info["metadata"] = metadata
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


async def _digest_tried(args) -> tuple[str, bool]:
    """(the digest a read used, whether the ledger's metadata chose it)."""
    store = getattr(args, "store", None)
    if store is not None and args.ledger is not None:
        try:
            return (await store.read(args.ledger)).digest_type.header_name, True
        except (BookieError, MetadataError):
            pass
    return args.digest, False


async def _run(args) -> int:
    try:
        return await COMMANDS[args.command](args)
    except DigestMismatch as exc:
        advice = digest_advice(exc, *await _digest_tried(args))
        if advice is None:
            raise
        raise IOFailure(advice) from None
    finally:
        store = getattr(args, "store", None)
        if store is not None and hasattr(store, "close"):
            await store.close()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    args.url_given, args.url = args.url is not None, args.url or DEFAULT_URL
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
