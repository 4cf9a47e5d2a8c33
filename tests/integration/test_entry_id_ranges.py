"""``GET /v1/ledgers/{L}/entry-ids`` (docs/http-api.md, for docs/cluster.md §4's replica
check): the ids a bookie stores for a ledger, as ranges, wherever they are (write cache or
entry log)."""

from __future__ import annotations

import pytest

from api.client.fragments import in_ranges, missing_entries, ranges_of, Fragment
from bookie.entry import DigestType, frame_entry, master_key
from bookie.errors import BadRequest, NoLedger

KEY = master_key(b"ranges")


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"x" * 20, DigestType.CRC32C)


async def test_ranges_cover_checkpointed_and_cached_entries(client):
    for entry_id in [*range(0, 10), *range(20, 25)]:
        await client.add_entry(5, entry_id, entry(5, entry_id), KEY, "crc32c")
    await client.checkpoint()  # 0..9 and 20..24 now in the entry log and the index
    for entry_id in (10, 11, 30):
        await client.add_entry(5, entry_id, entry(5, entry_id), KEY)  # in the write cache
    assert await client.entry_id_ranges(5) == [[0, 11], [20, 24], [30, 30]]
    with pytest.raises(NoLedger):
        await client.entry_id_ranges(6)
    with pytest.raises(BadRequest):
        await client._request("GET", "/v1/ledgers/-1/entry-ids")


def test_ranges_and_missing_entries_of_a_fragment():
    assert ranges_of([5, 1, 2, 3, 3, 9, 10]) == [[1, 3], [5, 5], [9, 10]]
    assert ranges_of([]) == []
    held = [[0, 3], [6, 8]]
    assert [e for e in range(10) if in_ranges(held, e)] == [0, 1, 2, 3, 6, 7, 8]
    # E=3, Qw=2: index 1 holds entries whose write set {e%3, (e+1)%3} has 1: e%3 in (0, 1)
    fragment = Fragment(segment=0, first=0, last=9, index=1, bookie_id="b")
    assert fragment.entries(3, 2) == [0, 1, 3, 4, 6, 7, 9]
    assert missing_entries(fragment, held, 3, 2) == [4, 9]
    with pytest.raises(ValueError):
        Fragment(0, 0, None, 0, "b").entries(3, 2)


def test_fragments_end_at_the_next_segment_or_the_closed_end():
    from api.client.fragments import fragments
    from api.client.metadata import LedgerMetadata, MetadataState

    open_ = LedgerMetadata(ledger_id=1, ensemble_size=3, write_quorum=2, ack_quorum=2,
                           ensembles=((0, ("a", "b", "c")), (7, ("a", "d", "c"))))
    found = {(f.segment, f.index): (f.first, f.last, f.bookie_id) for f in fragments(open_)}
    assert found[(0, 1)] == (0, 6, "b") and found[(1, 1)] == (7, None, "d")
    closed = LedgerMetadata(ledger_id=1, ensemble_size=3, write_quorum=2, ack_quorum=2,
                            state=MetadataState.CLOSED, last_entry_id=5,
                            ensembles=((0, ("a", "b", "c")), (6, ("a", "d", "c"))))
    found = {(f.segment, f.index): (f.first, f.last) for f in fragments(closed)}
    assert found[(0, 0)] == (0, 5) and found[(1, 2)] == (6, 5)  # an empty last segment
