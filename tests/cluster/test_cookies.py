"""Cookies (docs/cluster.md §2, CK1, CK2): written at first start to ZooKeeper and beside the
data dirs, carrying the cluster's instance id (INSTANCEID); a wiped data dir, or another
bookie's, refuses to start while ZooKeeper holds this bookie's cookie, naming both sides and
the command that overrides it; dirs of another cluster instance refuse to start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from api.client.metadata_format import decode_cookie, encode_cookie
from api.client.zookeeper import parse_uri
from tests.support.servers import ROOT, Daemon
from tests.support.zookeeper import free_port

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


def shell(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", "shell", *argv], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                          text=True, timeout=60)


def refused(daemon: Daemon) -> str:
    with pytest.raises(RuntimeError, match="exited 1"):
        daemon.start()
    return daemon.log_text()


def test_a_wiped_data_dir_refuses_to_start_until_the_cookie_is_deleted(tmp_path, zk, zk_uri):
    _, root = parse_uri(zk_uri)
    port = free_port()
    data = str(tmp_path / "data")
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port))
    first = Daemon(data, *flags).start()
    bookie_id = f"127.0.0.1:{port}"
    assert first.terminate() == 0
    cookie = decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0])
    cluster = zk.get(f"{root}/INSTANCEID")[0].decode()  # the first bookie made it (CK2)
    assert cookie["bookieHost"] == bookie_id and cookie["instanceId"] == cluster
    for current in ("journal/current", "ledgers/current"):  # the copy beside the dirs
        assert decode_cookie(open(os.path.join(data, current, "VERSION"), "rb").read()) == cookie

    shutil.rmtree(data)  # the disk was replaced
    log = refused(Daemon(data, *flags))
    assert f"ZooKeeper holds the cookie of bookie {bookie_id}" in log
    assert cookie["instanceId"] in log and "are empty" in log
    override = (f"bookie shell cookie delete --metadata-service-uri {zk_uri} "
                f"--bookie-id {bookie_id}")
    assert override in log

    shown = shell("cookie", "show", "--metadata-service-uri", zk_uri, "--bookie-id", bookie_id)
    assert shown.returncode == 0 and cookie["instanceId"] in shown.stdout
    deleted = shell(*override.split()[2:])
    assert deleted.returncode == 0, deleted.stderr
    again = Daemon(data, *flags).start()  # a new member on the new disk: a new cookie
    try:
        assert zk.exists(f"{root}/cookies/{bookie_id}") is not None
        assert decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0]) == cookie
        assert zk.get(f"{root}/INSTANCEID")[0].decode() == cluster  # never replaced
    finally:
        assert again.terminate() == 0


def test_another_bookies_data_dir_refuses_to_start(tmp_path, zk_uri):
    port_a, port_b = free_port(), free_port()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for data, port in ((a, port_a), (b, port_b)):
        daemon = Daemon(data, *FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port))
        assert daemon.start().terminate() == 0
    swapped = Daemon(b, *FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port_a))
    log = refused(swapped)
    assert f"cookie of bookie 127.0.0.1:{port_a} names journal" in log
    assert f"hold the cookie of bookie 127.0.0.1:{port_b}" in log
    assert "these are not this bookie's dirs" in log


def test_dirs_of_another_cluster_instance_refuse_to_start(tmp_path, zk, zookeeper):
    """CK2: the bookie's ZooKeeper tree was re-formatted (or it is pointed at another
    cluster): its dirs' cookie names the old instance, so it refuses to start, naming both
    instances. BookKeeper's readers read INSTANCEID as a UUID string."""
    data, port = str(tmp_path / "data"), free_port()
    top = f"/first{uuid.uuid4().hex[:8]}"
    first_uri = f"zk://{zookeeper.hosts}{top}/ledgers"
    flags = (*FLAGS, "--port", str(port))
    assert Daemon(data, *flags, "--metadata-service-uri", first_uri).start().terminate() == 0
    old = zk.get(f"{top}/ledgers/INSTANCEID")[0].decode()
    assert str(uuid.UUID(old)) == old
    zk.delete(top, recursive=True)  # re-formatted: a new tree, a new instance
    log = refused(Daemon(data, *flags, "--metadata-service-uri", first_uri))
    new = zk.get(f"{top}/ledgers/INSTANCEID")[0].decode()
    assert new != old
    assert f"belong to cluster instance {old}" in log and f"is cluster instance {new}" in log
    assert zk.exists(f"{top}/ledgers/cookies/127.0.0.1:{port}") is None  # wrote nothing


def test_a_bookie_from_before_instance_ids_starts_after_cluster_init(tmp_path, zk, zookeeper):
    """A tree from before instance ids: cookies named each data dir's own id and there was no
    INSTANCEID. Its bookies refuse to start until 'bookie cluster init' gives the tree one
    (exit 0, then 1 for a second init); then each upgrades its cookie once, in ZooKeeper and
    in its dirs, to the cluster's id (CK3), and starts."""
    root = f"/old{uuid.uuid4().hex[:8]}/ledgers"
    uri = f"zk://{zookeeper.hosts}{root}"
    data, port = str(tmp_path / "data"), free_port()
    bookie_id = f"127.0.0.1:{port}"
    flags = (*FLAGS, "--metadata-service-uri", uri, "--port", str(port))
    assert Daemon(data, *flags).start().terminate() == 0
    # Make it what an older release left: the data dir's id in every cookie, no INSTANCEID.
    own = json.load(open(os.path.join(data, "journal", "current", "IDENTITY")))["instanceId"]
    cookie = decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0])
    old = encode_cookie(cookie["bookieHost"], cookie["journalDir"], cookie["ledgerDirs"], own)
    zk.set(f"{root}/cookies/{bookie_id}", old)
    for current in ("journal/current", "ledgers/current"):
        with open(os.path.join(data, current, "VERSION"), "wb") as file:
            file.write(old)
    zk.delete(f"{root}/INSTANCEID")

    log = refused(Daemon(data, *flags))
    assert f"bookie cluster init --metadata-service-uri {uri}" in log
    init = cluster("init", "--metadata-service-uri", uri)
    assert init.returncode == 0, init.stderr
    instance = zk.get(f"{root}/INSTANCEID")[0].decode()
    assert f"instance {instance}" in init.stdout
    again = cluster("init", "--metadata-service-uri", uri)
    assert again.returncode == 1 and f"already initialised: instance {instance}" in again.stderr
    daemon = Daemon(data, *flags).start()
    try:
        upgraded = decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0])
        assert upgraded == dict(cookie, instanceId=instance)
        for current in ("journal/current", "ledgers/current"):
            local = open(os.path.join(data, current, "VERSION"), "rb").read()
            assert decode_cookie(local) == upgraded
    finally:
        assert daemon.terminate() == 0
    assert f"cookie upgraded from data-dir instance {own} to cluster instance {instance}" \
        in daemon.log_text()


def cluster(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", "cluster", *argv], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                          text=True, timeout=60)


def test_no_cookie_no_bookie_id_is_a_usage_error(zk_uri):
    done = shell("cookie", "show", "--metadata-service-uri", zk_uri)
    assert done.returncode == 2 and "needs --bookie-id" in done.stderr
    absent = shell("cookie", "show", "--metadata-service-uri", zk_uri, "--bookie-id", "h:1")
    assert absent.returncode == 1 and "no cookie of bookie h:1" in absent.stderr


def test_the_cookie_lists_every_journal_and_ledger_dir(tmp_path, zk, zk_uri):
    """docs/formats.md §11.3: journalDir holds every configured journal dir comma-joined
    (BookKeeper's Cookie joins its journalDirs so), ledgerDirs "<count>\\t<dir>..." every
    ledger dir (CF1), and each dir keeps its copy (VERSION); a dir that lost it refuses the
    start (CK1)."""
    _, root = parse_uri(zk_uri)
    port = free_port()
    journals = [str(tmp_path / f"j{i}" / "bk") for i in range(2)]
    ledgers = [str(tmp_path / f"d{i}" / "bk") for i in range(3)]
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port),
             "--journal-dirs", ",".join(journals), "--ledger-dirs", ",".join(ledgers))
    data = str(tmp_path / "data")
    assert Daemon(data, *flags).start().terminate() == 0
    cookie = decode_cookie(zk.get(f"{root}/cookies/127.0.0.1:{port}")[0])
    assert cookie["journalDir"] == ",".join(journals)  # the configured dirs (CF1)
    assert cookie["ledgerDirs"] == ledgers
    for directory in journals + ledgers:
        with open(os.path.join(directory, "current", "VERSION"), "rb") as local:
            assert decode_cookie(local.read()) == cookie
    shutil.rmtree(ledgers[2])  # one disk of three replaced
    log = refused(Daemon(data, *flags))
    assert f"{ledgers[2]}/current has no identity (emptied)" in log


def test_an_emptied_index_dir_refuses_the_start_as_an_emptied_ledger_dir(tmp_path, zk, zk_uri):
    """index_dirs (indexDirectories): the cookie names the index dirs (indexDirs, as
    BookKeeper's), each keeps its copy (VERSION) and identity; a replaced index volume
    whose ledger dir kept its entry logs refuses the start (CK1: no wiped-disk protection
    is lost by moving the indexes)."""
    _, root = parse_uri(zk_uri)
    port = free_port()
    journal, ledger, index = (str(tmp_path / d / "bk") for d in ("j", "hdd", "nvme"))
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port),
             "--journal-dirs", journal, "--ledger-dirs", ledger, "--index-dirs", index)
    data = str(tmp_path / "data")
    assert Daemon(data, *flags).start().terminate() == 0
    cookie = decode_cookie(zk.get(f"{root}/cookies/127.0.0.1:{port}")[0])
    assert cookie["indexDirs"] == [index]
    assert cookie["ledgerDirs"] == [ledger]
    for directory in (journal, ledger, index):
        with open(os.path.join(directory, "current", "VERSION"), "rb") as local:
            assert decode_cookie(local.read()) == cookie
    assert {"locations", "ledgers"} <= set(os.listdir(os.path.join(index, "current")))
    assert not {"locations", "ledgers"} & set(os.listdir(os.path.join(ledger, "current")))
    shutil.rmtree(index)  # the index volume replaced
    log = refused(Daemon(data, *flags))
    assert f"index dir {index}/current has no identity (emptied)" in log
    assert not os.listdir(os.path.join(index, "current"))  # no empty index made there
