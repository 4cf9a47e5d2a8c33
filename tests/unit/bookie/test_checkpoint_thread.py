"""The checkpoint thread outlives requesters that stop waiting.

An HTTP handler awaiting ``POST /v1/bookie/checkpoint`` or a GC step does so through
``asyncio.wrap_future``; when the handler is cancelled (shutdown), the concurrent future is
cancelled too. Completing a cancelled future raises InvalidStateError: before the fix that
killed the checkpoint thread, and with it every later checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from bookie.checkpoint import CheckpointThread


class GatedCheckpointer:
    """Counts runs; each run waits for ``go`` so a test can act while one is in progress."""

    persisted = None

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        self.runs = 0

    def run(self, delete_journals: bool) -> int:
        self.runs += 1
        self.entered.set()
        assert self.go.wait(30), "the test never opened the gate"
        return self.runs


def _thread(checkpointer) -> tuple[CheckpointThread, list]:
    errors: list = []
    return CheckpointThread(checkpointer, 3600.0, on_io_error=errors.append), errors


def test_a_request_cancelled_during_its_checkpoint_leaves_the_thread_serving():
    gate = GatedCheckpointer()
    thread, errors = _thread(gate)
    first = thread.request()
    thread.start()
    try:
        assert gate.entered.wait(30)
        assert first.cancel()  # the requester gave up while the run was in progress
        gate.go.set()
        second = thread.request()
        assert second.result(30) == 2  # a later run served it: the thread is alive
        assert errors == []
    finally:
        gate.go.set()
        thread.stop()


def test_a_job_cancelled_before_it_runs_leaves_the_thread_serving():
    gate = GatedCheckpointer()
    thread, errors = _thread(gate)
    blocker = thread.request()
    thread.start()
    try:
        assert gate.entered.wait(30)
        ran = threading.Event()
        job = thread.submit(ran.set)  # queued behind the gated run
        assert job.cancel()
        gate.go.set()
        assert blocker.result(30) == 1
        later = thread.submit(lambda: "done")
        assert later.result(30) == "done"
        assert ran.is_set(), "a cancelled job still runs: only its answer is dropped"
        assert errors == []
    finally:
        gate.go.set()
        thread.stop()


def test_stop_fails_requests_still_pending_and_skips_cancelled_ones():
    gate = GatedCheckpointer()
    thread, _errors = _thread(gate)
    thread.start()
    pending = thread.request()
    assert gate.entered.wait(30)
    queued = thread.request()  # waits for the next run, which stop() prevents
    gone = thread.request()
    assert gone.cancel()
    stopper = threading.Thread(target=thread.stop)
    stopper.start()
    gate.go.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert pending.result(30) == 1
    with pytest.raises(Exception, match="stopping"):
        queued.result(30)
    assert gone.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        gone.result(0)
