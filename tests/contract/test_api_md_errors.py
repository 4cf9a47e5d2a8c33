"""API.md's error table equals the server's error classes (code and status)."""

from __future__ import annotations

import pathlib
import re

from bookie import errors

API_MD = pathlib.Path(__file__).resolve().parents[3] / "shared" / "API.md"


def _table() -> set[tuple[int, str]]:
    text = API_MD.read_text()
    section = text.split("## Errors", 1)[1].split("##", 1)[0]
    rows = re.findall(r"^\|\s*(\d{3})\s*\|\s*`(E[A-Z]+)`\s*\|", section, re.MULTILINE)
    assert rows, "no rows found in API.md's error table"
    return {(int(status), code) for status, code in rows}


def test_api_md_error_table_equals_the_error_classes():
    classes = {(cls.status, cls.code) for cls in errors.API_ERRORS}
    assert classes == _table()


def test_every_api_error_class_round_trips_through_its_code():
    for cls in errors.API_ERRORS:
        assert errors.error_for_code(cls.code) is cls
    assert errors.error_for_code("ENOSUCHCODE") is errors.IOFailure


def test_unavailable_errors_carry_retry_after():
    assert issubclass(errors.ReadOnly, errors.Unavailable)
    assert issubclass(errors.TooManyRequests, errors.Unavailable)
    assert errors.ReadOnly().retry_after_s > 0
