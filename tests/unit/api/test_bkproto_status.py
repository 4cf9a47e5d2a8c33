"""api/bkproto/status.py: every error the bookie can raise has BookKeeper's v2 and v3
numbers, from BookieProtocol's and BookkeeperProtocol.proto's tables."""

from __future__ import annotations

import pytest

from api.bkproto.status import bk_name, v2_code, v3_status
from bookie import errors


@pytest.mark.parametrize("error, v2, v3", [
    (None, 0, 0),
    (errors.NoLedger("x"), 1, 402),
    (errors.NoEntry("x"), 2, 403),
    (errors.BadRequest("x"), 100, 404),
    (errors.BadDigest("x"), 100, 404),
    (errors.TooLarge("x"), 100, 404),
    (errors.IOFailure("x"), 101, 501),
    (errors.Unauthorized("x"), 102, 502),
    (errors.Fenced("x"), 104, 504),
    (errors.ReadOnly("x"), 105, 505),
    (errors.TooManyRequests("x"), 106, 506),
    (errors.Unavailable("x"), 101, 501),
    (RuntimeError("a bug"), 101, 501),
])
def test_each_outcome_has_bookkeepers_numbers(error, v2, v3):
    assert (v2_code(error), v3_status(error)) == (v2, v3)


def test_every_api_error_class_is_mapped_not_defaulted():
    from api.bkproto.status import BK_NAME

    assert {cls.code for cls in errors.API_ERRORS} <= set(BK_NAME)
    assert bk_name(errors.CorruptRecord("f", 0, "r")) == "EIO"
