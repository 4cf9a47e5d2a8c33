"""Recovery of a ledger whose writer died, against a real bookie on 127.0.0.1: a writer
process SIGKILLed mid-pipeline leaves exactly its acknowledged prefix (plus perhaps entries
written but not acknowledged, never a gap); gaps and bad digests after the LAC end the ledger
before them; recovery is idempotent."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from api.client import BookieClient, DigestMismatch, LedgerReader, recover_ledger
from bookie.entry import DigestType, frame_entry, mac_key, master_key
from tests.support.servers import ROOT

PASSWORD = b"recovery-tests"
KEY = master_key(PASSWORD)
WAIT_S = 60  # bounds a failure; never a synchronisation

WRITER_SCRIPT = r"""
import asyncio, sys
from api.client import LedgerWriter, WriterOptions

def payload(i):
    return (b"entry-%d-" % i) * 20

async def main(url, ledger_id):
    options = WriterOptions(batch_max_entries=int(sys.argv[3]), requests_in_flight_max=8)
    writer = await LedgerWriter.create(url, password=b"recovery-tests", ledger_id=ledger_id,
                                       options=options)
    def acked(future):
        # Futures complete in entry order (L2), so these lines are the acknowledged prefix.
        if not future.cancelled() and future.exception() is None:
            sys.stdout.write("%d\n" % future.result())
            sys.stdout.flush()
    entry_id = 0
    while True:  # until SIGKILL
        (await writer.append_async(payload(entry_id))).add_done_callback(acked)
        entry_id += 1

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def payload(entry_id: int) -> bytes:
    return (b"entry-%d-" % entry_id) * 20


async def _run_writer_and_kill(url: str, ledger_id: int, acks_before_kill: int,
                               batch: int) -> list[int]:
    """Start the writer process, SIGKILL it once it has printed enough acks; all its acks."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER_SCRIPT, url, str(ledger_id), str(batch),
        stdout=asyncio.subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    acked = []
    try:
        while len(acked) < acks_before_kill:
            line = await asyncio.wait_for(proc.stdout.readline(), WAIT_S)
            assert line, "the writer process exited early"
            acked.append(int(line))
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    acked += [int(line) for line in (await proc.stdout.read()).split()]  # printed before
    return acked


@pytest.mark.parametrize("batch", [1, 16])
async def test_recovery_after_the_writers_process_is_killed_keeps_the_acked_prefix(
        server, client, batch):
    ledger_id = 20 + batch
    acked = await _run_writer_and_kill(server.url, ledger_id, 400, batch)
    assert acked == list(range(len(acked)))  # acknowledged in entry order
    result = await recover_ledger(server.url, ledger_id, PASSWORD)
    print(f"acked {len(acked)}, recovered lac {result.lac}, bookie held "
          f"{result.last_entry_id}, cut {result.cut}")
    assert result.lac >= acked[-1]
    assert result.lac <= result.last_entry_id
    async with await LedgerReader.open(server.url, ledger_id, PASSWORD) as reader:
        entries = await reader.read_range(0, result.lac)  # no gap up to the end
        assert await reader.read_lac() == result.lac
        tailed = [e.entry_id async for e in reader.tail(until=result.lac)]
    assert [e.payload for e in entries] == [payload(i) for i in range(result.lac + 1)]
    assert result.length == sum(len(payload(i)) for i in range(result.lac + 1))
    assert tailed == list(range(result.lac + 1))
    again = await recover_ledger(server.url, ledger_id, PASSWORD)
    assert (again.lac, again.length) == (result.lac, result.length)


def _entry(ledger_id: int, entry_id: int, lac: int, digest=DigestType.CRC32C,
           password: bytes = PASSWORD) -> bytes:
    key = mac_key(password) if digest is DigestType.MAC else None
    return frame_entry(ledger_id, entry_id, lac, (entry_id + 1) * len(payload(0)), payload(0),
                       digest, key)


async def test_a_gap_after_the_lac_ends_the_ledger_before_it(client):
    for entry_id in (0, 1, 2, 3, 5, 6):  # 4 never arrived; 5 and 6 overtook it
        await client.add_entry(30, entry_id, _entry(30, entry_id, min(entry_id - 1, 1)), KEY)
    result = await recover_ledger(client, 30, PASSWORD)
    assert (result.fenced_lac, result.lac, result.last_entry_id) == (1, 3, 6)
    assert "entry 4 is missing" in result.cut
    assert await client.read_lac(30) == 3
    again = await recover_ledger(client, 30, PASSWORD)
    assert again.lac == 3


async def test_a_bad_digest_after_the_lac_ends_the_ledger_before_it(client):
    # The bookie cannot check MAC digests (no password), so a bad one can be stored.
    mac = DigestType.MAC
    for entry_id in range(6):
        password = b"someone-else" if entry_id == 3 else PASSWORD
        await client.add_entry(31, entry_id, _entry(31, entry_id, -1, mac, password), KEY,
                               digest_type="mac")
    result = await recover_ledger(client, 31, PASSWORD, "mac")
    assert (result.lac, result.last_entry_id) == (2, 5)
    assert "digest does not match" in result.cut


async def test_a_damaged_acknowledged_entry_is_reported_not_cut(client):
    mac = DigestType.MAC
    for entry_id in range(4):
        password = b"someone-else" if entry_id == 1 else PASSWORD
        await client.add_entry(32, entry_id, _entry(32, entry_id, entry_id - 1, mac, password),
                               KEY, digest_type="mac")
    # The bookie's LAC is 2: entries 0..2 were acknowledged, and entry 2 is fine, but the
    # recoverer starts at the LAC, so damage below it surfaces on read, not in recovery.
    result = await recover_ledger(client, 32, PASSWORD, "mac")
    assert result.lac == 3
    async with await LedgerReader.open(client, 32, PASSWORD, "mac") as reader:
        with pytest.raises(DigestMismatch):
            await reader.read_range(0, 3)


async def test_a_damaged_entry_at_the_lac_fails_recovery(client):
    mac = DigestType.MAC
    for entry_id in range(4):
        password = b"someone-else" if entry_id == 2 else PASSWORD
        await client.add_entry(33, entry_id, _entry(33, entry_id, entry_id - 1, mac, password),
                               KEY, digest_type="mac")
    with pytest.raises(DigestMismatch):
        await recover_ledger(client, 33, PASSWORD, "mac")


async def test_recovering_a_ledger_the_bookie_never_saw_closes_it_empty(client):
    result = await recover_ledger(client, 34, PASSWORD)
    assert (result.lac, result.length, result.cut) == (-1, 0, None)
    assert (await client.ledger_info(34))["fenced"] is True


async def test_recovery_with_the_wrong_password_is_refused(client):
    from bookie.errors import Unauthorized

    await client.add_entry(35, 0, _entry(35, 0, -1), KEY)
    with pytest.raises(Unauthorized):
        await recover_ledger(client, 35, b"wrong")


async def test_recover_accepts_a_url_and_a_client(server):
    async with BookieClient(server.url) as client:
        await client.add_entry(36, 0, _entry(36, 0, -1), KEY)
    assert (await recover_ledger(server.url, 36, PASSWORD)).lac == 0
