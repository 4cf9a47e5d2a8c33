"""ZooKeeper SASL (DIGEST-MD5) authentication (docs/operations.md §7.1, api/client/zk_auth.py
ZA1-ZA4), against a real SASL-enabled ZooKeeper and real bookie daemons: with ``zk_sasl``
credentials every znode the cluster creates is ``sasl:<user>``'s alone, exactly the ACL
ZooKeeper gives BookKeeper's own ``zkEnableSecurity`` tools (CREATOR_ALL_ACL for the same
login), an unauthenticated session can read none of it, a wrong password is an error naming the
user, and digest and SASL credentials together are refused."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, CREATOR_ALL_ACL, Id, Permissions

from api.client import zk_auth
from api.client.ensemble import BookKeeper
from api.client.metadata import MetadataError
from api.client.metadata_paths import ledger_path
from api.client.zookeeper import parse_uri, zk_call, zk_read, zk_start
from bookie.config import ConfigError, load_config
from tests.cluster.conftest import QUIET_FLAGS
from tests.cluster.credentialed import (credentialed_bookies, outsider_could, shown_by,
                                        walk, write_a_ledger)
from tests.support.servers import Daemon
from tests.support.zookeeper import ZooKeeperServer, free_port, missing

USER, PASSWORD = "bookkeeper", "sasl-s3cret-passw0rd"
WRONG = "not-the-passw0rd"
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory):
    """A ZooKeeper whose JAAS Server section lists USER (the SASL-enabled mode of
    api/cluster/local_zookeeper.py)."""
    reason = missing()
    if reason is not None:
        pytest.fail(reason)  # never a skip, as tests/conftest.py's zookeeper fixture
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper-sasl")),
                             sasl_users={USER: PASSWORD}).start()
    yield server
    server.stop()


@pytest.fixture
def sasl_uri(sasl_zookeeper) -> str:
    return f"zk://{sasl_zookeeper.hosts}/t{time.time_ns()}/ledgers"


@pytest.fixture
def sasl_cluster(tmp_path, sasl_uri, monkeypatch):
    """Three bookies logging in with SASL (the password from a file, zk_sasl_file), and this
    test process logging in the same way (from the environment, BOOKIE_ZK_SASL)."""
    with credentialed_bookies(tmp_path, sasl_uri, monkeypatch, zk_auth.SASL_ENV,
                              "--zk-sasl-file", f"{USER}:{PASSWORD}") as daemons:
        yield daemons


def _sasl_session(hosts: str, password: str) -> KazooClient:
    """A plain kazoo session logging in as USER, as BookKeeper's JAAS Client section does."""
    return KazooClient(hosts=hosts, sasl_options={"mechanism": "DIGEST-MD5",
                                                  "username": USER, "password": password})


def test_our_acl_is_what_zookeeper_gives_a_sasl_logins_creator_all_acl(sasl_zookeeper,
                                                                        monkeypatch):
    """BookKeeper's zkEnableSecurity tools create their znodes with CREATOR_ALL_ACL; ZooKeeper
    turns that into the login's identity. Ours must be exactly that, or the two sides'
    znodes would have different owners."""
    monkeypatch.setattr(zk_auth, "_told", [zk_auth.Credentials(USER, PASSWORD, "sasl")])
    theirs = _sasl_session(sasl_zookeeper.hosts, PASSWORD)
    theirs.start(timeout=15)
    try:
        path = f"/creator-all-{time.time_ns()}"
        theirs.create(path, b"", acl=CREATOR_ALL_ACL)
        zookeeper_made, _ = theirs.get_acls(path)
    finally:
        theirs.stop()
        theirs.close()
    assert zookeeper_made == [ACL(Permissions.ALL, Id("sasl", USER))]
    assert zk_auth.acl(zk_auth.current()) == zookeeper_made


def test_every_znode_of_a_sasl_cluster_is_its_sasl_user_alone(sasl_cluster, sasl_uri,
                                                              sasl_zookeeper):
    ledger_id = asyncio.run(write_a_ledger(sasl_uri))
    hosts, root = parse_uri(sasl_uri)
    owner = zk_auth.new_client(hosts)
    zk_start(owner)
    try:
        paths = list(walk(owner, root))
        assert ledger_path(root, ledger_id) in paths
        assert any(p.startswith(f"{root}/available/") for p in paths)
        assert any(p.startswith(f"{root}/cookies/") for p in paths)
        assert any(p.startswith(f"{root}/underreplication") for p in paths)
        only = [ACL(Permissions.ALL, Id("sasl", USER))]
        others = {p: owner.get_acls(p)[0] for p in paths}
        assert {p: a for p, a in others.items() if a != only} == {}  # ZA2: the root too
    finally:
        owner.stop()
        owner.close()
    for daemon in sasl_cluster:  # ZA1: not in a log, the info, the metrics or an error
        shown = shown_by(daemon)
        assert not [text for text in shown if PASSWORD in text]


def test_an_unauthenticated_session_cannot_read_a_sasl_clusters_metadata(
        sasl_cluster, sasl_uri, sasl_zookeeper):
    ledger_id = asyncio.run(write_a_ledger(sasl_uri))
    hosts, root = parse_uri(sasl_uri)
    assert outsider_could(hosts, lambda outsider: {
        "read ledger metadata": lambda: outsider.get(ledger_path(root, ledger_id)),
        "list the registered bookies": lambda: outsider.get_children(f"{root}/available"),
        "delete ledger metadata": lambda: outsider.delete(ledger_path(root, ledger_id)),
        "disable autorecovery": lambda: outsider.create(
            f"{root}/underreplication/disable", b""),
    }) == []


def test_a_wrong_sasl_password_is_an_error_naming_the_user(sasl_cluster, sasl_uri,
                                                           monkeypatch):
    ledger_id = asyncio.run(write_a_ledger(sasl_uri))
    monkeypatch.setenv(zk_auth.SASL_ENV, f"{USER}:{WRONG}")

    async def open_it():
        async with await BookKeeper.connect(sasl_uri) as bk:
            await bk.open_ledger(ledger_id, b"pw", recover=False)
    began = time.monotonic()
    with pytest.raises(MetadataError) as refused:
        asyncio.run(open_it())
    message = str(refused.value)
    assert "refused the login of SASL user 'bookkeeper'" in message, message
    assert WRONG not in message and PASSWORD not in message
    assert time.monotonic() - began < 10  # ZA4: at once, not after ZK5's whole bound


def test_a_request_after_kazoo_closed_the_refused_session_still_names_the_login(
        sasl_zookeeper, monkeypatch):
    """ZA4's race (CI, stop 63): kazoo closes a refused session (CLOSED) right after
    AUTH_FAILED, and a request made after that fails with ConnectionClosedError. It must still
    be the refused login, not "lost the connection", and at once, not after ZK5's bound."""
    monkeypatch.setattr(zk_auth, "_told", [zk_auth.Credentials(USER, WRONG, "sasl")])
    client = zk_auth.new_client(sasl_zookeeper.hosts)
    try:
        try:
            zk_start(client)
        except MetadataError:
            pass  # refused before the start returned: the request below is the race's case
        deadline = time.monotonic() + 15
        while client.client_state != KeeperState.CLOSED:
            assert time.monotonic() < deadline, client.client_state
            time.sleep(0.01)  # noqa: sleep-ok (a bounded poll of kazoo's own state)
        began = time.monotonic()
        for call in (lambda: zk_read(client.get_async, "/"),
                     lambda: zk_call(client.create_async, "/x", b"")):
            with pytest.raises(MetadataError) as refused:
                call()
            assert "refused the login of SASL user 'bookkeeper'" in str(refused.value)
        assert time.monotonic() - began < 5
    finally:
        client.stop()
        client.close()


def test_a_bookie_with_a_wrong_sasl_password_refuses_to_start_naming_the_user(
        sasl_zookeeper, sasl_uri, tmp_path):
    bad = tmp_path / "zk-sasl-wrong"
    bad.write_text(f"{USER}:{WRONG}\n")
    intruder = Daemon(str(tmp_path / "intruder" / "data"), *QUIET_FLAGS,
                      "--metadata-service-uri", sasl_uri, "--port", str(free_port()),
                      "--zk-sasl-file", str(bad))
    with pytest.raises(RuntimeError):  # it exits instead of getting ready
        intruder.start(timeout_s=60)
    intruder.proc.wait(timeout=30)
    log = intruder.log_text()
    assert "refused the login of SASL user 'bookkeeper'" in log, log[-2000:]
    assert WRONG not in log


def test_digest_and_sasl_credentials_together_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError) as both:
        load_config(None, flags={"zk_digest_file": "/etc/bookie/zk-digest",
                                 "zk_sasl_file": "/etc/bookie/zk-sasl"}, environ={})
    assert "zk_digest" in str(both.value) and "zk_sasl" in str(both.value)
    monkeypatch.setattr(zk_auth, "_told", [])
    monkeypatch.setenv(zk_auth.DIGEST_ENV, f"{USER}:{PASSWORD}")
    monkeypatch.setenv(zk_auth.SASL_ENV, f"{USER}:{PASSWORD}")
    with pytest.raises(zk_auth.CredentialsError) as env_both:
        zk_auth.current()
    text = str(env_both.value)
    assert zk_auth.DIGEST_ENV in text and zk_auth.SASL_ENV in text and PASSWORD not in text
    result = subprocess.run(  # the daemon: refused before it touches a file
        [sys.executable, "-m", "bookie", "serve", "--data-dir", str(tmp_path / "data"),
         "--metadata-service-uri", "zk://127.0.0.1:1/ledgers", "--zk-sasl-file",
         str(tmp_path / "zk-sasl")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 78 and "zk_sasl" in result.stderr and \
        "zk_digest" in result.stderr and PASSWORD not in result.stderr


def test_a_zookeeper_password_is_never_taken_as_a_flag():
    for name in ("zk_sasl", "zk_digest"):
        with pytest.raises(ConfigError) as flag:
            load_config(None, flags={name: f"{USER}:{PASSWORD}"}, environ={})
        assert f"setting {name} holds a password" in str(flag.value)
        assert PASSWORD not in str(flag.value)
    config, _ = load_config(None, environ={"BOOKIE_ZK_SASL": f"{USER}:{PASSWORD}"})
    assert config.zk_sasl == f"{USER}:{PASSWORD}"  # the environment is a way in
