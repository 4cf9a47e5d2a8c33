"""What an outsider can do with a wrong secret (docs/operations.md §6): a tampered master key
or admin token is refused, compared in constant time, and no secret comes back in a log line,
an error body, ``/v1/bookie/info`` or ``/metrics``. Real daemons and real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import hmac

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from bookie.errors import Unauthorized
from bookie import write_rules
from tests.support.servers import Daemon, running_bookie

KEY = master_key(b"owner")
TAMPERED = bytes([KEY[0] ^ 1]) + KEY[1:]  # right but for its first byte
TOKEN = "s3cr3t-admin-token-that-must-not-leak"


def entry(entry_id: int) -> bytes:
    return frame_entry(9, entry_id, entry_id - 1, entry_id, b"owned")


async def test_a_tampered_master_key_is_refused_in_constant_time(data_dir, monkeypatch):
    compared, real = [], hmac.compare_digest  # write_rules.hmac is this same module (W8)

    def recording(a, b):
        compared.append((bytes(a), bytes(b)))
        return real(a, b)
    monkeypatch.setattr(write_rules.hmac, "compare_digest", recording)
    config = BookieConfig(data_dir=data_dir, port=0)
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            await client.add_entry(9, 0, entry(0), KEY)
            with pytest.raises(Unauthorized) as refused:
                await client.add_entry(9, 1, entry(1), TAMPERED)
            with pytest.raises(Unauthorized):
                await client.fence(9, TAMPERED)
            assert await client.read_entry(9, 0) == entry(0)
    assert (KEY, TAMPERED) in compared  # the byte-by-byte != is gone (hmac.compare_digest)
    assert TAMPERED.hex() not in str(refused.value) and KEY.hex() not in str(refused.value)


def test_the_admin_token_is_refused_tampered_and_never_shown(tmp_path):
    daemon = Daemon(str(tmp_path / "data"), env={"BOOKIE_ADMIN_TOKEN": TOKEN}).start()
    try:
        async def visit() -> list[str]:
            seen = []
            async with BookieClient(daemon.url, admin_token=TOKEN[:-1] + "X") as outsider:
                with pytest.raises(Unauthorized) as refused:
                    await outsider.checkpoint()
                seen.append(str(refused.value))
            async with BookieClient(daemon.url, admin_token=TOKEN) as admin:
                await admin.checkpoint()
                seen.append(repr(await admin.info()))
                seen.append((await admin._request("GET", "/metrics", raw=True)).decode())
                seen.append((await admin._request("GET", "/openapi.json", raw=True)).decode())
            return seen
        texts = asyncio.run(visit())
    finally:
        daemon.terminate()
    for text in (*texts, daemon.log_text()):
        assert TOKEN not in text and TOKEN[:-1] not in text
