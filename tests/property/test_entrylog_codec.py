"""Entry log codec round trips (hypothesis): what BufferedLogChannel writes, the reader reads.

Every entry is found by the scan at the location add_entry returned and read back by
read_entry there; the ledgersMap (or the scan, for an unfinalized log) equals the per-ledger
sums of size + 4; every prefix of a log scans to a prefix of its entries and a ScanEnd.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.disk import OsDisk
from bookie.entry import DigestType
from entrylog.reader import EntryLogReader
from tests.unit.entrylog.entrylog_support import expected_totals, make_entry, write_log

ENTRIES = st.lists(
    st.tuples(st.integers(0, 5) | st.integers(0, 2**63 - 1),
              st.binary(max_size=300),
              st.sampled_from([DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY])),
    min_size=0, max_size=40)


def build(specs):
    next_entry: dict[int, int] = {}
    records = []
    for ledger_id, payload, digest_type in specs:
        entry_id = next_entry.get(ledger_id, 0)
        next_entry[ledger_id] = entry_id + 1
        records.append((ledger_id, make_entry(ledger_id, entry_id, payload, digest_type)))
    return records


@settings(max_examples=150, deadline=None)
@given(specs=ENTRIES, finalize=st.booleans(), log_id=st.integers(0, 2**31 - 1),
       write_buffer=st.sampled_from([1, 64, 1 << 20]), chunk=st.sampled_from([20, 97, 8192]))
def test_written_entries_read_back_by_scan_and_by_location(specs, finalize, log_id,
                                                            write_buffer, chunk):
    records = build(specs)
    with tempfile.TemporaryDirectory() as ledger_dir:
        if not records:
            return  # an empty finalized log is deleted; covered by the writer tests
        path, locations, _ = write_log(ledger_dir, log_id, records, finalize=finalize,
                                       write_buffer_bytes=write_buffer)
        with EntryLogReader(OsDisk(), path, scan_chunk_bytes=chunk) as reader:
            found = list(reader.scan())
            assert reader.end.clean and reader.end.offset == os.path.getsize(path)
            assert [f.location for f in found] == locations
            assert [(f.ledger_id, f.entry) for f in found] == records
            assert all(f.location >> 32 == log_id for f in found)
            for (ledger_id, entry), location in zip(records, locations):
                entry_id = int.from_bytes(entry[8:16], "big", signed=True)
                assert reader.read_entry(location & 0xFFFFFFFF, ledger_id, entry_id) == entry
            totals, source = reader.ledger_totals()
            assert totals == expected_totals(records)
            assert source == ("ledgersMap" if finalize else "scan")


@settings(max_examples=60, deadline=None)
@given(specs=ENTRIES.filter(bool), finalize=st.booleans(), data=st.data())
def test_every_prefix_scans_to_a_prefix_of_the_entries(specs, finalize, data):
    records = build(specs)
    with tempfile.TemporaryDirectory() as ledger_dir:
        path, locations, _ = write_log(ledger_dir, 1, records, finalize=finalize)
        with open(path, "rb") as handle:
            whole = handle.read()
        cut = data.draw(st.integers(0, len(whole)), label="cut")
        with open(path, "wb") as handle:
            handle.write(whole[:cut])
        with EntryLogReader(OsDisk(), path, scan_chunk_bytes=64) as reader:
            found = list(reader.scan())
            assert [f.location for f in found] == locations[:len(found)]
            assert all(f.offset + 4 + f.size <= cut for f in found)
            assert reader.end.offset + reader.end.cut_bytes == cut
            # E5: a finalized log cut before its ledgersMap is damaged, not torn.
            map_offset = reader.header.map_offset if reader.header else 0
            assert reader.corrupt == bool(map_offset and reader.end.offset < map_offset)
            totals, _ = reader.ledger_totals()
            assert totals == expected_totals(records[:len(found)])
