"""sd_notify: the datagram protocol, the watchdog's arming rule, and that the watchdog pings
come from the event loop itself, so a blocked loop stops them (SD1-SD3 in bookie/sd_notify.py).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest

from bookie import cli
from bookie.sd_notify import Notifier, socket_address, watchdog_interval_s


def _receiver(address) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.setblocking(False)
    return sock


def _drain(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


def test_without_notify_socket_every_call_is_a_no_op():
    notifier = Notifier(environ={})
    assert not notifier.enabled
    assert notifier.send(ready=1) is False
    assert notifier.watchdog_s is None


@pytest.mark.parametrize("abstract", [False, True])
def test_a_datagram_carries_key_value_lines(tmp_path, abstract):
    name = f"@bookie-test-{os.getpid()}" if abstract else str(tmp_path / "notify")
    with _receiver(socket_address(name)) as sock:
        notifier = Notifier(environ={"NOTIFY_SOCKET": name})
        assert notifier.send(ready=1, status="serving\nnow")
        assert notifier.status("line one\nline two")
        notifier.close()
        assert _drain(sock) == ["READY=1\nSTATUS=serving\nnow", "STATUS=line one line two"]


def test_a_vanished_manager_never_raises(tmp_path):
    notifier = Notifier(environ={"NOTIFY_SOCKET": str(tmp_path / "nobody")})
    assert notifier.send(ready=1) is False
    assert notifier.send(watchdog=1) is False


def test_the_watchdog_is_armed_only_for_this_process():
    assert watchdog_interval_s({"WATCHDOG_USEC": "4000000"}, 42) == 2.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "42"}, 42) == 2.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "7"}, 42) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "0"}, 42) is None
    assert watchdog_interval_s({}, 42) is None


async def _until(predicate, bound_s: float = 10.0) -> None:
    deadline = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached within the bound"
        await asyncio.sleep(0.005)  # noqa: sleep-ok (bounded poll of a datagram socket)


async def test_a_blocked_event_loop_stops_the_watchdog_pings(tmp_path):
    path = str(tmp_path / "notify")
    with _receiver(path) as sock:
        notifier = Notifier(environ={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000"})
        assert notifier.watchdog_s == 0.01
        pings: list[str] = []
        task = asyncio.create_task(cli._watchdog(notifier))
        await _until(lambda: len(pings.__iadd__(_drain(sock))) >= 3)
        assert set(pings) == {"WATCHDOG=1"}
        seen_while_blocked: list[str] = []
        unblocked = asyncio.Event()

        def block_the_loop() -> None:
            _drain(sock)
            # The blocked loop is what is under test: it stays blocked for 20 intervals.
            time.sleep(20 * notifier.watchdog_s)  # noqa: sleep-ok
            seen_while_blocked.extend(_drain(sock))
            unblocked.set()

        asyncio.get_running_loop().call_soon(block_the_loop)
        await unblocked.wait()
        assert seen_while_blocked == []
        resumed: list[str] = []
        await _until(lambda: len(resumed.__iadd__(_drain(sock))) >= 2)
        task.cancel()
        notifier.close()

