"""The bookie's error tree, and ScanEnd. A leaf: imports only the standard library.

Every operating error a client can see carries docs/http-api.md's ``code`` and HTTP ``status``; the one
translator, ``api/server/error_middleware.py``, renders them as ``{"error": code, "message": ...}``.
``tests/contract/test_api_md_errors.py`` checks this tree against docs/http-api.md's error table.

    BookieError                  code               status
    ├── BadRequest               EBADREQ            400
    │   └── BadDigest            EBADDIGEST         400
    ├── Unauthorized             EUA                403
    ├── NoLedger                 ENOLEDGER          404
    ├── NoEntry                  ENOENTRY           404
    ├── Fenced                   EFENCED            409
    ├── TooLarge                 ETOOLARGE          413
    ├── Unavailable              (abstract)         503 + Retry-After
    │   ├── ReadOnly             EREADONLY          503
    │   └── TooManyRequests      ETOOMANYREQUESTS   503
    └── IOFailure                EIO                500
        └── CorruptRecord        EIO                500

``ScanEnd`` is not an error: it is the value a scanner returns where the written region ends,
cleanly or torn (docs/design.md §6, "torn tail is not corruption").
"""

from __future__ import annotations

import dataclasses


class BookieError(Exception):
    """Base of every error with an docs/http-api.md code. ``message`` is for humans; ``code`` is stable."""

    code = "EIO"
    status = 500

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__


class BadRequest(BookieError):
    code, status = "EBADREQ", 400


class BadDigest(BadRequest):
    code, status = "EBADDIGEST", 400


class Unauthorized(BookieError):
    code, status = "EUA", 403


class NoLedger(BookieError):
    code, status = "ENOLEDGER", 404


class NoEntry(BookieError):
    code, status = "ENOENTRY", 404


class Fenced(BookieError):
    code, status = "EFENCED", 409


class TooLarge(BookieError):
    code, status = "ETOOLARGE", 413


class Unavailable(BookieError):
    """Abstract: the request may succeed later; the reply carries ``Retry-After``."""

    code, status = "EUNAVAILABLE", 503
    retry_after_s = 1


class ReadOnly(Unavailable):
    code, status = "EREADONLY", 503


class TooManyRequests(Unavailable):
    code, status = "ETOOMANYREQUESTS", 503


class IOFailure(BookieError):
    """A write, fsync or read failed, or stored bytes are not what the index says (§1.10)."""

    code, status = "EIO", 500


class CorruptRecord(IOFailure):
    """Damage followed by valid data: not a torn tail. Names file, offset and reason."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt record at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


#: Concrete classes with an docs/http-api.md code, for the contract test and the client's decoding.
API_ERRORS: tuple[type[BookieError], ...] = (
    BadRequest, BadDigest, Unauthorized, NoLedger, NoEntry, Fenced, TooLarge,
    ReadOnly, TooManyRequests, IOFailure,
)


def error_for_code(code: str) -> type[BookieError]:
    """The class a client raises for a server's error code (unknown codes: IOFailure)."""
    for cls in API_ERRORS:
        if cls.code == code:
            return cls
    return IOFailure


@dataclasses.dataclass(frozen=True)
class ScanEnd:
    """Where a scan of a journal or entry log stopped.

    offset: the first byte not consumed (the file's new in-memory end).
    cut_bytes: bytes after ``offset`` that looked like a started record and were dropped
        (0 for a clean end).
    reason: "clean" (end of file or zero length word), or what was torn.
    """

    offset: int
    cut_bytes: int
    reason: str

    @property
    def clean(self) -> bool:
        return self.cut_bytes == 0 and self.reason == "clean"
