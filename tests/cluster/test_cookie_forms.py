"""The cookie's dirs in BookKeeper's form (CF1, CF2 in api/cluster/cookie_forms.py) and
BookKeeper's dirs, which have no IDENTITY (CK4 in api/cluster/member.py): a cookie of ours
from before CF1 (each dir's current/) is rewritten once, in ZooKeeper and in every dir, also
after a crash between the two; dirs without identity start on their cookie, and one of them
without its cookie (a replaced disk) refuses the start."""

from __future__ import annotations

import glob
import os

from api.client.metadata_format import decode_cookie, encode_cookie
from api.client.zookeeper import parse_uri
from tests.cluster.test_cookies import FLAGS, refused
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port


def dirs_flags(tmp_path) -> tuple[list[str], list[str], str, tuple]:
    journals = [str(tmp_path / f"j{i}") for i in range(2)]
    ledgers = [str(tmp_path / f"d{i}") for i in range(2)]
    index = [str(tmp_path / f"i{i}") for i in range(2)]
    return journals, ledgers, ",".join(index), (
        "--journal-dirs", ",".join(journals), "--ledger-dirs", ",".join(ledgers),
        "--index-dirs", ",".join(index))


def cookie_files(tmp_path) -> list[str]:
    return sorted(glob.glob(str(tmp_path / "*" / "current" / "VERSION")))


def older_form(cookie: dict) -> bytes:
    """What our bookie wrote before CF1: every dir's current/."""
    def current(dirs):
        return [f"{d}/current" for d in dirs]
    return encode_cookie(cookie["bookieHost"], ",".join(current(cookie["journalDir"].split(","))),
                         current(cookie["ledgerDirs"]), cookie["instanceId"],
                         current(cookie["indexDirs"]))


def test_an_older_cookie_is_rewritten_once_in_bookkeepers_form(tmp_path, zk, zk_uri):
    _, root = parse_uri(zk_uri)
    port = free_port()
    journals, ledgers, index, dirs = dirs_flags(tmp_path)
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port), *dirs)
    data, path = str(tmp_path / "data"), f"{root}/cookies/127.0.0.1:{port}"
    assert Daemon(data, *flags).start().terminate() == 0
    cookie = decode_cookie(zk.get(path)[0])
    assert cookie["journalDir"] == ",".join(journals) and cookie["ledgerDirs"] == ledgers
    assert cookie["indexDirs"] == index.split(",")
    assert len(cookie_files(tmp_path)) == 6

    old = older_form(cookie)
    # The state a start of this version leaves when killed between ZooKeeper's rewrite and
    # the dirs' (ZooKeeper's in CF1 form, the dirs' older), then the untouched older state.
    for zookeepers in (encode_cookie(**_fields(cookie)), old):
        zk.set(path, zookeepers)
        for file in cookie_files(tmp_path):
            with open(file, "wb") as handle:
                handle.write(old)
        daemon = Daemon(data, *flags).start()
        assert daemon.terminate() == 0
        assert decode_cookie(zk.get(path)[0]) == cookie
        for file in cookie_files(tmp_path):
            assert decode_cookie(open(file, "rb").read()) == cookie, file
        rewrites = daemon.log_text().count("rewrote its cookie in ZooKeeper")  # one log
        assert rewrites == (zookeepers == old)  # ZooKeeper's is rewritten only if older
    version = zk.get(path)[1].version
    again = Daemon(data, *flags).start()  # nothing left to rewrite: nothing rewritten
    assert again.terminate() == 0 and again.log_text().count("rewrote its cookie") == 1
    assert zk.get(path)[1].version == version


def _fields(cookie: dict) -> dict:
    return {"bookie_id": cookie["bookieHost"], "journal_dir": cookie["journalDir"],
            "ledger_dirs": cookie["ledgerDirs"], "instance_id": cookie["instanceId"],
            "index_dirs": cookie.get("indexDirs")}


def test_dirs_without_identity_start_on_their_cookie_but_not_with_one_missing(tmp_path, zk_uri):
    """BookKeeper's dirs hold VERSION but no IDENTITY: they start (the old code refused them
    as empty), and with one dir's VERSION gone they are refused, naming it (CK4)."""
    port = free_port()
    _, _, _, dirs = dirs_flags(tmp_path)
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port), *dirs)
    data = str(tmp_path / "data")
    assert Daemon(data, *flags).start().terminate() == 0

    def forget_identity():
        identities = glob.glob(str(tmp_path / "*" / "current" / "IDENTITY"))
        assert len(identities) == 6
        for file in identities:
            os.unlink(file)

    forget_identity()
    assert Daemon(data, *flags).start().terminate() == 0
    forget_identity()
    lost = str(tmp_path / "d1" / "current" / "VERSION")
    os.unlink(lost)
    log = refused(Daemon(data, *flags))
    assert f"{lost}: no cookie, while the other data dirs of bookie 127.0.0.1:{port}" in log


def test_a_dir_with_another_bookies_cookie_is_refused_and_left_as_it_is(tmp_path, zk, zk_uri):
    """CK1 for every dir: one ledger dir swapped in from another bookie keeps that bookie's
    cookie, and the start is refused before anything is rewritten, although the other dirs'
    older form is due a rewrite (before, only the first dir's cookie was compared)."""
    _, root = parse_uri(zk_uri)
    port = free_port()
    _, _, _, dirs = dirs_flags(tmp_path)
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port), *dirs)
    data = str(tmp_path / "data")
    assert Daemon(data, *flags).start().terminate() == 0
    cookie = decode_cookie(zk.get(f"{root}/cookies/127.0.0.1:{port}")[0])
    other = encode_cookie(**dict(_fields(cookie), bookie_id="10.0.0.9:3181"))
    swapped = str(tmp_path / "d1" / "current" / "VERSION")
    with open(swapped, "wb") as handle:
        handle.write(other)
    for file in cookie_files(tmp_path):  # the rest in the older form: a rewrite is due
        if file != swapped:
            with open(file, "wb") as handle:
                handle.write(older_form(cookie))
    log = refused(Daemon(data, *flags))
    assert f"{swapped}: another cookie than the one the other data dirs of bookie" in log
    assert open(swapped, "rb").read() == other
