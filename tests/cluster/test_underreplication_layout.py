"""Autorecovery's znodes are BookKeeper's (ZkLedgerUnderreplicationManager,
ZkLedgerAuditorManager): paths and text formats byte for byte, and the invariants UR1-UR4 of
api/cluster/underreplication.py against a real ZooKeeper."""

from __future__ import annotations

from api.client.zookeeper import parse_uri
from api.cluster.underreplication import Underreplication, marker_parent


def test_marker_paths_split_the_id_in_four_hex_levels():
    assert marker_parent("/l/underreplication", 0xCAFEBEEF0000FEED) == \
        "/l/underreplication/ledgers/cafe/beef/0000/feed"
    ur = Underreplication(None, "/ledgers")
    assert ur.marker_path(5) == "/ledgers/underreplication/ledgers/0000/0000/0000/0005/" \
                                "urL0000000005"


def test_markers_merge_lock_and_go_at_the_locked_version(zk, zk_uri):
    _, root = parse_uri(zk_uri)
    ur = Underreplication(zk, root, "worker-1")
    ur.ensure()
    assert zk.get(f"{root}/underreplication/LAYOUT")[0] == b'type: "BASIC"\nversion: 1\n'
    assert ur.mark(7, ["127.0.0.1:1"]) and not ur.mark(7, ["127.0.0.1:1"])  # UR1
    assert ur.mark(7, ["127.0.0.1:2"])
    data = zk.get(ur.marker_path(7))[0].decode()
    assert data.startswith('replica: "127.0.0.1:1"\nreplica: "127.0.0.1:2"\nctime: ')
    assert ur.marked() == [7]
    taken = ur.poll()
    assert taken[0] == 7 and taken[1] == ["127.0.0.1:1", "127.0.0.1:2"]
    assert zk.get(f"{root}/underreplication/locks/urL0000000007")[0] == \
        b'bookieId: "worker-1"\n'
    other = Underreplication(zk, root, "worker-2")
    assert other.poll() is None  # UR3: locked
    assert ur.mark(7, ["127.0.0.1:3"])  # marked again while held
    assert not ur.mark_replicated(7, taken[3])  # UR2: it stays, the lock goes
    assert ur.marked() == [7] and ur.lock_holder(7) is None
    taken = other.poll()
    assert taken[1] == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    assert other.mark_replicated(7, taken[3])
    assert ur.marked() == [] and zk.get_children(f"{root}/underreplication/ledgers") == []


def test_a_poll_takes_from_its_last_walk_and_walks_again_before_saying_none(zk, zk_uri):
    """poll keeps the candidates of its last walk of the marker tree (five reads one after
    another) and walks again only when they are used up: a marker gone since the walk is
    skipped, one made since is found at the next walk, and None comes only after a fresh
    walk found nothing to take."""
    _, root = parse_uri(zk_uri)
    ur = Underreplication(zk, root, "worker-1")
    ur.ensure()
    for ledger_id in (1, 2, 3):
        ur.mark(ledger_id, ["127.0.0.1:1"])
    first = ur.poll()[0]
    ur.mark(4, ["127.0.0.1:1"])  # after the walk
    gone, kept = sorted({1, 2, 3} - {first})
    zk.delete(ur.marker_path(gone))  # replicated by someone else since the walk
    assert ur.poll()[0] == kept  # from the walk's candidates, not 4
    assert ur.poll()[0] == 4  # the candidates used up: a fresh walk finds it
    assert ur.poll() is None
    assert ur.marked() == sorted([first, kept, 4])  # all three locked by worker-1


def test_switches_and_the_delay_live_where_bookkeeper_keeps_them(zk, zk_uri):
    _, root = parse_uri(zk_uri)
    ur = Underreplication(zk, root)
    ur.ensure()
    assert ur.enabled() and ur.set_enabled(False) and not ur.enabled()
    assert zk.exists(f"{root}/underreplication/disable") is not None
    assert ur.set_enabled(True) and ur.enabled() and not ur.set_enabled(True)
    assert ur.lost_bookie_delay_s(30) == 30 and ur.lost_bookie_delay_s(5) == 30  # first wins
    assert zk.get(f"{root}/underreplication/lostBookieRecoveryDelay")[0] == b"30"
    ur.set_lost_bookie_delay_s(0)
    assert ur.lost_bookie_delay_s() == 0
    # BookKeeper's shell (forceauditchecks -rc) wrote these bytes for this ms: binary, not
    # text, as its ZkLedgerUnderreplicationManager reads them back (parseFrom)
    bookkeepers = b"\x08\x9f\xc2\xf9\x80\x9d\x34"
    ur.set_replicas_check_ctime_ms(1794493014303)
    assert zk.get(f"{root}/underreplication/replicascheckctime")[0] == bookkeepers
    assert ur.replicas_check_ctime_ms() == 1794493014303
    zk.set(f"{root}/underreplication/replicascheckctime", b"replicasCheckCTime: 1234\n")
    assert ur.replicas_check_ctime_ms() == 1234  # what this project wrote before


def test_the_lowest_vote_is_the_auditor_and_the_next_is_told_when_it_goes(zk, zk_uri):
    import threading

    _, root = parse_uri(zk_uri)
    first, second = Underreplication(zk, root, "a"), Underreplication(zk, root, "b")
    first.ensure()
    assert first.elected()  # UR4
    told = threading.Event()
    assert not second.elected(told.set)
    assert first.auditor() == "a"
    assert zk.get(f"{root}/underreplication/auditorelection")[0] == b'bookieId: "a"\n'
    first.withdraw()
    assert told.wait(10)
    assert second.elected() and second.auditor() == "b"
