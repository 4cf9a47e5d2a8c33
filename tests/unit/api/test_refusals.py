"""api/server/refusals.py's limiter on a fake clock: every refusal counted, at most ``burst``
WARN lines per interval per key, then one line of how many were not logged."""

from __future__ import annotations

import logging

from api.server.refusals import RefusalLog, peer_text

PEER = ("10.0.0.7", 40312)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "bookie.refusals" and r.levelno == logging.WARNING]


def test_each_key_logs_a_burst_per_interval_then_says_how_many_it_did_not(caplog):
    caplog.set_level(logging.WARNING, logger="bookie.refusals")
    counts, clock = {}, FakeClock()
    refusals = RefusalLog("bookie_port", counts, burst=2, interval_s=60.0, clock=clock)
    for _ in range(5):
        refusals.refused(("ADD_ENTRY", "EUA"), "master key does not match", PEER)
    refusals.refused(("READ_ENTRY", "ENOENTRY"), "entry 5/9 is not stored", PEER)
    assert lines(caplog) == [
        "bookie_port refused ADD_ENTRY EUA from 10.0.0.7:40312: master key does not match"] * 2 \
        + ["bookie_port refused READ_ENTRY ENOENTRY from 10.0.0.7:40312: entry 5/9 is not "
           "stored"]
    caplog.clear()
    clock.now += 59.9  # the same interval: still quiet
    refusals.refused(("ADD_ENTRY", "EUA"), "master key does not match", PEER)
    assert lines(caplog) == []
    clock.now += 0.1
    refusals.refused(("ADD_ENTRY", "EUA"), "master key does not match", PEER)
    assert lines(caplog) == [
        "bookie_port: 4 more ADD_ENTRY EUA refusals in the last 60 s were not logged",
        "bookie_port refused ADD_ENTRY EUA from 10.0.0.7:40312: master key does not match"]
    assert counts == {("ADD_ENTRY", "EUA"): 7, ("READ_ENTRY", "ENOENTRY"): 1}


def test_a_quiet_interval_logs_no_summary_and_a_run_is_one_line_of_its_count(caplog):
    caplog.set_level(logging.WARNING, logger="bookie.refusals")
    counts, clock = {}, FakeClock()
    refusals = RefusalLog("bookie_port", counts, burst=1, interval_s=10.0, clock=clock)
    refusals.refused(("ADD_ENTRY", "EIO"), "journal write failed", PEER, count=250)
    refusals.refused(("ADD_ENTRY", "EIO"), "journal write failed", PEER, count=3)
    for _ in range(2):  # the second interval suppressed nothing: no summary after it
        clock.now += 10
        refusals.refused(("ADD_ENTRY", "EIO"), "journal write failed", PEER)
    assert lines(caplog) == [
        "bookie_port refused 250 ADD_ENTRY EIO from 10.0.0.7:40312: journal write failed",
        "bookie_port: 3 more ADD_ENTRY EIO refusals in the last 10 s were not logged",
        "bookie_port refused ADD_ENTRY EIO from 10.0.0.7:40312: journal write failed",
        "bookie_port refused ADD_ENTRY EIO from 10.0.0.7:40312: journal write failed"]
    assert counts == {("ADD_ENTRY", "EIO"): 255}


def test_peers_read_as_host_and_port():
    assert peer_text(("127.0.0.1", 5)) == "127.0.0.1:5"
    assert peer_text(("::1", 5, 0, 0)) == "[::1]:5"
    assert peer_text("127.0.0.1") == "127.0.0.1"
    assert peer_text(None) == "None"
