"""Ledger usage counters across a kill at each step of a checkpoint (issue 13, U2 and M6).

A child process writes two checkpoints' worth of entries through a real LedgerStorage
(real files, real RocksDB) and is killed inside the second flush: before the usage-pending
key, between it and the index batch, between the batch and the counters' write, and after
the counters. Whatever the index then holds, the reopened storage answers usage equal to a
walk over the index: either the counters were written with the batch, or the pending key
makes them "not known" and the recount gives the index's truth.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.storage import LedgerStorage

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
LEDGERS = (3, 4)

CHILD = """
import os
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.storage import LedgerStorage

storage = LedgerStorage(OsDisk(), BookieConfig(data_dir={data_dir!r}))
storage.open()
for ledger_id in {ledgers!r}:
    storage.ledgers.set_master_key(ledger_id, bytes(20), 3)

def add(first, last):
    for ledger_id in {ledgers!r}:
        for entry_id in range(first, last):
            payload = bytes([entry_id % 251]) * (100 + entry_id)
            storage.add_entry(ledger_id, entry_id, frame_entry(
                ledger_id, entry_id, entry_id - 1, 0, payload))

add(0, 10)
storage.flush()

def die(original):
    def wrapper(*args, **kwargs):
        if {after!r}:
            original(*args, **kwargs)
        os._exit(9)
    return wrapper

target = {target!r}
owner = storage.ledgers if target in ("begin_usage", "flush") else storage.locations
setattr(owner, target, die(getattr(owner, target)))
add(5, 20)  # 5..9 again (re-adds: not new), 10..19 new
storage.flush()
os._exit(0)
"""

# (method, crash after it ran?): every step of the flush that touches usage or the index.
STEPS = [("begin_usage", False), ("begin_usage", True), ("add_batch", True),
         ("flush", False), ("flush", True)]
#: Where the pending key is on disk at the kill: those counters must be "not known".
PENDING = {("begin_usage", True), ("add_batch", True), ("flush", False)}


def run_killed_child(template: str, data_dir: str, **fields) -> None:
    """Run a child script (``template`` formatted with data_dir and ``fields``) that must
    end killed: os._exit(9) where the test put its crash."""
    code = textwrap.dedent(template.format(data_dir=data_dir, **fields))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr


def walk(storage: LedgerStorage, ledger_id: int) -> tuple[int, int]:
    entries = list(storage.locations.entries(ledger_id))
    size = sum(len(storage.entry_logger.read_entry(loc, ledger_id, e)) for e, loc in entries)
    return len(entries), size


@pytest.mark.parametrize("target, after", STEPS, ids=[f"{t}-{'after' if a else 'before'}"
                                                      for t, a in STEPS])
def test_usage_equals_the_index_after_a_kill_mid_checkpoint(tmp_path, target, after):
    data_dir = str(tmp_path / "data")
    run_killed_child(CHILD, data_dir, ledgers=LEDGERS, target=target, after=after)
    storage = LedgerStorage(OsDisk(), BookieConfig(data_dir=data_dir))
    storage.open()
    try:
        for ledger_id in LEDGERS:
            truth = walk(storage, ledger_id)
            assert truth[0] in (10, 20)  # the second batch landed whole or not at all
            usage = storage.ledger_usage(ledger_id)
            assert (usage is None) == ((target, after) in PENDING)
            if usage is None:  # left pending by the crash: recounted from the index
                assert storage.recount_usage(ledger_id) == truth
                usage = storage.ledger_usage(ledger_id)
            assert usage == truth, (target, after)
        storage.flush()  # the recount is written, the pending key deleted
    finally:
        storage.close()
    again = LedgerStorage(OsDisk(), BookieConfig(data_dir=data_dir))
    again.open()
    try:
        for ledger_id in LEDGERS:
            assert again.ledger_usage(ledger_id) == walk(again, ledger_id)
    finally:
        again.close()


FIRST_FLUSH = """
import os
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.storage import LedgerStorage

storage = LedgerStorage(OsDisk(), BookieConfig(data_dir={data_dir!r}))
storage.open()
storage.ledgers.set_master_key(7, bytes(20), 3)
for entry_id in range(10):
    storage.add_entry(7, entry_id, frame_entry(7, entry_id, entry_id - 1, 0, b"e" * 50))
original = storage.locations.add_batch
def die(*args, **kwargs):
    original(*args, **kwargs)
    os._exit(9)  # the index holds the entries; the new ledger's state was never written
storage.locations.add_batch = die
storage.flush()
"""


def test_a_ledger_created_by_the_checkpoint_that_died_is_recounted(tmp_path):
    """Its state never reached disk, its entries did: when replay creates the ledger again
    (its LEDGER_KEY record), its counters must start not known, not at 0."""
    data_dir = str(tmp_path / "data")
    run_killed_child(FIRST_FLUSH, data_dir)
    storage = LedgerStorage(OsDisk(), BookieConfig(data_dir=data_dir))
    storage.open()
    try:
        assert storage.ledgers.get(7) is None and walk(storage, 7)[0] == 10
        storage.ledgers.set_master_key(7, bytes(20), 3)  # what replay does first
        assert storage.ledger_usage(7) is None
        assert storage.recount_usage(7) == walk(storage, 7)
        storage.flush()  # the state is written; the pending key is settled
    finally:
        storage.close()
    again = LedgerStorage(OsDisk(), BookieConfig(data_dir=data_dir))
    again.open()
    try:
        assert again.ledger_usage(7) == walk(again, 7)
    finally:
        again.close()


BETWEEN_CHUNKS = """
import os
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.storage import LedgerStorage
from ledgerindex import locations

locations.WRITE_CHUNK = 4  # the index batch goes in chunks (LO1); 30 entries: 8 chunks
storage = LedgerStorage(OsDisk(), BookieConfig(data_dir={data_dir!r}))
storage.open()
storage.ledgers.set_master_key(5, bytes(20), 3)
for entry_id in range(10):
    storage.add_entry(5, entry_id, frame_entry(5, entry_id, entry_id - 1, 0, b"a" * 40))
storage.flush()
writes = []
original = storage.locations.kv.write_batch
def die_after_two(puts, *args, **kwargs):
    if len(writes) == 2:
        os._exit(9)  # killed between chunks: two written (unsynced), the rest never
    writes.append(len(puts))
    return original(puts, *args, **kwargs)
storage.locations.kv.write_batch = die_after_two
for entry_id in range(10, 40):
    storage.add_entry(5, entry_id, frame_entry(5, entry_id, entry_id - 1, 0,
                                               bytes([entry_id]) * 60))
storage.flush()
"""


def test_a_kill_between_index_chunks_leaves_a_prefix_pointing_at_synced_bytes(tmp_path):
    """LO1: a checkpoint's locations go in chunks, the last one synced. Killed between two,
    the index holds the first checkpoint and a prefix of the second, every location pointing
    at the entry it names (the log was fsynced first), and the counters are "not known"
    until recounted from the index. lastMark never moved, so replay re-adds the rest."""
    data_dir = str(tmp_path / "data")
    run_killed_child(BETWEEN_CHUNKS, data_dir)
    storage = LedgerStorage(OsDisk(), BookieConfig(data_dir=data_dir))
    storage.open()
    try:
        indexed = dict(storage.locations.entries(5))
        assert sorted(indexed) == list(range(18))  # 10, then two chunks of 4
        for entry_id, location in indexed.items():
            data = storage.entry_logger.read_entry(location, 5, entry_id)
            assert data[36:] == (b"a" * 40 if entry_id < 10 else bytes([entry_id]) * 60)
        assert storage.ledger_usage(5) is None  # the checkpoint died after begin_usage
        assert storage.recount_usage(5) == walk(storage, 5) == (18, sum(
            36 + (40 if entry_id < 10 else 60) for entry_id in range(18)))
    finally:
        storage.close()
