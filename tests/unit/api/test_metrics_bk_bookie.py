"""api/server/metrics_bk_bookie.py: BookKeeper's counters written under their own names
(MK1) beside ours, and SERVER_STATUS of a bookie not serving yet."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily

from api.server.metrics_bk_bookie import BkCounter, generate_latest, server_status
from bookie.config import BookieConfig
from bookie.node import Bookie


class _Families:
    def collect(self):
        family = BkCounter("bookie_WRITE_BYTES", "total bytes written", ("journalIndex",))
        family.add_metric(("0",), 42)
        yield family
        yield CounterMetricFamily("bookie_gc_runs", "GC runs completed", value=3)


def test_bookkeepers_counters_keep_their_names_and_ours_their_total():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families())
    text = generate_latest(registry).decode()
    assert "# HELP bookie_WRITE_BYTES total bytes written\n" in text
    assert "# TYPE bookie_WRITE_BYTES counter\n" in text
    assert 'bookie_WRITE_BYTES{journalIndex="0"} 42.0\n' in text
    assert "bookie_WRITE_BYTES_total" not in text
    assert "# TYPE bookie_gc_runs_total counter\n" in text  # MK3: ours as before
    assert "bookie_gc_runs_total 3.0\n" in text


def test_a_bookie_not_started_is_minus_one(tmp_path):
    bookie = Bookie(BookieConfig(data_dir=str(tmp_path / "data"), port=0))
    assert server_status(bookie) == -1
