"""``bookkeeper shell`` cookie and info commands (bookie/shell/bk_cookie.py,
bk_updatecookie.py, bk_info.py) against a real ZooKeeper and real bookies, under BookKeeper's
names and flags."""

from __future__ import annotations

import asyncio
import os

from api.client import BookieClient
from api.client.metadata import LedgerMetadata
from api.client.metadata_format import decode_cookie
from api.client.metadata_service import open_metadata_store
from bookie.entry import frame_entry, master_key
from entrylog.format import parse_log_id
from tests.support.bk_shell import conf as _conf, hierarchical as _hierarchical, run as _run
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

KEY = master_key(b"bk-shell")


def test_cookie_commands_round_trip(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    env = {"BOOKIE_CONF": _conf(tmp_path / "bookkeeper.conf", uri)}
    assert _run("shell", "initnewcluster", env=env).returncode == 0
    instance = zk.get(f"{root}/INSTANCEID")[0].decode()
    cookie = tmp_path / "cookie"
    made = _run("shell", "cookie_generate", "10.0.0.1:3181", "-j", "/j", "-l", "/l1,/l2",
                "-o", str(cookie), env=env)
    assert made.returncode == 0, made
    assert f"Successfully saved the generated cookie to {cookie}" in made.stdout
    assert decode_cookie(cookie.read_bytes()) == {
        "bookieHost": "10.0.0.1:3181", "journalDir": "/j", "ledgerDirs": ["/l1", "/l2"],
        "instanceId": instance}  # ZooKeeper's instance id when -i is not given
    assert _run("shell", "cookie_create", "10.0.0.1:3181", "-cf", str(cookie),
                env=env).returncode == 0
    assert zk.get(f"{root}/cookies/10.0.0.1:3181")[0] == cookie.read_bytes()
    twice = _run("shell", "cookie_create", "10.0.0.1:3181", "--cookie-file", str(cookie),
                 env=env)
    assert twice.returncode == 255 and "Cookie already exist" in twice.stderr  # CC2
    got = _run("shell", "cookie_get", "10.0.0.1:3181", env=env)
    assert got.returncode == 0
    assert got.stdout == (f"Cookie for bookie '10.0.0.1:3181' is:\n---\n"
                          f"{cookie.read_text()}\n---\n")  # CC1
    other = tmp_path / "other"
    assert _run("shell", "cookie_generate", "10.0.0.1:3181", "-j", "/j2", "-l", "/l",
                "-i", "abc", "-o", str(other), env=env).returncode == 0
    assert _run("shell", "cookie_update", "10.0.0.1:3181", "-cf", str(other),
                env=env).returncode == 0
    assert decode_cookie(zk.get(f"{root}/cookies/10.0.0.1:3181")[0])["journalDir"] == "/j2"
    absent = _run("shell", "cookie_update", "10.0.0.9:3181", "-cf", str(other), env=env)
    assert absent.returncode == 255 and zk.exists(f"{root}/cookies/10.0.0.9:3181") is None
    assert _run("shell", "cookie_delete", "10.0.0.1:3181", env=env).returncode == 0
    again = _run("shell", "cookie_delete", "10.0.0.1:3181", env=env)
    assert again.returncode == 255 and "Cookie not found for bookie" in again.stderr
    assert _run("shell", "cookie_get", "not-an-id", env=env).returncode == 255


def test_updatecookie_moves_lists_and_deletes_a_bookies_cookie(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    data, port = tmp_path / "bookie", free_port()
    conf = _conf(tmp_path / "bookkeeper.conf", uri, data)
    env = {"BOOKIE_CONF": conf, "BOOKIE_PORT": str(port)}
    Daemon(str(data), "--conf", conf, "--port", str(port)).start().terminate()
    listed = _run("shell", "updatecookie", "-list", env=env)
    assert listed.returncode == 0, listed
    assert str(data / "journal" / "current" / "VERSION") in listed.stdout
    assert f"{root}/cookies/127.0.0.1:{port}" in listed.stdout
    wrong = _run("shell", "updatecookie", "-bookieId", "hostname", env=env)
    assert wrong.returncode == 255 and "useHostNameAsBookieID=true" in wrong.stderr  # UC1
    moved_env = {**env, "BOOKIE_HOST": "127.0.0.2"}
    moved = _run("shell", "updatecookie", "-bookieId", "ip", env=moved_env)
    assert moved.returncode == 0, moved
    assert zk.exists(f"{root}/cookies/127.0.0.1:{port}") is None
    assert decode_cookie(zk.get(f"{root}/cookies/127.0.0.2:{port}")[0])["bookieHost"] == \
        f"127.0.0.2:{port}"
    # the bookie starts under its new id on the dirs it has (CK1 holds: the cookies agree)
    Daemon(str(data), "--conf", conf, "--port", str(port), "--host", "127.0.0.2").start() \
        .terminate()
    assert _run("shell", "updatecookie", "-expandstorage", env=moved_env).returncode == 255
    asked = _run("shell", "updatecookie", "-delete", env=moved_env, stdin="n\nn\n")
    assert asked.returncode == 0 and "Skipping deleting local Cookies" in asked.stdout  # UC2
    assert zk.exists(f"{root}/cookies/127.0.0.2:{port}")
    deleted = _run("shell", "updatecookie", "-delete", "force", env=moved_env)
    assert deleted.returncode == 0, deleted
    assert zk.exists(f"{root}/cookies/127.0.0.2:{port}") is None
    assert not os.path.exists(data / "ledgers" / "current" / "VERSION")
    assert _run("shell", "updatecookie", "-list", "-delete", env=env).returncode == 255


async def _write(url: str, ledger_id: int) -> None:
    async with BookieClient(url) as client:
        for entry_id in range(3):
            await client.add_entry(ledger_id, entry_id, frame_entry(
                ledger_id, entry_id, entry_id - 1, entry_id, b"x" * 100), KEY)


def test_endpointinfo_and_activeledgers(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    data, port = tmp_path / "bookie", free_port()
    conf = _conf(tmp_path / "bookkeeper.conf", uri, data)
    env = {"BOOKIE_CONF": conf, "BOOKIE_PORT": str(port)}
    daemon = Daemon(str(data), "--conf", conf, "--port", str(port),
                    "--gc-interval-ms", "0").start()
    try:
        info = _run("shell", "endpointinfo", "-bookieid", f"127.0.0.1:{port}", env=env)
        assert info.returncode == 0, info
        assert info.stdout.splitlines()[:4] == [
            f"BookiedId: 127.0.0.1:{port}", "Endpoint: http", "Protocol: http",
            f"Address: 127.0.0.1 : {port}"]
        gone = _run("shell", "endpointinfo", "-b", "127.0.0.1:1", env=env)
        assert gone.returncode == 255

        async def ledgers():
            store = open_metadata_store(uri)
            async with store:
                kept = await store.create(LedgerMetadata(ledger_id=None))
                doomed = await store.create(LedgerMetadata(ledger_id=None))
                await _write(daemon.url, kept.ledger_id)
                await _write(daemon.url, doomed.ledger_id)
                await store.delete(doomed.ledger_id, doomed.version)
            return kept.ledger_id, doomed.ledger_id
        kept, doomed = asyncio.run(ledgers())
    finally:
        assert daemon.terminate() == 0
    logs = sorted(i for i in map(parse_log_id, os.listdir(data / "ledgers" / "current"))
                  if i is not None)
    active = _run("shell", "activeledgers", "-logId", str(logs[0]), env=env)
    assert active.returncode == 0, active
    lines = active.stdout.splitlines()
    assert f"Print active ledgers of entrylog {logs[0]} ({logs[0]:x}.log)" in lines
    assert any(line.startswith(f"--------- Lid={kept}, TotalSizeOfEntriesOfLedger=")
               for line in lines)
    assert not any(f"Lid={doomed}," in line for line in lines)
    assert _run("shell", "activeledgers", env=env).returncode == 255  # -logId is required
