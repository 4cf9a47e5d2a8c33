"""Our replicated client on Apache BookKeeper's own bookies, over BookKeeper's protocol
(api/client/bkport/, docs/ledger_client.md "Transports"): a real run, not in CI.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bkport_client.py

Three BookKeeper bookies (DbLedgerStorage, its default and Pulsar's) on one ZooKeeper;
``BookKeeper.connect`` with the default ``protocol="auto"`` must pick BookKeeper's protocol for each (their
registrations name no http endpoint). Then: a 3/2/2 ledger written, closed and read back
byte for byte; a ledger left open recovered by a second client, its old writer fenced;
the LAC long poll with the entry piggybacked, WRITE_LAC, fence, FORCE_LEDGER, the entry
list and GET_BOOKIE_INFO on one bookie. Then two of our bookies join (HTTP and bookie_port):
"auto" reaches ours over HTTP and theirs over BookKeeper's protocol, and 3/2/2 ledgers whose
ensembles mix both kinds are written, read and recovered. Prints each check; exits 1 on
the first failure.
``--tls``: every bookie with mutual TLS, BookKeeper's too; our client reaches theirs through
START_TLS with its client certificate. Every process it starts is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.bk_tls_peer import TlsPeer  # noqa: E402
from scripts.interop.interop_run import Failed, Interop, check, say  # noqa: E402

from api.client.bkport.client import BkBookieClient  # noqa: E402
from api.client.ensemble import BookKeeper  # noqa: E402
from api.client.metadata import MetadataState  # noqa: E402
from api.tls import TRUST_ENV  # noqa: E402
from bookie.errors import Fenced  # noqa: E402


async def drive(uri: str, ids: list[str]) -> None:
    payloads = [b"entry %d " % i * (i % 9 + 1) for i in range(200)]
    async with await BookKeeper.connect(uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        check(all(isinstance(bk.client(b), BkBookieClient) for b in ids),
              "protocol='auto' reaches every BookKeeper bookie over its protocol")
        await writer.append_many(payloads)
        check(await writer.close() == 199, "200 appends acknowledged at 3/2/2, closed at 199")
        if os.environ.get(TRUST_ENV):  # --tls: each BookKeeper bookie was reached over TLS
            wires = [bk.client(b).connection._wire for b in ids]
            check(all(w is not None and w.transport.get_extra_info("ssl_object") is not None
                      for w in wires), "START_TLS: every BookKeeper bookie's connection is TLS")
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        check([e.payload for e in await reader.read_range(0, 199)] == payloads,
              "every entry reads back byte for byte")

        left_open = await bk.create_ledger(3, 2, 2, password=b"pw")
        for payload in payloads[:30]:
            await left_open.append(payload)
        async with await BookKeeper.connect(uri) as other:
            recovered = await other.open_ledger(left_open.ledger_id, b"pw")
            metadata = await other.store.read(left_open.ledger_id)
            check(metadata.state is MetadataState.CLOSED and metadata.last_entry_id == 29,
                  "a ledger left open is recovered and closed at its last acknowledged entry")
            check([e.payload for e in await recovered.read_range(0, 29)] == payloads[:30],
                  "the recovered ledger reads back")
        try:
            await left_open.append(b"after recovery")
            raise Failed("the recovered ledger's old writer could still append")
        except Fenced:
            check(True, "the old writer is fenced (EFENCED from BookKeeper's bookies)")

        tailed = await bk.create_ledger(3, 3, 2, password=b"pw")
        await tailed.append_many([b"a", b"b"])
        client = bk.client(ids[0])
        poll = asyncio.ensure_future(client.read_lac_long_poll(tailed.ledger_id, 0, 10_000))
        await tailed.append(b"c")  # framed with LAC 1
        lac, entry = await asyncio.wait_for(poll, 20)
        check(lac == 1 and tailed.codec.decode(entry, 1).payload == b"b",
              "the LAC long poll answers LAC 1 with entry 1 piggybacked")
        key = tailed.codec.master_key
        check(await client.write_lac(tailed.ledger_id, key, tailed.codec.lac_body(2)) == 2,
              "WRITE_LAC then READ_LAC: 2")
        check(await client.force(tailed.ledger_id, key) == 2, "FORCE_LEDGER: last entry 2")
        # DbLedgerStorage does not serve the entry list: its getListOfEntriesOfLedger throws
        # UnsupportedOperationException and the bookie never answers, so BookKeeper's own
        # client times out there too. Ours must fail it as a timeout and go on.
        try:
            await asyncio.wait_for(client.entry_id_ranges(tailed.ledger_id), 5)
            raise Failed("DbLedgerStorage answered GET_LIST_OF_ENTRIES_OF_LEDGER")
        except asyncio.TimeoutError:
            check(True, "GET_LIST_OF_ENTRIES_OF_LEDGER: no answer from DbLedgerStorage "
                        "(unsupported there), a timeout")
        check(await client.fence(tailed.ledger_id, key) == {"lac": 2, "lastEntryId": 2},
              "a fencing read of entry -1, then READ_LAC: lac 2, last entry 2")
        info = await client.info()
        check(0 < info["disks"]["ledgers"]["freeBytes"] <= info["disks"]["ledgers"]["totalBytes"],
              "GET_BOOKIE_INFO: free and total bytes")


async def drive_mixed(uri: str, ours: list[str], theirs: list[str]) -> None:
    payloads = [b"mixed %d" % i for i in range(100)]
    async with await BookKeeper.connect(uri) as bk:
        await bk.writable_bookies()
        check(not any(bk.transport.uses_bk(b) for b in ours)
              and all(bk.transport.uses_bk(b) for b in theirs),
              "protocol='auto' on a mixed cluster: ours over HTTP, BookKeeper's over its protocol")
        mixed = 0
        for _ in range(4):
            writer = await bk.create_ledger(3, 2, 2, password=b"pw")
            ensemble = writer.metadata.ensembles[0][1]
            mixed += any(b in ours for b in ensemble) and any(b in theirs for b in ensemble)
            await writer.append_many(payloads)
            await writer.close()
            reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
            check([e.payload for e in await reader.read_range(0, 99)] == payloads,
                  f"ledger {writer.ledger_id} on {', '.join(ensemble)} reads back")
            left_open = await bk.create_ledger(3, 2, 2, password=b"pw")
            await left_open.append_many(payloads[:10])
            async with await BookKeeper.connect(uri) as other:
                await other.open_ledger(left_open.ledger_id, b"pw")
                metadata = await other.store.read(left_open.ledger_id)
            check(metadata.closed and metadata.last_entry_id == 9,
                  f"ledger {left_open.ledger_id} left open on "
                  f"{', '.join(metadata.ensembles[0][1])} recovered at 9")
        check(mixed > 0, f"{mixed} of 4 ensembles mixed both kinds of bookie")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--dir", default=None, help="work dir (default: a new temp dir)")
    parser.add_argument("--tls", action="store_true",
                        help="every bookie with mutual TLS (BookKeeper's with its "
                             "TLSContextFactory and role check); our client through "
                             "START_TLS, with its certificate from BOOKIE_TLS_*")
    args = parser.parse_args(argv)
    if not args.launcher:
        parser.error("--launcher or $BOOKKEEPER_LAUNCHER: BookKeeper's bk or bin/bookkeeper")
    workdir = args.dir or tempfile.mkdtemp(prefix="bkport-interop-")
    tls = None
    if args.tls:
        tls = TlsPeer(os.path.join(workdir, "tls"))
        os.environ.update(tls.our_client_env())  # BookKeeper.connect's context (api/tls.py)
    run = Interop(args.launcher, workdir, 5, tls=tls)
    try:
        uri = run.start_zookeeper("zk")
        run.bk("shell", "-conf", run.shell_conf(uri), "initnewcluster")
        theirs = [run.start_theirs(f"bk{i}", uri, storage="db") for i in range(3)]
        run.wait_registered(uri, [b["id"] for b in theirs])
        asyncio.run(drive(uri, [b["id"] for b in theirs]))
        ours = [run.start_ours(f"ours{i}", uri) for i in range(2)]
        run.wait_registered(uri, [b["id"] for b in ours])
        asyncio.run(drive_mixed(uri, [b["id"] for b in ours], [b["id"] for b in theirs]))
        say("ok")
        return 0
    except Failed as failure:
        say(f"FAILED: {failure}")
        return 1
    finally:
        run.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
