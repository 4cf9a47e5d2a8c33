"""bookie/state.py: every transition allowed or refused, the reasons, the sticky io failure."""

from __future__ import annotations

import itertools

import pytest

from bookie.errors import IOFailure, ReadOnly
from bookie.state import TRANSITIONS, BookieState, NodeState


def at(state: BookieState) -> NodeState:
    node = NodeState()
    node.state = state
    return node


@pytest.mark.parametrize("old, new", list(itertools.product(BookieState, BookieState)),
                         ids=lambda s: s.value)
def test_exactly_the_listed_transitions_are_allowed(old, new):
    node = at(old)
    if new in TRANSITIONS[old]:
        node.move(new)
        assert node.state is new
    else:
        with pytest.raises(AssertionError, match=f"{old} -> {new}"):
            node.move(new)


def test_replay_done_is_writable_or_read_only_if_a_reason_is_set():
    plain, flagged = at(BookieState.REPLAYING), at(BookieState.REPLAYING)
    flagged.set_readonly("operator", True)  # the flag file found at start
    assert flagged.state is BookieState.REPLAYING  # reasons do not move a replaying bookie
    plain.serving_after_replay()
    flagged.serving_after_replay()
    assert plain.state is BookieState.WRITABLE and plain.ready
    assert flagged.state is BookieState.READ_ONLY and not flagged.ready


def test_operator_and_full_come_and_go_independently():
    node = at(BookieState.WRITABLE)
    node.set_readonly("full", True)
    node.set_readonly("operator", True)
    node.set_readonly("full", False)
    assert node.state is BookieState.READ_ONLY and node.readonly_reasons == {"operator"}
    node.set_readonly("operator", False)
    assert node.state is BookieState.WRITABLE and not node.readonly_reasons


def test_io_is_sticky_and_keeps_the_first_failure():
    node = at(BookieState.WRITABLE)
    assert node.fail_io(OSError("first")) is True
    assert node.fail_io(OSError("second")) is False
    assert node.failure == "I/O error: first"
    node.set_readonly("operator", True)
    node.set_readonly("operator", False)
    node.set_readonly("full", False)
    assert node.state is BookieState.READ_ONLY and node.readonly_reasons == {"io"}
    with pytest.raises(IOFailure, match="first"):
        node.check_writable(privileged=True, free_bytes=lambda: 1 << 40, reserved_bytes=0)
    with pytest.raises(IOFailure, match="first"):
        node.check_not_failed_io()


def test_io_while_stopping_or_replaying_does_not_move_the_state():
    for state in (BookieState.REPLAYING, BookieState.STOPPING):
        node = at(state)
        node.fail_io(OSError("x"))
        assert node.state is state and node.failed_io


@pytest.mark.parametrize("free, passes", [(None, True), (100, True), (99, False)])
def test_a_privileged_write_passes_read_only_above_the_recovery_reserve(free, passes):
    node = at(BookieState.WRITABLE)
    node.set_readonly("full", True)
    with pytest.raises(ReadOnly, match="not writable"):
        node.check_writable(privileged=False, free_bytes=lambda: free, reserved_bytes=100)
    if passes:
        node.check_writable(privileged=True, free_bytes=lambda: free, reserved_bytes=100)
    else:
        with pytest.raises(ReadOnly, match="reserved for ledger recovery"):
            node.check_writable(privileged=True, free_bytes=lambda: free, reserved_bytes=100)


def test_serving_refuses_while_replaying_and_after_a_failed_start():
    with pytest.raises(ReadOnly, match="replaying"):
        at(BookieState.REPLAYING).check_serving()
    failed = at(BookieState.STARTING)
    failed.fail_start(ValueError("bad dir"))
    assert failed.state is BookieState.FAILED
    with pytest.raises(IOFailure, match="bad dir"):
        failed.check_serving()
    at(BookieState.READ_ONLY).check_serving()


def test_the_state_module_is_pure():
    import ast
    import pathlib

    import bookie.state as module

    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import)
                              else [type("A", (), {"name": node.module or ""})])}
    assert imported <= {"__future__", "enum", "logging", "typing", "bookie"}, imported
