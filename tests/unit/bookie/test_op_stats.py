"""bookie/op_stats.py OS1-OS3: weighted observations, quantiles within a bucket's width of
the exact ones, windows that rotate, and the (X_REQUEST, X) pairs BookKeeper names."""

from __future__ import annotations

import math

from bookie.op_stats import BOUNDS, SERVER_OPS, Latency, OpStats

STEP = 2 ** (1 / 8)  # one bucket's width (ratio of its bounds)


def test_quantiles_are_within_one_bucket_of_the_exact_ones():
    latency = Latency()
    values = [i * 1e-5 for i in range(1, 10_001)]  # 10 us .. 100 ms, uniform
    for value in values:
        latency.observe(value)
    for q, estimate in zip((0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0), latency.quantiles()):
        exact = values[min(len(values) - 1, math.ceil(q * len(values)) - 1)]
        assert exact / STEP <= estimate <= exact * STEP, (q, exact, estimate)
    assert latency.count == 10_000 and math.isclose(latency.sum, sum(values))


def test_a_weighted_observation_is_n_observations():
    one, many = Latency(), Latency()
    one.observe(0.003, 150)
    for _ in range(150):
        many.observe(0.003)
    assert (one.counts, one.count) == (many.counts, many.count)
    assert math.isclose(one.sum, many.sum)


def test_windows_rotate_and_an_empty_one_is_nan():
    stats = OpStats(window_s=60.0)
    latency = stats.ADD_ENTRY.ok
    latency.observe(0.001)
    stats.rotate_if_due(0.0)      # starts the clock: everything since start
    assert not math.isnan(latency.quantiles()[0])
    stats.rotate_if_due(30.0)     # not due
    stats.rotate_if_due(60.0)     # rotation 1: the window is everything still
    assert not math.isnan(latency.quantiles()[0])
    stats.rotate_if_due(120.0)    # rotation 2: the window is 60..120, empty
    assert all(math.isnan(v) for v in latency.quantiles())
    latency.observe(0.5)
    assert latency.quantiles()[-1] > 0.4 and latency.count == 2  # OS3: counts since start


def test_pairs_are_bookkeepers():
    stats = OpStats()
    assert stats.pair("ADD_ENTRY") == (stats.ADD_ENTRY_REQUEST, stats.ADD_ENTRY)
    assert stats.pair("READ_ENTRY_FENCE") == (stats.READ_ENTRY_FENCE_REQUEST,
                                              stats.READ_ENTRY_FENCE_READ)
    assert stats.pair("READ_ENTRY_LONG_POLL") == (stats.READ_ENTRY_LONG_POLL_REQUEST,
                                                  stats.READ_ENTRY_LONG_POLL_READ)
    assert len(stats.pairs) * 2 == len(SERVER_OPS)
    assert BOUNDS[0] == 1e-6 and BOUNDS[-1] > 100.0
