"""The LAC never goes back, across a clean restart too (issue 13 bug 4).

PUT lac 4, then a late PUT lac 2 (the ledger client's idle LAC timer racing close() sends
exactly this order): the answer was 4, but the index kept the late body, and after a SIGTERM
and restart GET lac answered 3 (the piggybacked LAC). The persisted explicit LAC is the
maximum, as the in-memory one is; replay applies the same rule.
"""

from __future__ import annotations

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, frame_lac, master_key
from tests.support.servers import Daemon, running_bookie

KEY = master_key(b"lac")


async def _write(client: BookieClient, ledger_id: int) -> None:
    for entry_id in range(5):
        await client.add_entry(ledger_id, entry_id, frame_entry(
            ledger_id, entry_id, entry_id - 1, 5 * (entry_id + 1), b"bytes",
            DigestType.CRC32C), KEY)
    assert await client.write_lac(ledger_id, KEY, frame_lac(ledger_id, 4)) == 4
    assert await client.write_lac(ledger_id, KEY, frame_lac(ledger_id, 2)) == 4


async def test_a_late_lower_explicit_lac_does_not_lower_it_after_a_clean_restart(
        server, client, bookie_config):
    await _write(client, 4)
    await server.bookie.close()
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as again:
            assert await again.read_lac(4) == 4


async def test_nor_after_kill9_and_replay(tmp_path):
    daemon = Daemon(str(tmp_path / "data"), "--checkpoint-interval-ms", "86400000").start()
    async with BookieClient(daemon.url) as client:
        await _write(client, 5)
    daemon.kill9()  # both LAC records are replayed, in their order
    daemon.start()
    async with BookieClient(daemon.url) as client:
        assert await client.read_lac(5) == 4
    assert daemon.terminate() == 0
