"""What the ZooKeeper-credentials tests share (test_zookeeper_acls.py for the digest scheme,
test_zookeeper_sasl.py for SASL): three bookie daemons that log in with credentials from a
file, this test process logging in from the environment, a ledger written through the
project's client, and every znode under a root."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import urllib.error
import urllib.request

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from api.client import zk_auth
from api.client.ensemble import BookKeeper
from tests.cluster.conftest import QUIET_FLAGS
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port


@contextlib.contextmanager
def credentialed_bookies(tmp_path, uri: str, monkeypatch, env: str, file_flag: str,
                         secret: str):
    """Three bookies given ``secret`` (user:password) in a file through ``file_flag``, and
    this process given it through the environment variable ``env``."""
    secret_file = tmp_path / "zk-credentials"
    secret_file.write_text(secret + "\n")
    secret_file.chmod(0o600)
    monkeypatch.setenv(env, secret)
    monkeypatch.setattr(zk_auth, "_told", [])  # nothing told in this process: the env
    daemons = []
    try:
        for i in range(3):
            daemon = Daemon(str(tmp_path / f"b{i}" / "data"), *QUIET_FLAGS,
                            "--metadata-service-uri", uri, "--port", str(free_port()),
                            file_flag, str(secret_file))
            daemons.append(daemon)
            daemon.start()
        yield daemons
    finally:
        for daemon in daemons:
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.proc.send_signal(signal.SIGCONT)
                try:
                    daemon.terminate(timeout_s=30)
                except subprocess.TimeoutExpired:
                    daemon.kill9()


async def write_a_ledger(uri: str, prefix: bytes = b"entry") -> int:
    """A closed 3/2/2 ledger of ten entries, ``prefix`` 0 .. ``prefix`` 9."""
    async with await BookKeeper.connect(uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        for i in range(10):
            await writer.append(b"%s %d" % (prefix, i))
        await writer.close()
        return writer.ledger_id


def walk(client: KazooClient, path: str):
    yield path
    for child in client.get_children(path):
        yield from walk(client, f"{path}/{child}")


def outsider_could(hosts: str, attempts_of) -> list[str]:
    """Which attempts an unauthenticated session got through instead of NoAuth:
    ``attempts_of(session)`` names each attempt and the call that makes it."""
    outsider = KazooClient(hosts=hosts)
    outsider.start(timeout=15)
    could = []
    try:
        for what, attempt in attempts_of(outsider).items():
            try:
                attempt()
                could.append(what)
            except NoAuthError:
                pass
    finally:
        outsider.stop()
        outsider.close()
    return could


def shown_by(daemon) -> list[str]:
    """What a daemon shows anyone (ZA1: no password in it): its log, its info, its metrics
    and an error body of its API."""
    shown = [daemon.log_text()]
    for path in ("/v1/bookie/info", "/metrics", "/v1/ledgers/999999"):
        try:
            with urllib.request.urlopen(daemon.url + path, timeout=10) as reply:
                shown.append(reply.read().decode())
        except urllib.error.HTTPError as error:  # the 404's body
            shown.append(error.read().decode())
    return shown
