"""v3 status codes as the errors ``BookieClient`` raises over HTTP (bookie/errors.py), so the
replicated client handles one set of exceptions whichever transport reached the bookie.

There is no Retry-After in BookKeeper's protocol: ETOOMANYREQUESTS is a ``TooManyRequests``
with a short ``retry_after_s`` (the writer's back-pressure retry and ``_retrying`` in
api/client/retry.py treat it as retryable), EREADONLY a ``ReadOnly`` (a bookie failure to
the writer: an ensemble change, as BookKeeper's client makes one).
"""

from __future__ import annotations

from api.bkproto.v3 import STATUS
from bookie import errors

#: Seconds before an ETOOMANYREQUESTS request is sent again (HTTP's 503 names its own).
BUSY_RETRY_AFTER_S = 0.1

_CLASSES = {"ENOLEDGER": errors.NoLedger, "ENOENTRY": errors.NoEntry,
            "EBADREQ": errors.BadRequest, "EUA": errors.Unauthorized,
            "EFENCED": errors.Fenced, "EREADONLY": errors.ReadOnly,
            "ETOOMANYREQUESTS": errors.TooManyRequests, "EIO": errors.IOFailure,
            "EBADVERSION": errors.BadRequest, "EUNKNOWNLEDGERSTATE": errors.IOFailure}
NAMES = {number: name for name, number in STATUS.items()}
OK = STATUS["EOK"]


class NotOnBookKeeperProtocol(errors.BadRequest):
    """An operation of this project's HTTP API that BookKeeper's protocol has no request
    for (a ledger's info, the ledger list, delete, checkpoint, health)."""

    def __init__(self, operation: str, bookie: str) -> None:
        super().__init__(f"{operation} has no BookKeeper-protocol request (bookie {bookie}); "
                         f"use the bookie's HTTP API (BookieClient) for it")
        self.operation = operation


def status_error(status: int, what: str) -> errors.BookieError:
    """The error a non-EOK v3 status names; an unknown number is an I/O failure."""
    name = NAMES.get(status)
    error = _CLASSES.get(name, errors.IOFailure)(f"{what}: {name or f'status {status}'}")
    if isinstance(error, errors.TooManyRequests):
        error.retry_after_s = BUSY_RETRY_AFTER_S
    error.bk_status = status
    return error
