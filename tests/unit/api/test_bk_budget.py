"""PB7's arithmetic (api/server/bk_budget.py, issue 53): what a group of plain reads
reserves before it begins, how many of it begin, and when a read of an entry larger than
its allowance may be read again. The connections are the few figures the budget reads of
one (the listener's own are tested over TCP in tests/integration/test_bk_port_hardening.py)."""

from __future__ import annotations

import types

from api.server.bk_budget import (
    ALLOWANCE_MAX, ALLOWANCE_MIN, ANSWER_HEAD, RESERVE_MIN, Limits, PortBudget)

MIB = 1 << 20


class Connection:
    """What the budget reads of a connection: its unread answers, charged, and reserved."""

    def __init__(self, budget: PortBudget, unread: int) -> None:
        self.charged_answers = self.read_reserved = self.requests_in_progress = 0
        self.writing_paused = False
        self.unread = unread
        self.listener = types.SimpleNamespace(connections=budget.connections)
        budget.connections.add(self)
        budget.charge_answers(self, unread)

    def unread_answers(self) -> int:
        return self.unread


def connection(budget: PortBudget, unread: int = 0) -> Connection:
    return Connection(budget, unread)


def test_a_group_reserves_a_quarter_of_its_room_between_its_reads_within_the_clamp():
    budget = PortBudget(Limits(connection_buffer=4 * MIB, answers_max=256 * MIB))
    one = connection(budget)
    assert budget.reserve_reads(one, 1) == (1, ALLOWANCE_MAX)  # 1 MiB is past the most
    assert one.read_reserved == budget.read_bytes == ALLOWANCE_MAX + ANSWER_HEAD
    ten = connection(budget)
    count, allowance = budget.reserve_reads(ten, 10)
    assert (count, allowance) == (10, 4 * MIB // 40 - ANSWER_HEAD)  # a quarter over ten
    many = connection(budget)
    assert budget.reserve_reads(many, 500) == (500, ALLOWANCE_MIN)  # small entries: all go
    assert many.read_reserved == 500 * RESERVE_MIN <= 4 * MIB
    assert budget.peak_answer_bytes == budget.read_bytes


def test_a_group_begins_only_as_many_reads_as_the_room_holds_and_one_when_none_is_held():
    budget = PortBudget(Limits(connection_buffer=64 << 10, answers_max=256 * MIB))
    busy = connection(budget, unread=40 << 10)  # 24 KiB of room left: five reserves
    assert budget.reserve_reads(busy, 100) == ((24 << 10) // RESERVE_MIN, ALLOWANCE_MIN)
    small = PortBudget(Limits(connection_buffer=1024))  # less than one reserve
    idle = connection(small)
    assert small.may_begin(idle)
    assert small.reserve_reads(idle, 50) == (1, ALLOWANCE_MIN)  # PB7: it never starves
    assert not small.may_begin(idle)  # then it holds one: no more


def test_the_ports_room_bounds_the_allowance_and_may_begin_asks_for_one_reserve():
    budget = PortBudget(Limits(connection_buffer=4 * MIB, answers_max=MIB))
    holder = connection(budget, unread=MIB - 8192)  # the port is nearly full
    other = connection(budget, unread=100)
    assert budget.may_begin(other)  # 8192 - 100 bytes of the port's room: one reserve fits
    assert budget.reserve_reads(other, 8) == (1, ALLOWANCE_MIN)
    assert not budget.may_begin(other)  # now the port's room is under one reserve
    fresh = connection(budget)
    assert budget.may_begin(fresh)  # holding nothing, it may begin one (the stated slack)
    assert budget.may_begin(holder) is False


def test_a_read_of_a_larger_entry_is_read_again_when_its_size_fits_or_nothing_is_held():
    budget = PortBudget(Limits(connection_buffer=4 * MIB, answers_max=64 * MIB))
    empty = connection(budget)
    assert budget.reread_fits(empty, 5 * MIB)  # nothing held: always, so it cannot starve
    holding = connection(budget, unread=3 * MIB)
    assert budget.reread_fits(holding, MIB)
    assert not budget.reread_fits(holding, MIB + 1)  # past connection_buffer
    budget.hold_reads(holding, 512 << 10)
    assert not budget.reread_fits(holding, MIB)  # reservations count as answers do
    budget.release_reads(holding, 512 << 10)
    assert holding.read_reserved == 0 and budget.read_bytes == 0
    full = PortBudget(Limits(connection_buffer=4 * MIB, answers_max=4 * MIB))
    first, second = connection(full, unread=3 * MIB), connection(full, unread=MIB // 2)
    assert not full.reread_fits(second, MIB)  # the port's bound: 4.5 MiB > 4 MiB
    assert full.reread_fits(second, MIB // 2)
    assert first.charged_answers == 3 * MIB
