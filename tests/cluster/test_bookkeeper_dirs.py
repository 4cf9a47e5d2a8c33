"""BookKeeper's data dirs, our bookie (issue 58 item 2), without BookKeeper: the dirs in
tests/data/bk_dirs/ were written by a DbLedgerStorage bookie of BookKeeper under its own
client, stopped cleanly once and then killed -9 (scripts/interop/make_bk_dir_fixtures.py
regenerates them; expected.json says what was written). Our bookie started on them serves
every entry byte for byte, the checkpointed ones and those only in BookKeeper's journal past
its lastMark, with each ledger's fence, master key and explicit LAC; the deleted ledger
stays deleted; and as a cluster bookie it starts on BookKeeper's cookie (CK4)."""

from __future__ import annotations

import asyncio
import json
import os
import tarfile

import pytest

from api.client.bkport.client import BkBookieClient
from api.client.codec import LedgerCodec
from api.client.zookeeper import parse_uri
from tests.support import swap_checks
from tests.support.servers import ROOT, Daemon
from tests.support.swap_checks import AFTER_THE_SWAP, payload

FIXTURES = os.path.join(ROOT, "tests", "data", "bk_dirs")
EXPECTED = json.load(open(os.path.join(FIXTURES, "expected.json")))
QUIET = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB",
         "--bookie-port", "0")


def bookkeepers_dirs(tmp_path) -> tuple[str, ...]:
    with tarfile.open(os.path.join(FIXTURES, EXPECTED["tarball"])) as tar:
        tar.extractall(tmp_path / "bk", filter="data")
    return ("--journal-dirs", str(tmp_path / "bk" / "journal"),
            "--ledger-dirs", str(tmp_path / "bk" / "ledgers"))


def written() -> dict[str, dict]:
    return {**EXPECTED["checkpointed"], **EXPECTED["journal_only"]}


async def served_as_written(daemon: Daemon) -> None:
    """Every check of tests/support/swap_checks.py, on what expected.json says was written."""
    await swap_checks.served_as_written(
        f"127.0.0.1:{daemon.bk_port}", written(), EXPECTED["password"], EXPECTED["digest"],
        fenced=EXPECTED["fenced"], deleted=EXPECTED["deleted"], closed=["closed"])


def test_our_bookie_serves_what_bookkeepers_wrote_and_was_killed_with(tmp_path):
    dirs = bookkeepers_dirs(tmp_path)
    daemon = Daemon(str(tmp_path / "data"), *QUIET, *dirs).start()
    try:
        summary = json.loads(daemon.log_text().split("bookie ready in ", 1)[1]
                             .split(": ", 1)[1].splitlines()[0])
        # Past BookKeeper's lastMark: the 25 + 15 adds (and recovery's write-back of the
        # last entry of journal-fenced), its fence, both ledgers' keys.
        assert summary["adds"] >= 40 and summary["fences"] == 1 and summary["keys"] == 2
        asyncio.run(served_as_written(daemon))
    finally:
        daemon.kill9()
    # The same after our own replay of what we added and a clean stop (our checkpoint).
    again = Daemon(str(tmp_path / "data"), *QUIET, *dirs).start()
    try:
        asyncio.run(served_as_added_again(again))
    finally:
        assert again.terminate() == 0


async def served_as_added_again(daemon: Daemon) -> None:
    async with BkBookieClient(f"127.0.0.1:{daemon.bk_port}") as client:
        for role, info in written().items():
            if role in EXPECTED["deleted"] + EXPECTED["fenced"] + ["closed"]:
                continue
            ledger = info["ledger"]
            codec = LedgerCodec.for_password(ledger, EXPECTED["password"], EXPECTED["digest"])
            got = codec.decode(await client.read_entry(ledger, info["last"] + 1), None)
            assert got.payload == AFTER_THE_SWAP
            first = codec.decode(await client.read_entry(ledger, 0), 0)
            assert first.payload == payload(ledger, 0)


def test_a_cluster_bookie_starts_on_bookkeepers_cookie_and_not_without_it(tmp_path, zk,
                                                                          zk_uri):
    """ZooKeeper holds what BookKeeper's bookie left: INSTANCEID and its cookie, naming the
    dirs where they were written. Our bookie with BookKeeper's id starts on them unchanged
    (CK4) and leaves the cookie as BookKeeper wrote it; with the ledger dir's VERSION gone
    (a replaced disk) it refuses."""
    _, root = parse_uri(zk_uri)
    cookie = EXPECTED["cookie"].encode()
    instance = next(line.split('"')[1] for line in EXPECTED["cookie"].splitlines()
                    if line.startswith("instanceId"))
    bookie_id = EXPECTED["bookie_id"]
    zk.create(f"{root}/INSTANCEID", instance.encode(), makepath=True)
    zk.create(f"{root}/cookies/{bookie_id}", cookie, makepath=True)
    dirs = bookkeepers_dirs(tmp_path)
    flags = (*QUIET, *dirs, "--metadata-service-uri", zk_uri, "--bookie-id", bookie_id)
    version = os.path.join(str(tmp_path / "bk" / "ledgers"), "current", "VERSION")
    daemon = Daemon(str(tmp_path / "data"), *flags).start()
    try:
        assert zk.exists(f"{root}/available/{bookie_id}") is not None
        asyncio.run(served_as_written(daemon))
    finally:
        assert daemon.terminate() == 0
    assert zk.get(f"{root}/cookies/{bookie_id}")[0] == cookie  # BookKeeper's, untouched
    assert open(version, "rb").read() == cookie
    for identity in (tmp_path / "bk").glob("*/current/IDENTITY"):
        os.unlink(identity)  # BookKeeper's dirs again, as after a swap back
    os.unlink(version)
    refused = Daemon(str(tmp_path / "data"), *flags)
    with pytest.raises(RuntimeError, match="exited 1"):
        refused.start()
    assert f"{version}: no cookie, while the other data dirs of bookie {bookie_id}" in \
        refused.log_text()
