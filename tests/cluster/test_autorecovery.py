"""Autorecovery (docs/cluster.md §4): a bookie killed for good loses no copy for
long; the auditor fails over mid-marking; decommission moves a live bookie's copies off it.

Every check of "full replication" is made bookie by bookie: each entry read from each
bookie of its write set, its digest verified, its bytes compared with what was written.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from api.client import BookieClient
from api.client.codec import LedgerCodec
from api.client.distribution import bookies_of
from api.client.ensemble import BookKeeper
from api.client.fragments import referenced_bookies
from api.client.metadata import MetadataState
from api.cluster.underreplication import Underreplication
from scripts.drill.drill_cluster import CHILD_WRITER, payload_of
from tests.support.servers import ROOT, Daemon

FLAGS = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "1MiB",
         "--gc-interval-ms", "0", "--lost-bookie-recovery-delay-s", "1",
         "--open-ledger-rereplication-grace-period-s", "2", "--rereplication-rate-bytes", "0")
PASSWORD = b"drill"
DEADLINE_S = 120.0


def start_bookies(tmp_path, zk_uri, count: int, *extra: str) -> list[Daemon]:
    return [Daemon(str(tmp_path / f"b{i}" / "data"), *FLAGS, *extra, "--metadata-service-uri",
                   zk_uri).start() for i in range(count)]


def bookie_id(daemon: Daemon) -> str:
    return daemon.url.rsplit("/", 1)[-1]


@pytest.fixture
def cleanup():
    daemons: list = []
    yield daemons
    for daemon in daemons:
        proc = getattr(daemon, "proc", daemon)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


async def write_ledgers(bk: BookKeeper, count: int, entries: int) -> dict[int, list[bytes]]:
    written = {}
    for n in range(count):
        writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
        payloads = [payload_of(writer.ledger_id, e) for e in range(entries + n)]
        for payload in payloads:
            await writer.append(payload)
        await writer.close()
        written[writer.ledger_id] = payloads
    return written


async def naming(bk: BookKeeper, ledger_ids, bookie: str) -> list[int]:
    """The ledgers among ``ledger_ids`` whose ensembles name ``bookie``, ascending."""
    return sorted([i for i in ledger_ids if bookie in referenced_bookies(await bk.store.read(i))])


async def wait_until(condition, what: str, deadline_s: float = DEADLINE_S):
    """Poll ``condition`` (a coroutine function) until it returns a true value; fail with
    ``what`` after the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = await condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"not within {deadline_s:.0f} s: {what}")
        await asyncio.sleep(0.2)  # noqa: sleep-ok (bounded poll of a condition)


async def fully_replicated(bk: BookKeeper, written: dict[int, list[bytes]], gone: set[str]):
    """Every ledger closed, naming no gone bookie, and each entry on each bookie of its
    write set, digest verified, bytes as written. Returns the list of problems."""
    problems = []
    for ledger_id, payloads in sorted(written.items()):
        metadata = await bk.store.read(ledger_id)
        codec = LedgerCodec.for_password(ledger_id, PASSWORD, metadata.digest_type)
        if metadata.state is not MetadataState.CLOSED:
            problems.append(f"ledger {ledger_id} is {metadata.state.value}")
            continue
        named = referenced_bookies(metadata) & gone
        if named:
            problems.append(f"ledger {ledger_id} still names {sorted(named)}")
            continue
        for entry_id in range(metadata.last_entry_id + 1):
            for holder in bookies_of(metadata.ensembles, entry_id, metadata.write_quorum):
                client = bk.client(holder)  # the client's scheme and TLS context
                try:
                    entry = codec.decode(await client.read_entry(ledger_id, entry_id),
                                         entry_id)
                except Exception as exc:  # noqa: BLE001 - named in the problem
                    problems.append(f"{ledger_id}/{entry_id} on {holder}: {exc!r}")
                    continue
                if entry_id < len(payloads) and entry.payload != payloads[entry_id]:
                    problems.append(f"{ledger_id}/{entry_id} on {holder}: other bytes")
    return problems


async def test_a_bookie_killed_for_good_gets_its_copies_back(tmp_path, zk_uri, cleanup):
    bookies = start_bookies(tmp_path, zk_uri, 4)
    cleanup.extend(bookies)
    async with await BookKeeper.connect(zk_uri) as bk:
        written = await write_ledgers(bk, 6, 40)
        # A writer process of its own on an open 3/2/2 ledger; it dies with the bookie.
        child = subprocess.Popen([sys.executable, "-c", CHILD_WRITER, zk_uri, "3000", ROOT],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 env=dict(os.environ, PYTHONPATH=ROOT))
        cleanup.append(child)
        open_ledger = int(child.stdout.readline().split()[1])
        acked = []
        while len(acked) < 50:
            acked.append(int(child.stdout.readline().split()[1]))
        metadata = await bk.store.read(open_ledger)
        victim_id = metadata.ensembles[-1][1][0]
        victim = next(d for d in bookies if bookie_id(d) == victim_id)
        child.kill()
        victim.kill9()
        acked.extend(int(line.split()[1]) for line in child.stdout.read().split(b"\n")[:-1]
                     if line.startswith(b"acked "))
        child.wait()
        assert await naming(bk, written, victim_id), "some closed ledger shares its bookie"

        ur = Underreplication(bk.store.client, bk.store.root)

        async def restored():
            # The worker closes the open ledger (recovery) before it copies that ledger's
            # fragments and drops its marker: wait for all three, not for the close alone.
            metadata = await bk.store.read(open_ledger)
            if not metadata.closed:
                return False
            expected = [payload_of(open_ledger, e) for e in range(metadata.last_entry_id + 1)]
            whole = not await fully_replicated(bk, {**written, open_ledger: expected},
                                               {victim_id})
            return whole and await asyncio.to_thread(ur.marked) == []
        await wait_until(restored, f"ledgers naming {victim_id} re-replicated, every marker "
                                   f"gone")
        final = await bk.store.read(open_ledger)  # settled: closed, its copies all placed
        assert final.last_entry_id >= max(acked)  # S2: at its last acknowledged entry or later
        assert victim_id not in referenced_bookies(final)
    copied = auditors = 0
    for daemon in bookies:
        if daemon is not victim:
            text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
            copied += sum(float(line.split()[-1]) for line in text.splitlines()
                          if line.startswith("bookie_autorecovery_bytes_copied_total "))
            auditors += "bookie_autorecovery_auditor 1.0" in text
    assert copied > 0 and auditors == 1  # the workers' figures; one auditor among the living
    for daemon in bookies:
        if daemon is not victim:
            assert daemon.terminate() == 0


def autorecovery_process(tmp_path, zk_uri: str, name: str, env: dict | None = None,
                         *extra: str) -> subprocess.Popen:
    log = open(tmp_path / f"{name}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookie", "autorecovery", "--metadata-service-uri", zk_uri,
         "--id", name, "--lost-bookie-recovery-delay-s", "1", *extra],
        stdout=subprocess.PIPE, stderr=log, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))
    line = proc.stdout.readline().decode()
    assert "autorecovery running as" in line, (tmp_path / f"{name}.log").read_text()
    return proc


async def test_the_auditor_fails_over_mid_marking_and_the_next_one_finishes(
        tmp_path, zk_uri, cleanup):
    bookies = start_bookies(tmp_path, zk_uri, 4, "--autorecovery-daemon-enabled", "false")
    cleanup.extend(bookies)
    async with await BookKeeper.connect(zk_uri) as bk:
        written = await write_ledgers(bk, 24, 3)
        ur = Underreplication(bk.store.client, bk.store.root)
        first = autorecovery_process(tmp_path, zk_uri, "auditor-a",
                                     {"BKTEST_AUDITOR_MARK_PAUSE_S": "0.3"},
                                     "--without-worker")
        cleanup.append(first)

        async def elected_a():
            return await asyncio.to_thread(ur.auditor) == "auditor-a"
        await wait_until(elected_a, "auditor-a elected")
        second = autorecovery_process(tmp_path, zk_uri, "auditor-b", None, "--without-worker")
        cleanup.append(second)
        victim = bookies[0]
        victim_id = bookie_id(victim)
        expected = await naming(bk, written, victim_id)
        assert len(expected) >= 8
        victim.kill9()

        async def some_marked():
            marked = await asyncio.to_thread(ur.marked)
            return marked if len(marked) >= 2 else None
        partial = await wait_until(some_marked, "auditor-a marking")
        first.kill()  # mid-marking: it pauses 0.3 s after each marker
        first.wait()
        assert len(partial) < len(expected)

        async def all_marked():
            return await asyncio.to_thread(ur.marked) == expected
        await wait_until(all_marked, "auditor-b finishing the marking")
        assert await asyncio.to_thread(ur.auditor) == "auditor-b"
        for ledger_id in expected:
            replicas, _, _ = await asyncio.to_thread(ur.marker, ledger_id)
            assert replicas == [victim_id]
        second.terminate()
        assert second.wait(60) == 0
    for daemon in bookies[1:]:
        assert daemon.terminate() == 0


async def test_decommission_moves_every_fragment_off_a_live_bookie(tmp_path, zk_uri, cleanup):
    bookies = start_bookies(tmp_path, zk_uri, 4, "--gc-metadata-grace-ms", "0")
    cleanup.extend(bookies)
    async with await BookKeeper.connect(zk_uri) as bk:
        written = await write_ledgers(bk, 5, 30)
        leaving = bookies[1]
        leaving_id = bookie_id(leaving)
        named = await naming(bk, written, leaving_id)
        assert named
        done = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bookie", "shell", "decommission", leaving_id,
            "--metadata-service-uri", zk_uri, "--timeout-s", "120", cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ, PYTHONPATH=ROOT))
        out, err = await asyncio.wait_for(done.communicate(), 180)
        assert done.returncode == 0, err.decode()
        assert f"decommissioned {leaving_id}" in out.decode()
        assert "still name it" in err.decode()  # progress lines
        assert await fully_replicated(bk, written, {leaving_id}) == []
        async with BookieClient(leaving.url) as client:  # alive, holding no referenced ledger
            held = (await client.list_ledgers())["ledgers"]
            assert set(named) <= set(held)  # its old copies are still there, unreferenced
        for ledger_id in held:
            assert leaving_id not in referenced_bookies(await bk.store.read(ledger_id))
        cookies = await asyncio.to_thread(bk.store.client.get_children,
                                          f"{bk.store.root}/cookies")
        assert leaving_id not in cookies
        # GC (GM2): the copies no ledger places on it any more go; every bookie's GC keeps
        # every copy the metadata still needs.
        for daemon in bookies:
            async with BookieClient(daemon.url) as client:
                await client._request("POST", "/v1/bookie/gc", admin=True)
        async with BookieClient(leaving.url) as client:
            assert not set(named) & set((await client.list_ledgers())["ledgers"])
        assert await fully_replicated(bk, written, {leaving_id}) == []
    for daemon in bookies:
        assert daemon.terminate() == 0


async def test_the_replica_check_finds_copies_a_live_bookie_lost(tmp_path, zk_uri, cleanup):
    bookies = start_bookies(tmp_path, zk_uri, 4, "--replicas-check-interval-s", "1")
    cleanup.extend(bookies)
    async with await BookKeeper.connect(zk_uri) as bk:
        written = await write_ledgers(bk, 3, 20)
        damaged = min(written)
        holder = (await bk.store.read(damaged)).ensembles[0][1][0]
        async with BookieClient(f"http://{holder}") as client:
            await client.delete_ledger(damaged)  # the copies are gone; the bookie lives on

        async def repaired():
            metadata = await bk.store.read(damaged)
            return holder not in referenced_bookies(metadata) and \
                not await fully_replicated(bk, written, set())
        await wait_until(repaired, f"ledger {damaged}'s copies on {holder} restored elsewhere")
        ur = Underreplication(bk.store.client, bk.store.root)
        assert await asyncio.to_thread(ur.replicas_check_ctime_ms) is not None
    for daemon in bookies:
        assert daemon.terminate() == 0


async def test_bookkeepers_triggeraudit_marks_a_gone_bookie_before_its_delay(
        tmp_path, zk_uri, cleanup):
    """AU4 (issue 35): BookKeeper's ``triggeraudit`` (and ``decommissionbookie``, which
    calls it) rewrites lostBookieRecoveryDelay with the value it has, as BookKeeperAdmin's
    triggerAudit does; the auditor then marks a gone bookie's ledgers at once, whatever the
    delay. Before, a 3,600 s delay held them unmarked, and decommissionbookie waited on."""
    bookies = start_bookies(tmp_path, zk_uri, 4, "--autorecovery-daemon-enabled", "false")
    cleanup.extend(bookies)
    async with await BookKeeper.connect(zk_uri) as bk:
        written = await write_ledgers(bk, 6, 3)
        ur = Underreplication(bk.store.client, bk.store.root)
        auditor = autorecovery_process(tmp_path, zk_uri, "auditor", None, "--without-worker",
                                       "--lost-bookie-recovery-delay-s", "3600")
        cleanup.append(auditor)

        async def elected():
            return await asyncio.to_thread(ur.auditor) == "auditor"
        await wait_until(elected, "the auditor elected")
        victim = bookies[0]
        expected = await naming(bk, written, bookie_id(victim))
        assert expected
        victim.kill9()

        async def gone():
            return bookie_id(victim) not in await bk.alive_bookies()
        await wait_until(gone, "the killed bookie's registration gone")
        assert await asyncio.to_thread(ur.marked) == []  # the delay holds them

        async def triggered_and_marked():
            # What BookKeeperAdmin.triggerAudit writes; again while the auditor may not
            # have seen the bookie go yet (a trigger audits the bookies gone by then).
            await asyncio.to_thread(ur.set_lost_bookie_delay_s,
                                    await asyncio.to_thread(ur.lost_bookie_delay_s))
            for _ in range(10):
                if await asyncio.to_thread(ur.marked) == expected:
                    return True
                await asyncio.sleep(0.5)  # noqa: sleep-ok (bounded poll of the auditor)
            return False
        await wait_until(triggered_and_marked, "the gone bookie's ledgers marked", 60)
        assert await asyncio.to_thread(ur.lost_bookie_delay_s) == 3600
        auditor.terminate()
        assert auditor.wait(60) == 0
    for daemon in bookies[1:]:
        assert daemon.terminate() == 0
