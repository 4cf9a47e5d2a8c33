"""Our data dirs, BookKeeper's bookie (issue 58 item 1): a cluster bookie of ours is written to
and killed -9, then BookKeeper's DbLedgerStorage bookie starts on the same dirs, id and
cookie, and serves every entry byte for byte (the checkpointed ones and those only in our
journal), each ledger's fence, master key and explicit LAC, and not the deleted ledger.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_our_dirs.py \
        [--dirs 2,2]

The ledgers are written straight to the bookie over BookKeeper's protocol (no ledger
metadata), so BookKeeper's GC, which drops ledgers without metadata, is set to wait an
hour; scripts/drill/drill_bookkeeper_swap.py runs GC and compaction with metadata. The checks
are tests/support/swap_checks.py's, the ones CI holds our bookie to on BookKeeper's dirs.
Prints each check; exit 0 only if all held.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.client.bkport.client import BkBookieClient  # noqa: E402
from api.client.codec import LedgerCodec  # noqa: E402
from api.cluster.local_zookeeper import free_port  # noqa: E402
from scripts.interop.interop_run import STORAGE_CLASSES, Failed, Interop, say  # noqa: E402
from tests.support.dir_layout import dir_lists, parse_dirs  # noqa: E402
from tests.support.swap_checks import payload, served_as_written  # noqa: E402

PASSWORD, DIGEST = "swap", "CRC32C"
#: role: (ledger id, entries); the ids fall in every ledger dir of up to 3 (L mod n).
CHECKPOINTED = {"plain": (10, 40), "fenced": (11, 30), "lac": (12, 20), "deleted": (13, 10)}
JOURNAL_ONLY = {"journal": (14, 25), "journal-fenced": (15, 15)}


async def write(address: str, http: str, roles: dict, checkpoint: bool) -> dict:
    written = {}
    async with BkBookieClient(address) as client:
        for role, (ledger, entries) in roles.items():
            codec = LedgerCodec.for_password(ledger, PASSWORD, DIGEST)
            for entry in range(entries):
                await client.add_entry(ledger, entry, codec.frame(entry, entry - 1, 0,
                                                                  payload(ledger, entry)),
                                       codec.master_key)
            written[role] = {"ledger": ledger, "last": entries - 1}
            if role in ("lac", "journal"):
                await client.write_lac(ledger, codec.master_key, codec.lac_body(entries - 1))
                written[role]["explicit_lac"] = entries - 1
            if role.endswith("fenced"):
                await client.fence(ledger, codec.master_key)
    if "deleted" in roles:
        _http(http, "DELETE", f"/v1/ledgers/{roles['deleted'][0]}")
    if checkpoint:
        _http(http, "POST", "/v1/bookie/checkpoint")
    return written


def _http(base: str, method: str, path: str) -> None:
    request = urllib.request.Request(base + path, method=method)
    with urllib.request.urlopen(request, timeout=60) as reply:
        reply.read()


def registration_owner(run: Interop, bookie_id: str) -> int | None:
    """The session that holds the bookie's ``available/`` node (None: not registered)."""
    from kazoo.client import KazooClient  # noqa: PLC0415

    from api.client.zk_bound import zk_read, zk_start  # noqa: PLC0415

    client = KazooClient(hosts=f"127.0.0.1:{run.zk.port}")
    zk_start(client)
    try:
        stat = zk_read(client.exists_async, f"/ledgers/available/{bookie_id}")
        return None if stat is None else stat.ephemeralOwner
    finally:
        client.stop()
        client.close()


def registered_anew(run: Interop, bookie_id: str, old: int | None, timeout_s: float) -> None:
    """Until another session than ``old`` (our killed bookie's) registered the id: BookKeeper
    waits out the old node before it registers and serves."""
    deadline = time.monotonic() + timeout_s
    while registration_owner(run, bookie_id) in (None, old):
        if time.monotonic() > deadline:
            raise Failed(f"BookKeeper's bookie did not register {bookie_id} in {timeout_s:.0f} s")
        time.sleep(0.5)  # noqa: sleep-ok (bounded poll of another process's start)


def bk_conf(home: str, bookie_id: str, rpc: int, uri: str, ledgers: str, journals: str) -> str:
    conf = os.path.join(home, "bk_server.conf")
    with open(conf, "w") as handle:
        handle.write(f"bookieId={bookie_id}\nbookiePort={rpc}\nadvertisedAddress=127.0.0.1\n"
                     f"allowLoopback=true\njournalDirectories={journals}\n"
                     f"ledgerDirectories={ledgers}\nmetadataServiceUri={uri}\n"
                     f"ledgerStorageClass={STORAGE_CLASSES['db']}\nhttpServerEnabled=false\n"
                     "statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider\n"
                     "dataIntegrityCheckingEnabled=false\nautoRecoveryDaemonEnabled=false\n"
                     "gcWaitTime=3600000\n")
    return conf


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dirs", type=parse_dirs, default=(1, 1), metavar="L,J",
                        help="ledger and journal dirs (default 1,1)")
    args = parser.parse_args(argv)
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    if not launcher:
        parser.error("BOOKKEEPER_LAUNCHER: BookKeeper's `bk` wrapper")
    work = tempfile.mkdtemp(prefix="bk-our-dirs-")
    run = Interop(launcher, work, 0)
    try:
        uri = run.start_zookeeper("zk")
        home = os.path.join(work, "bookie")
        os.makedirs(home)
        ledgers, journals = dir_lists(home, *args.dirs)
        rpc, http = free_port(), free_port()
        bookie_id = f"127.0.0.1:{rpc}"
        ours = run.spawn([sys.executable, "-m", "bookie", "serve", "--data-dir",
                          os.path.join(home, "data"), "--port", str(http), "--bookie-port",
                          str(rpc), "--bookie-id", bookie_id, "--metadata-service-uri", uri,
                          "--ledger-dirs", ledgers, "--journal-dirs", journals,
                          "--checkpoint-interval-ms", "3600000"],
                         os.path.join(home, "ours.log"))
        run.wait_registered(uri, [bookie_id])
        ours_session = registration_owner(run, bookie_id)
        base = f"http://127.0.0.1:{http}"
        written = asyncio.run(write(bookie_id, base, CHECKPOINTED, checkpoint=True))
        written.update(asyncio.run(write(bookie_id, base, JOURNAL_ONLY, checkpoint=False)))
        ours.kill()  # kill -9: the JOURNAL_ONLY ledgers are only in our journal
        ours.wait()
        say(f"  wrote {sorted(written)} on our bookie {bookie_id}, then kill -9")
        conf = bk_conf(home, bookie_id, rpc, uri, ledgers, journals)
        run.spawn([launcher, "bookie", "--conf", conf], os.path.join(home, "bookkeeper.log"))
        registered_anew(run, bookie_id, ours_session, 180)  # ours outlives the kill a while
        say(f"  BookKeeper's DbLedgerStorage bookie started on the dirs ({args.dirs[0]} ledger, "
            f"{args.dirs[1]} journal) with the cookie our bookie wrote")
        made = asyncio.run(served_as_written(bookie_id, written, PASSWORD, DIGEST,
                                             fenced=("fenced", "journal-fenced"),
                                             deleted=("deleted",)))
        for line in made:
            say(f"ok: BookKeeper's bookie serves {line}")
        say("ok: every check held")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    except (Failed, AssertionError, Exception) as error:  # noqa: BLE001 - reported, dir kept
        say(f"FAILED: {type(error).__name__}: {error} (kept {work})")
        return 1
    finally:
        run.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
