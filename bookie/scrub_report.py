"""What a scrub found: its problems and its report (``bookie shell scrub``, check-index)."""

from __future__ import annotations

import collections
import dataclasses

_POS_MASK = 0xFFFFFFFF
#: Digest type numbers (docs/formats.md §6.2) as report names; 0 is "not known yet" (§9.4).
TYPE_NAMES = {0: "unknown", 1: "crc32", 2: "mac", 3: "crc32c", 4: "dummy"}
#: A ledger with locations but no state in the ``ledgers`` index.
NO_STATE = -1
#: ``verify_digest=False``: every entry is checked for framing and ids only.
NOT_VERIFIED = -2
_KIND_NAMES = {**TYPE_NAMES, NO_STATE: "no-state"}


@dataclasses.dataclass(frozen=True, slots=True)
class ScrubProblem:
    """One bad index entry. ``offset`` is the size field's (pos - 4), as scanners report."""

    path: str
    offset: int
    ledger_id: int
    entry_id: int
    location: int
    reason: str

    def to_json(self) -> dict:
        return {"type": "problem", "file": self.path, "offset": self.offset,
                "ledgerId": self.ledger_id, "entryId": self.entry_id,
                "logId": self.location >> 32, "pos": self.location & _POS_MASK,
                "reason": self.reason}


@dataclasses.dataclass
class ScrubReport:
    entries: int = 0
    verified: int = 0
    #: Entries checked for framing and ids only, by digest type name (and "no-state").
    framing_only: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Index entries per ledger: check-index compares them with the ledgers index.
    ledger_entries: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    bytes_read: int = 0
    logs: int = 0
    problem_count: int = 0
    problems: list[ScrubProblem] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    stopped: bool = False

    @property
    def clean(self) -> bool:
        return self.problem_count == 0

    def to_json(self) -> dict:
        return {"type": "summary", "entries": self.entries, "verified": self.verified,
                "framingOnly": dict(self.framing_only), "bytesRead": self.bytes_read,
                "logs": self.logs, "problems": self.problem_count,
                "seconds": round(self.seconds, 3), "stopped": self.stopped}
