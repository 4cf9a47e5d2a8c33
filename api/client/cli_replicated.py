"""`bookie ledger` on a replicated ledger of a cluster (docs/cluster.md §3): write with
--ensemble/--write-quorum/--ack-quorum, read and recover through the ledger's metadata. The
rest of the CLI is api/client/cli.py, which calls these for a zk:// metadata service."""

from __future__ import annotations

import asyncio
import sys

from api.client.ensemble import BookKeeper
from api.client.metadata_uri import is_zookeeper
from api.client.placement import Placement, PlacementRules


def cluster_uri(args) -> str | None:
    uri = args.metadata_service_uri
    return uri if uri and is_zookeeper(uri) else None


async def metadata_of(args, store):
    """The ledger's metadata if it is a replicated one in a cluster, else None."""
    if cluster_uri(args) is None or args.ledger is None:
        return None
    metadata = await store.read(args.ledger)
    return metadata if metadata.ensembles else None


async def write(args, store, records, print_json) -> int:
    """Append ``records`` (an async iterator) to a new replicated ledger, then close it."""
    if cluster_uri(args) is None:
        raise ValueError("--ensemble needs --metadata-service-uri zk://host:port/ledgers")
    qw = args.write_quorum or args.ensemble
    rules = PlacementRules(policy=args.placement, strict=args.placement_strict)
    async with await BookKeeper.connect(cluster_uri(args), placement=Placement(rules)) as bk:
        writer = await bk.create_ledger(args.ensemble, qw, args.ack_quorum or qw,
                                        args.digest, args.password)
        in_flight = asyncio.Semaphore(256)  # bounded: appends wait past 256 unacknowledged

        async def append(record: bytes) -> None:
            try:
                await writer.append(record)
            finally:
                in_flight.release()

        tasks = []
        async for record in records:
            await in_flight.acquire()
            tasks.append(asyncio.ensure_future(append(record)))
        await asyncio.gather(*tasks)
        last = await writer.close()
        print_json({"ledgerId": writer.ledger_id, "lastEntryId": last, "length": writer.length,
                    "ensembles": [[f, list(m)] for f, m in writer.metadata.ensembles]})
    return 0


async def read(args, recover: bool, emit, print_json, note_past_end=None) -> int:
    """Entries from --from to --to, at most to the end (of a closed ledger, else the LAC:
    S4, no read past it), then ``note_past_end(args, end)``; or, with ``recover``, recover
    the ledger and print where it ends."""
    async with await BookKeeper.connect(cluster_uri(args)) as bk:
        reader = await bk.open_ledger(args.ledger, args.password, recover=recover)
        meta = reader.metadata
        if recover:
            print_json({"ledgerId": args.ledger, "lastEntryId": meta.last_entry_id,
                        "length": meta.length, "state": meta.state.value})
            return 0
        end = meta.last_entry_id if meta.closed else await reader.read_lac()
        last = end if args.to is None else min(args.to, end)
        if last >= args.first:  # batched: windows of held reads (RD3), not one per entry
            async for entry in reader.read_range(args.first, last):
                emit(entry.payload, args.raw)
        sys.stdout.buffer.flush()
        if note_past_end is not None:
            note_past_end(args, end)
    return 0


async def tail(args, emit) -> int:
    """Follow a replicated ledger: each entry once, in order, as the LAC passes it; stops at
    --until or at the end of the ledger once closed."""
    async with await BookKeeper.connect(cluster_uri(args)) as bk:
        reader = await bk.open_ledger(args.ledger, args.password, recover=False)
        async for entry in reader.tail(args.first):
            emit(entry.payload, args.raw)
            sys.stdout.buffer.flush()
            if args.until is not None and entry.entry_id >= args.until:
                break
    return 0
