"""Garbage collection over several ledger dirs (bookie/gc_dirs.py): one run, every dir in
turn, counted once; a run that fails part-way is counted too, with what it did so far."""

from __future__ import annotations

import pytest

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.errors import IOFailure
from bookie.gc_dirs import DirsGc
from bookie.storage_dirs import DirsStorage


@pytest.fixture
def storage(tmp_path):
    config = BookieConfig(data_dir=str(tmp_path / "data"), entrylog_max_bytes=4096,
                          ledger_dirs=",".join(str(tmp_path / f"d{i}") for i in range(3)))
    opened = DirsStorage(OsDisk(), config)
    opened.open()
    yield opened
    opened.close()


def test_one_run_goes_over_every_dir_and_counts_once(storage):
    gc = DirsGc(storage.units)
    result = gc.run()
    assert gc.counters.runs == 1 and len(result.dirs) == 3
    assert gc.last_result is result and gc.running is None


def test_a_run_that_fails_in_a_later_dir_is_counted_with_the_dirs_before(storage):
    """Found in review: the failing run was neither counted in the totals nor kept as the
    last result (a single GarbageCollector counts its failed runs)."""
    gc = DirsGc(storage.units)

    def broken(run, budget_s):
        raise IOFailure("the index of dir 2 failed")
    gc.gcs[2]._advance = broken
    with pytest.raises(IOFailure):
        gc.run()
    assert gc.running is None and gc.counters.runs == 1 and gc.counters.problems == 1
    assert len(gc.last_result.dirs) == 3
    assert gc.last_result.problems == ["gc run failed: the index of dir 2 failed"]
    gc.gcs[2]._advance = type(gc.gcs[2])._advance.__get__(gc.gcs[2])
    gc.run()  # the next run starts: nothing was left running
    assert gc.counters.runs == 2
