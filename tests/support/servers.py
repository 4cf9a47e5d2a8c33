"""Real bookies for tests: in-process on the test's loop, or as a daemon subprocess."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.request

from api.server.app import serving
from bookie.node import Bookie

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class RunningBookie:
    bookie: Bookie
    url: str


@contextlib.asynccontextmanager
async def running_bookie(config, disk=None):
    """Start a Bookie and serve it on 127.0.0.1; stop it cleanly (drain + checkpoint)."""
    bookie = Bookie(config, disk=disk)
    try:
        async with serving(bookie, "127.0.0.1", 0) as port:
            await bookie.start()
            try:
                yield RunningBookie(bookie, f"http://127.0.0.1:{port}")
            finally:
                bookie.begin_shutdown()
    finally:
        # Always, even when the test body raised: a bookie left open keeps its journal
        # thread (and RocksDB lock) alive and disturbs every later test.
        if bookie.journal is not None or bookie.storage.locations is not None:
            await bookie.close()


def release_after_io_failure(bookie: Bookie) -> None:
    """After an I/O failure ``Bookie.close`` writes nothing, so it leaves RocksDB and the
    entry logs open (a real daemon exits there). Let them go without writing, so this process
    can start a bookie on the same dir again or unmount its file system. RocksDB's own close
    flushes its memtable, which fails on a broken device: the handle goes anyway."""
    bookie.storage.abandon()


class Daemon:
    """``python -m bookie serve`` as a subprocess, for kill -9 and SIGTERM tests."""

    def __init__(self, data_dir: str, *extra: str, env: dict | None = None,
                 crash_at: tuple[int, str] | None = None,
                 crash_events: tuple[str, ...] | None = None,
                 prefix: tuple[str, ...] = (), client_ssl=None, cwd: str = ROOT) -> None:
        """``crash_at`` (k, glob): SIGKILL at the k-th matching event of ``crash_events``
        (default ``crashing_disk.EVENTS``; ``ALL_EVENTS`` adds unlinks). ``prefix``: argv
        before python, e.g. ("ip", "netns", "exec", NS) to run it in a test network (it
        execs, so the PID stays the bookie's). ``client_ssl``: the client TLS context its
        readiness poll uses on an https bookie (api/tls.py)."""
        self.prefix = tuple(prefix)
        self.cwd = cwd  # another checkout's (scripts/drill/fuzz_bookie_port.py --repo)
        self.client_ssl = client_ssl
        self.data_dir = data_dir
        self.crash_at = crash_at
        self.crash_events = crash_events
        self.extra = list(extra)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.log_path = os.path.join(os.path.dirname(data_dir.rstrip("/")), "daemon.log")

    def start(self, timeout_s: float = 60.0, wait_ready: bool = True) -> "Daemon":
        """Start it; with ``wait_ready``, until it serves: its ready lines on stdout come
        once it has replayed (and joined its cluster), never for a start it refused
        (bookie/cli.py RL1). ``wait_ready=False`` returns at once, for a test that watches
        the start itself: its ports must then be given (``--port N``, and ``--admin-port
        N``/``--bookie-port N`` when on), since no ready line tells them yet."""
        env = {**os.environ, "PYTHONPATH": self.cwd, **(self.env or {})}
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        log = open(self.log_path, "ab")
        entry = ["-m", "bookie"] if self.crash_at is None else [
            "-m", "tests.support.crash_serve", str(self.crash_at[0]), self.crash_at[1],
            *([",".join(self.crash_events)] if self.crash_events else [])]
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, *entry, "serve", "--data-dir", self.data_dir,
             "--host", "127.0.0.1", "--port", "0", *self.extra],
            stdout=subprocess.PIPE, stderr=log, env=env, cwd=self.cwd)
        if not wait_ready:
            self._ports_from_flags()
            return self
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            if not line:  # stdout closed: the process is going; say how it ended
                code = self.proc.wait(timeout_s)
                raise RuntimeError(f"daemon exited {code} before its ready line; "
                                   f"log {self.log_path}")
            raise RuntimeError(f"daemon did not start: {line!r}; log {self.log_path}")
        self.url = line.strip().rsplit(" ", 1)[-1]
        self.bk_port = None
        if "--bookie-port" in self.extra:  # the second ready line: BookKeeper's protocol
            line = self.proc.stdout.readline().decode()
            if not line.startswith("bookie-rpc listening on "):
                raise RuntimeError(f"no bookie-rpc ready line: {line!r}; log {self.log_path}")
            self.bk_port = int(line.strip().rsplit(":", 1)[-1])
        self.admin_url = None
        if "--admin-port" in self.extra:  # BookKeeper's admin REST API (docs/admin-api.md)
            line = self.proc.stdout.readline().decode()
            if not line.startswith("bookie-admin listening on "):
                raise RuntimeError(f"no bookie-admin ready line: {line!r}; log {self.log_path}")
            self.admin_url = line.strip().rsplit(" ", 1)[-1]
        self.wait_ready(timeout_s)
        return self

    def _ports_from_flags(self) -> None:
        def given(flag: str) -> int | None:
            values = [self.extra[i + 1] for i, arg in enumerate(self.extra[:-1]) if arg == flag]
            if values and int(values[-1]) == 0:
                raise ValueError(f"start(wait_ready=False) needs a fixed {flag}, not 0")
            return int(values[-1]) if values else None

        port, admin = given("--port"), given("--admin-port")
        if port is None:
            raise ValueError("start(wait_ready=False) needs --port N among the flags")
        self.url = f"http://127.0.0.1:{port}"
        self.bk_port = given("--bookie-port")
        self.admin_url = f"http://127.0.0.1:{admin}" if admin is not None else None

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Poll /ready with a bound; fail early if the process exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}; log {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/ready", timeout=5,
                                            context=self.client_ssl) as reply:
                    if reply.status == 200:
                        return
            except OSError:  # refused, reset, 503 (HTTPError), or no answer in time:
                pass  # not ready yet; the exit check above ends the wait for a refusal
            time.sleep(0.02)  # noqa: sleep-ok (bounded readiness poll)
        raise TimeoutError(f"daemon not ready after {timeout_s}s; log {self.log_path}")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout_s: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def log_text(self) -> str:
        with open(self.log_path, "rb") as handle:
            return handle.read().decode(errors="replace")


class BackgroundBookie:
    """A real bookie served on 127.0.0.1 from a thread of its own, for synchronous tests
    (schemathesis calls the API with a blocking HTTP client)."""

    def __init__(self, config) -> None:
        import asyncio
        import threading

        self.config = config
        self.url: str | None = None
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bookie-under-test", daemon=True)

    def _run(self) -> None:
        import asyncio

        async def serve() -> None:
            self._stop = asyncio.Event()
            try:
                async with running_bookie(self.config) as running:
                    self.url = running.url
                    self.bookie = running.bookie
                    self._started.set()
                    await self._stop.wait()
            except BaseException as exc:
                self._error = exc
                self._started.set()

        self._loop.run_until_complete(serve())

    def __enter__(self) -> "BackgroundBookie":
        self._thread.start()
        self._started.wait(120)
        if self._error is not None or self.url is None:
            raise RuntimeError(f"bookie did not start: {self._error}")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(120)
