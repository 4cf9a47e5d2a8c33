"""api/cluster/autorecovery/worker.py: a copy window spans about COPY_WINDOW_BYTES of the
ledger, whatever its entries' size (RW9), within 16..WINDOW_IDS ids."""

from __future__ import annotations

from api.client.batch_read import WINDOW_IDS
from api.client.metadata import LedgerMetadata
from api.cluster.autorecovery.worker import COPY_WINDOW_BYTES, _window_ids


def closed(entries: int, size: int) -> LedgerMetadata:
    return LedgerMetadata(ledger_id=1, ensemble_size=3, write_quorum=2, ack_quorum=2,
                          ensembles=((0, ("a:1", "b:1", "c:1")),),
                          last_entry_id=entries - 1, length=entries * size)


def test_small_entries_take_the_reads_window_and_big_ones_about_four_mib():
    assert _window_ids(closed(10_000, 1024)) == WINDOW_IDS
    assert _window_ids(closed(10_000, 64 * 1024)) == COPY_WINDOW_BYTES // (64 * 1024) == 64
    assert _window_ids(closed(100, 4 << 20)) == 16  # never fewer: a round trip per id


def test_a_ledger_without_a_length_takes_the_reads_window():
    assert _window_ids(closed(0, 0)) == WINDOW_IDS
    assert _window_ids(closed(5, 0)) == WINDOW_IDS
