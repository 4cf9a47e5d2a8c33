"""api/tls_refresh.py TR2-TR3 with plain renames (no symlinked dir): the certificate renamed
into place first, the key a moment later. The poll that sees the new certificate beside
the old key logs it once and keeps the old chain; the key's rename is a new state, tried
and taken. Real files, real contexts, real handshakes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import os
import time

from api.cluster.certs import make_ca, make_cert, serial_of
from api.tls import server_context
from api.tls_refresh import CertificateReloader
from tests.unit.api.test_tls_reload import _served_serial

ERROR = "certificate not reloaded, the old one stays"


async def _until(condition, bound_s: float = 10.0) -> None:
    deadline = time.monotonic() + bound_s
    while not await condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)  # noqa: sleep-ok (bounded poll)


async def test_a_rotation_by_two_renames_is_logged_once_then_taken(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bookie.tls")
    ca = make_ca(str(tmp_path / "ca"))
    live = make_cert(ca, str(tmp_path / "live"), "bookie")
    new = make_cert(ca, str(tmp_path / "new"), "bookie")
    old_serial, new_serial = serial_of(live.cert_file), serial_of(new.cert_file)
    reloader = CertificateReloader(None, live.cert_file, live.key_file)
    reloader.remember_current()
    reloader.context = server_context(live.cert_file, live.key_file)
    watching = asyncio.create_task(reloader.watch(0.05))
    try:
        async def serial() -> int:
            return await asyncio.to_thread(_served_serial, reloader.context, ca.cert_file)

        assert await serial() == old_serial
        os.rename(new.cert_file, live.cert_file)  # the certificate first...

        async def refused() -> bool:
            return ERROR in caplog.text
        await _until(refused)
        polled = time.monotonic() + 0.3  # six more polls of the same two files
        while time.monotonic() < polled:
            assert await serial() == old_serial
            await asyncio.sleep(0.05)  # noqa: sleep-ok (observed over several polls)
        assert caplog.text.count(ERROR) == 1  # TR3
        os.rename(new.key_file, live.key_file)  # ...then the key: a new state

        async def taken() -> bool:
            return await serial() == new_serial
        await _until(taken)
        assert caplog.text.count(ERROR) == 1
        assert "changed: certificate" in caplog.text and "reloaded" in caplog.text
    finally:
        watching.cancel()


async def test_no_tls_or_no_interval_watches_nothing(tmp_path):
    assert await CertificateReloader(None, None, None).watch(1) is None
    ca = make_ca(str(tmp_path / "ca"))
    live = make_cert(ca, str(tmp_path / "live"), "bookie")
    reloader = CertificateReloader(server_context(live.cert_file, live.key_file),
                                   live.cert_file, live.key_file)
    assert await reloader.watch(0) is None
