"""The bookie's errors (``bookie.errors``, docs/http-api.md codes) as BookKeeper's return
codes: v2's ``BookieProtocol`` numbers and v3's ``StatusCode`` numbers differ for the same
name (EFENCED is 104 in v2, 504 in v3), so each code maps to both.

Codes BookKeeper has no name for take the one its own bookie would answer with: a bad
digest or an entry over the size limit is a request it refuses (EBADREQ; BookKeeper's bookie
never checks digests), and "not serving yet or any more" is an I/O error to the client
(EIO), which then tries another bookie.
"""

from __future__ import annotations

from api.bkproto import v2
from api.bkproto.v3 import STATUS
from bookie.errors import BookieError

#: A docs/http-api.md code -> the BookKeeper name it is answered as.
BK_NAME = {"EBADREQ": "EBADREQ", "EBADDIGEST": "EBADREQ", "ETOOLARGE": "EBADREQ",
           "EUA": "EUA", "ENOLEDGER": "ENOLEDGER", "ENOENTRY": "ENOENTRY",
           "EFENCED": "EFENCED", "EREADONLY": "EREADONLY",
           "ETOOMANYREQUESTS": "ETOOMANYREQUESTS", "EUNAVAILABLE": "EIO", "EIO": "EIO"}
V2_CODES = {"EOK": v2.EOK, "ENOLEDGER": v2.ENOLEDGER, "ENOENTRY": v2.ENOENTRY,
            "EBADREQ": v2.EBADREQ, "EIO": v2.EIO, "EUA": v2.EUA,
            "EBADVERSION": v2.EBADVERSION, "EFENCED": v2.EFENCED, "EREADONLY": v2.EREADONLY,
            "ETOOMANYREQUESTS": v2.ETOOMANYREQUESTS,
            "EUNKNOWNLEDGERSTATE": v2.EUNKNOWNLEDGERSTATE}


def bk_name(error: BaseException | None) -> str:
    """BookKeeper's name for the outcome: EOK for None, EIO for anything unexpected."""
    if error is None:
        return "EOK"
    if isinstance(error, BookieError):
        return BK_NAME.get(error.code, "EIO")
    return "EIO"


def v2_code(error: BaseException | None) -> int:
    return V2_CODES[bk_name(error)]


def v3_status(error: BaseException | None) -> int:
    return STATUS[bk_name(error)]
