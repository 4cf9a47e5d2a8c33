"""The Pulsar chart's probes against the real daemon (``bookie serve --admin-port``) while it
replays a large journal: the liveness probe (GET /api/v1/bookie/state) answers 200 with
running false, so a long replay is not killed; the readiness and startup probe
(GET /api/v1/bookie/is_ready) answers 503 "Bookie is not fully started yet" until replay
ends, then 200 "OK" (BookKeeper's BookieStateService and BookieIsReadyService)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

KEY = master_key(b"probes")
ENTRY_PAYLOAD = 16 * 1024
BATCHES, BATCH_ENTRIES = 48, 100          # 75 MiB of journal to replay
QUIET = ("--checkpoint-interval-ms", "86400000", "--write-cache-max-bytes", "1GiB",
         "--journal-max-bytes", "16MiB")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _until_answering(daemon: Daemon, bound_s: float = 60.0) -> None:
    """Until both listeners accept connections (bound before replay begins); bounded."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        assert daemon.proc.poll() is None, daemon.log_text()
        try:
            _get(daemon.admin_url + "/api/v1/bookie/state")
            _get(daemon.url + "/v1/bookie/info")
            return
        except OSError:  # not bound yet (refused, reset; an HTTPError is an answer, caught)
            time.sleep(0.02)  # noqa: sleep-ok (bounded poll of another process's port)
    raise TimeoutError(f"the listeners did not answer within {bound_s}s")


async def _write_a_large_journal(url: str) -> None:
    payload = bytes(range(256)) * (ENTRY_PAYLOAD // 256)
    async with BookieClient(url) as client:
        for batch in range(BATCHES):
            first = batch * BATCH_ENTRIES
            await client.add_batch(3, [frame_entry(3, e, e - 1, (e + 1) * ENTRY_PAYLOAD, payload,
                                                   DigestType.CRC32C)
                                       for e in range(first, first + BATCH_ENTRIES)], KEY)


async def test_probes_while_the_daemon_replays_then_serves(tmp_path):
    data_dir = str(tmp_path / "data")
    writer = Daemon(data_dir, *QUIET).start()
    await _write_a_large_journal(writer.url)
    writer.kill9()

    # Fixed ports: the ready lines come only once it serves, and this test probes before.
    daemon = Daemon(data_dir, *QUIET, "--port", str(free_port()), "--admin-port",
                    str(free_port()))
    daemon.start(wait_ready=False)
    try:
        _until_answering(daemon)
        seen_replaying = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state_status, state = _get(daemon.admin_url + "/api/v1/bookie/state")
            ready_status, ready = _get(daemon.admin_url + "/api/v1/bookie/is_ready")
            _, info = _get(daemon.url + "/v1/bookie/info")
            phase = json.loads(info)["state"]
            if ready_status == 200:
                break
            assert state_status == 200, state  # liveness passes during replay
            assert json.loads(state)["running"] is False
            assert (ready_status, ready) == (503, "Bookie is not fully started yet")
            seen_replaying.append(phase)
        assert "replaying" in seen_replaying, seen_replaying  # the probes met the replay
        assert (ready_status, ready) == (200, "OK")
        assert json.loads(_get(daemon.admin_url + "/api/v1/bookie/state")[1]) == {
            "running": True, "readOnly": False, "shuttingDown": False,
            "availableForHighPriorityWrites": True}
        print(f"{len(seen_replaying)} probe rounds before ready: "
              f"{sorted(set(seen_replaying))}")
    finally:
        assert daemon.terminate() == 0
