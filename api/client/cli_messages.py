"""The lines ``bookie ledger`` says where the library's own words would mislead a user: a read
past a ledger's end, an entry read with another digest than its writer's. Pure."""

from __future__ import annotations

from api.client.codec import DigestMismatch


def past_end_note(ledger_id: int, end: int, first: int, to: int | None) -> str | None:
    """The stderr note of a read whose range reaches past ``end`` (the ledger's last
    confirmed entry, -1: none), or None if the range lies within it. One behaviour for
    --from and --to past the end: print what there is, say so, exit 0 (cli_parser.py's
    READ_DESCRIPTION)."""
    if to is not None and to > end:
        asked = f"up to {to}"
    elif first > end:
        asked = f"from {first}"
    else:
        return None
    where = f"ends at entry {end}" if end >= 0 else "has no confirmed entry"
    return f"ledger {ledger_id} {where}; asked {asked}"


def digest_advice(exc: DigestMismatch, tried: str, from_metadata: bool) -> str | None:
    """One line for an entry that does not verify: which digest was tried and the likely way
    out; None for a mismatch no flag explains (the bookie returned another entry)."""
    if exc.reason.startswith("the bookie returned"):
        return None
    what = f"entry {exc.ledger_id}/{exc.entry_id}: digest does not match"
    if not from_metadata:
        flags = "--password (or --digest)" if tried == "mac" else "--digest"
        return f"{what} as --digest {tried}; {flags} probably differs from the writer's"
    if tried == "mac":
        return (f"{what} as mac, the digest the ledger's metadata names; --password probably "
                f"differs from the writer's")
    return (f"{what} as {tried}, the digest the ledger's metadata names: the stored entry is "
            f"damaged ({exc.reason})")
