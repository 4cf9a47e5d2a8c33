"""Single reads served in batches (bookie/node/read_queue.py RQ1-RQ4) over a real
LedgerStorage and a real read executor: what each read gets, and how few jobs serve them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from bookie.errors import IOFailure
from bookie.node.read_queue import STRIDE_MAX, Oversize, ReadGroup, ReadQueue
from tests.unit.bookie.test_storage_range_reads import (  # noqa: F401
    entry, file_reads, fill, storage, striped)


async def all_of(*futures, **kw):
    """Every read's outcome; a queue that loses a read fails here instead of hanging."""
    return await asyncio.wait_for(asyncio.gather(*futures, **kw), 60)


class CountedExecutor(concurrent.futures.ThreadPoolExecutor):
    """The read executor, counting the jobs it is given."""

    def __init__(self) -> None:
        super().__init__(2, thread_name_prefix="read")
        self.jobs = 0

    def submit(self, *args, **kwargs):
        self.jobs += 1
        return super().submit(*args, **kwargs)


@pytest.fixture
def executor():
    pool = CountedExecutor()
    yield pool
    pool.shutdown(wait=True)


async def test_reads_arriving_together_share_jobs_and_each_gets_its_entry(storage, executor,
                                                                         file_reads):
    written = fill(storage, [1, 2], flushes=3, per_flush=100)
    queue = ReadQueue(asyncio.get_running_loop(), executor, storage.get_entry,
                      storage.get_listed, 8 << 20)
    asked = [(1, e) for e in range(300)] + [(2, e) for e in range(299, -1, -1)] + [(1, 300)]
    got = await all_of(*(queue.read(ledger, e) for ledger, e in asked))
    assert got == [written.get(key) for key in asked]  # (1, 300) was never written: None
    # RQ1: the reads of one loop turn go as full jobs of 256, not the first two alone.
    assert executor.jobs == -(-len(asked) // 256)
    # RQ3: ledger 1's consecutive ids were read as ranges; ledger 2's, asked backwards,
    # one by one.
    assert file_reads[0] < 300 + 20


async def test_a_striped_ledgers_reads_are_read_as_runs(storage, executor, file_reads):
    """RQ3: a 3/2/2 ledger's reader asks this bookie every third id, which it holds two
    in three of: read as runs, not a pread each (issue 41)."""
    written = striped(storage, [1, 2], flushes=2, per_flush=150)
    queue = ReadQueue(asyncio.get_running_loop(), executor, storage.get_entry,
                      storage.get_listed, 8 << 20)
    asked = [(1, e) for e in range(0, 300, 3)] + [(2, e) for e in range(1, 300, 3)] + \
        [(1, 302), (2, 2), (2, 300 + STRIDE_MAX + 1)]  # none stored: None
    got = await all_of(*(queue.read(ledger, e) for ledger, e in asked))
    assert got == [written.get(key) for key in asked]
    assert executor.jobs == 1
    assert file_reads[0] <= 2 * 2 + 3  # a run per flush and ledger, the last three alone


async def test_a_lone_read_is_served_at_once_and_a_failing_read_fails_alone(storage, executor):
    written = fill(storage, [3], flushes=1, per_flush=20)
    queue = ReadQueue(asyncio.get_running_loop(), executor, storage.get_entry,
                      storage.get_listed, 8 << 20)
    assert await queue.read(3, 7) == written[(3, 7)]
    assert executor.jobs == 1
    location = storage.locations.get(3, 12)
    with open(storage.entry_logger.log_path(location >> 32), "r+b") as handle:
        handle.seek(location & 0xFFFFFFFF)
        handle.write((4).to_bytes(8, "big"))  # entry 12 now names another ledger
    reads = [queue.read(3, e) for e in range(20)]
    outcomes = await all_of(*reads, return_exceptions=True)
    assert isinstance(outcomes[12], IOFailure)  # RQ2: its own error ...
    assert [o for n, o in enumerate(outcomes) if n != 12] == \
        [written[(3, e)] for e in range(20) if e != 12]  # ... and only its own


async def test_a_read_whose_requester_left_is_skipped(storage, executor):
    written = fill(storage, [4], flushes=1, per_flush=10)
    queue = ReadQueue(asyncio.get_running_loop(), executor, storage.get_entry,
                      storage.get_listed, 8 << 20)
    futures = [queue.read(4, e) for e in range(10)]
    futures[3].cancel()
    done = await all_of(*futures, return_exceptions=True)
    assert isinstance(done[3], asyncio.CancelledError)
    assert [d for n, d in enumerate(done) if n != 3] == \
        [written[(4, e)] for e in range(10) if e != 3]


async def test_a_group_is_answered_once_with_every_outcome_in_order(storage, executor):
    """RQ4: a group of 300 reads (more than one job takes) is answered once, when its last
    read lands, with each read's outcome at its own index; a cancelled group never is."""
    written = fill(storage, [5], flushes=1, per_flush=299)
    loop = asyncio.get_running_loop()
    queue = ReadQueue(loop, executor, storage.get_entry, storage.get_listed, 8 << 20)
    answered: list = []
    done = loop.create_future()

    def answer(group) -> None:
        answered.append(list(group.outcomes))
        done.set_result(None)

    group = ReadGroup(300, answer)
    queue.read_group([(5, 299 - i, group, i) for i in range(300)])  # (5, 299): not stored
    cancelled = ReadGroup(10, answer)
    queue.read_group([(5, i, cancelled, i) for i in range(10)])
    cancelled.cancel()
    await asyncio.wait_for(done, 60)  # the cancelled group's job has landed by then too
    assert answered == [[written.get((5, 299 - i)) for i in range(300)]]
    assert executor.jobs >= 2


async def test_cancelled_reads_leave_the_queue_unread(storage, executor):
    """RQ5 (issue 53): a lost connection's queued reads leave the queue in the turn they
    are cancelled, groups and futures alike, so a client that reads and disconnects over
    and over cannot grow it; the jobs already running finish, and live reads are served."""
    written = fill(storage, [6], flushes=1, per_flush=200)
    loop = asyncio.get_running_loop()
    gate, served = threading.Event(), []

    def gated_entry(ledger_id, entry_id, limit=0):  # the real storage, behind a gate
        gate.wait(60)
        served.append(entry_id)
        return storage.get_entry(ledger_id, entry_id, limit)

    def gated_listed(ledger_id, entry_ids, max_bytes, limit=0):
        return []  # every read of a run goes through gated_entry, one by one

    queue = ReadQueue(loop, executor, gated_entry, gated_listed, 8 << 20, jobs=2, batch=5)
    answered = loop.create_future()
    live = ReadGroup(20, lambda group: answered.set_result(list(group.outcomes)))
    lost = [ReadGroup(50, lambda group: None) for _ in range(3)]
    queue.read_group([(6, 100 + i, live, i) for i in range(20)])
    for n, group in enumerate(lost):
        queue.read_group([(6, n * 50 + i, group, i) for i in range(50)])
    futures = [queue.read(6, 199 - i) for i in range(30)]
    await asyncio.sleep(0)  # noqa: sleep-ok (one loop turn: the jobs start at its end, RQ1)
    assert len(queue) == 10 + 150 + 30
    for group in lost:
        group.cancel()
    for future in futures:
        future.cancel()
    # RQ5: cancelled futures' callbacks run in the next turn, the purge they schedule in the
    # one after: two turns, counted, not waited for.
    await asyncio.sleep(0)  # noqa: sleep-ok (a loop turn)
    await asyncio.sleep(0)  # noqa: sleep-ok (a loop turn)
    assert len(queue) == 10
    gate.set()
    got = await asyncio.wait_for(answered, 60)
    assert got == [written[(6, 100 + i)] for i in range(20)]
    assert sorted(served) == list(range(100, 120))  # nothing of the lost reads was read


async def test_a_groups_allowance_lands_larger_entries_as_their_size(storage, executor):
    """RQ6 (PB7, issue 53): with an allowance, an entry larger than it lands as
    Oversize(size), its bytes not held, from the entry log (runs, RQ3, and single reads)
    and from the write cache alike; smaller entries land as their bytes, and one group's
    allowance is not another's: a run joins only reads of one allowance."""
    sizes = {e: 20_000 if e % 3 == 1 else 500 for e in range(30)}
    written = fill(storage, [8], flushes=1, per_flush=30, size=lambda e: sizes[e])
    for entry_id in (30, 31):  # in the write cache
        written[(8, entry_id)] = data = entry(8, entry_id, 20_000 if entry_id == 31 else 500)
        storage.add_entry(8, entry_id, data)
    loop = asyncio.get_running_loop()
    queue = ReadQueue(loop, executor, storage.get_entry, storage.get_listed, 8 << 20)
    done: dict = {}

    def answer(group) -> None:
        done[group] = list(group.outcomes)
        if len(done) == 2:
            finished.set_result(None)

    finished = loop.create_future()
    allowance = 4096
    asked = list(range(32)) + [1, 31]  # a run, then single reads (the same ids again)
    limited = ReadGroup(len(asked), answer, allowance)
    whole = ReadGroup(len(asked), answer)  # no allowance: every entry's bytes
    queue.read_group([(8, e, limited, i) for i, e in enumerate(asked)])
    queue.read_group([(8, e, whole, i) for i, e in enumerate(asked)])
    await asyncio.wait_for(finished, 60)
    expected = [written[(8, e)] if len(written[(8, e)]) <= allowance
                else Oversize(len(written[(8, e)])) for e in asked]
    assert done[limited] == expected
    assert limited.resized == sum(o.__class__ is Oversize for o in expected) == 13
    assert done[whole] == [written[(8, e)] for e in asked] and whole.resized == 0
