"""bookie/recovery.py's start tables: every case is covered by exactly one row (TigerBeetle's
way with its recovery cases), and no row is dead."""

from __future__ import annotations

import itertools

import pytest

from bookie import recovery
from bookie.recovery import (END_TABLE, ENDINGS, LOG_STATES, LOG_TABLE, OFFSETS, PLACES,
                             START_TABLE, table_rows)

TABLES = {
    "start": (START_TABLE, (PLACES, OFFSETS)),
    "end": (END_TABLE, (ENDINGS, (False, True))),
    "log": (LOG_TABLE, (LOG_STATES,)),
}


@pytest.mark.parametrize("name", TABLES)
def test_every_case_matches_exactly_one_row(name):
    table, dimensions = TABLES[name]
    for case in itertools.product(*dimensions):
        rows = table_rows(table, case)
        assert len(rows) == 1, (name, case, rows)


@pytest.mark.parametrize("name", TABLES)
def test_every_row_is_reached_and_names_only_known_values(name):
    table, dimensions = TABLES[name]
    reached = {table_rows(table, case)[0] for case in itertools.product(*dimensions)}
    assert reached == set(table)
    for row in table:
        for cell, values in zip(row, dimensions):
            assert cell == recovery.ANY or cell in values, (name, row)


def test_the_lookup_the_replayer_uses():
    assert recovery.start_of("marked", "within") == recovery.FROM_MARK
    assert recovery.start_of("marked", "past the end") == recovery.FROM_ZERO_WARN
    assert recovery.start_of("marked, missing", "within") == recovery.REFUSE
    assert recovery.start_of("no lastMark", "past the end") == recovery.FROM_ZERO
