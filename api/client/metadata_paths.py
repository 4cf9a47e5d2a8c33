"""Where a ledger's metadata lives in ZooKeeper: BookKeeper's hierarchical paths (pure).

docs/cluster.md §1: an id below 2^31-1 as 10 digits split 2/4/4 (LegacyHierarchicalLedgerManager:
``/ledgers/00/0000/L0005``); a larger id as 19 digits split 3/4/4/4/4
(LongHierarchicalLedgerManager). Both live under the same root, told apart by the width of
the first level's name.
"""

from __future__ import annotations

LEGACY_MAX = 2**31 - 1
ID_MAX = 2**63 - 1
#: Znodes under the root that are not ledger levels (BookKeeper's reserved names).
RESERVED = frozenset({"available", "cookies", "idgen", "idgen-long", "LAYOUT", "INSTANCEID",
                      "underreplication", "layout"})


def ledger_path(root: str, ledger_id: int) -> str:
    if not 0 <= ledger_id <= ID_MAX:
        raise ValueError(f"ledger id {ledger_id} is not in 0..2**63-1")
    if ledger_id < LEGACY_MAX:
        digits = f"{ledger_id:010d}"
        parts = (digits[0:2], digits[2:6], "L" + digits[6:10])
    else:
        digits = f"{ledger_id:019d}"
        parts = (digits[0:3], digits[3:7], digits[7:11], digits[11:15], "L" + digits[15:19])
    return "/".join((root.rstrip("/"), *parts))


def ledger_id_of(parts: list[str]) -> int | None:
    """The id a path below the root names (its level names, leaf last), None if not a leaf."""
    if not parts or not parts[-1].startswith("L"):
        return None
    widths = [len(part) for part in parts[:-1]] + [len(parts[-1]) - 1]
    if widths not in ([2, 4, 4], [3, 4, 4, 4, 4]):
        return None
    digits = "".join(parts[:-1]) + parts[-1][1:]
    return int(digits) if digits.isdigit() else None


def is_level(name: str, depth: int) -> bool:
    """Whether ``name`` can be a non-leaf level at ``depth`` (0: right under the root)."""
    if depth == 0:
        return name not in RESERVED and len(name) in (2, 3) and name.isdigit()
    return len(name) == 4 and name.isdigit()
