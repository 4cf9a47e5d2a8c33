"""docs/design.md §1.9: an entry log's header points at its ledgersMap only after the trailer is
fsynced, and a log whose header points nowhere is scanned, never taken as empty.

Crash model: kill -9 and power loss, made by writing the bytes a crash would leave (every
prefix of the trailer, of the header patch and of the last record; zeros for unsynced
ranges after power loss, A1) and reading them back with the reader the bookie uses at
startup, GC and scrub.
"""

from __future__ import annotations

from bookie.disk import OsDisk
from entrylog import format as fmt
from entrylog.reader import EntryLogReader
from tests.unit.entrylog.entrylog_support import expected_totals, make_entry, write_log

RECORDS = [(ledger_id, make_entry(ledger_id, entry_id, b"crash-%d" % entry_id))
           for entry_id, ledger_id in enumerate([3, 1, 2, 3, 1, 3])]


def finalized_bytes(tmp_path, records=RECORDS) -> tuple[bytes, list[int]]:
    path, locations, _ = write_log(tmp_path, 9, records)
    with open(path, "rb") as handle:
        return handle.read(), locations


def read_back(tmp_path, data: bytes, scan: bool = True):
    """(totals, source) as startup and GC see them, and the entries a scan finds."""
    path = tmp_path / "9.log"
    path.write_bytes(data)
    reader = EntryLogReader(OsDisk(), str(path))
    totals, source = reader.ledger_totals()
    found = list(EntryLogReader(OsDisk(), str(path)).scan()) if scan else None
    return totals, source, found


def unpatched(data: bytes) -> bytes:
    """The file as a crash between the trailer's fsync and the header rewrite leaves it."""
    return data[:8] + bytes(12) + data[20:]


def test_crash_before_the_header_rewrite_scans_every_entry(tmp_path):
    data, locations = finalized_bytes(tmp_path)
    totals, source, found = read_back(tmp_path, unpatched(data))
    assert source == "scan" and totals == expected_totals(RECORDS)
    assert [f.location for f in found] == locations


def test_torn_trailer_at_every_byte_never_reads_as_empty(tmp_path):
    data, locations = finalized_bytes(tmp_path)
    map_offset = fmt.decode_header(data).map_offset
    for cut in range(map_offset, len(data) + 1):
        torn = unpatched(data)[:cut]
        totals, source, found = read_back(tmp_path, torn)
        assert source == "scan", cut
        assert totals == expected_totals(RECORDS), cut
        assert [f.location for f in found] == locations, cut


def test_header_pointing_at_a_torn_trailer_falls_back_to_the_scan(tmp_path):
    # E1 forbids this state for our writer; a disk that reorders writes (A1) could make it.
    data, locations = finalized_bytes(tmp_path)
    map_offset = fmt.decode_header(data).map_offset
    for cut in range(map_offset, len(data)):
        totals, source, found = read_back(tmp_path, data[:cut])
        assert (source, totals) == ("scan", expected_totals(RECORDS)), cut
        assert [f.location for f in found] == locations, cut


def test_trailer_lost_to_zeros_falls_back_to_the_scan(tmp_path):
    # Power loss after the header patch reached the disk but not the trailer (A1).
    data, locations = finalized_bytes(tmp_path)
    map_offset = fmt.decode_header(data).map_offset
    zeroed = data[:map_offset] + bytes(len(data) - map_offset)
    totals, source, found = read_back(tmp_path, zeroed)
    assert (source, totals) == ("scan", expected_totals(RECORDS))
    assert [f.location for f in found] == locations


def test_torn_header_patch_at_every_byte_gives_the_true_totals(tmp_path):
    data, _ = finalized_bytes(tmp_path)
    for written in range(13):
        for stale in (0x00, 0xA5):  # the rest of the patch: old zeros or garbage (A1)
            patch = data[8:8 + written] + bytes([stale]) * (12 - written)
            totals, source, _ = read_back(tmp_path, data[:8] + patch + data[20:])
            assert totals == expected_totals(RECORDS), (written, stale)
            assert source == ("ledgersMap" if written == 12 else source)


def test_two_batch_trailer_torn_anywhere_falls_back_to_the_scan(tmp_path):
    records = [(ledger_id, make_entry(ledger_id, 0)) for ledger_id in range(10_001)]
    data, _ = finalized_bytes(tmp_path, records)
    map_offset = fmt.decode_header(data).map_offset
    second = map_offset + 24 + 16 * 10_000
    # Every byte of the batch heads and of the last pair, and a stride through the pairs.
    cuts = set(range(map_offset, map_offset + 40)) | set(range(second - 16, second + 40))
    cuts |= set(range(map_offset, len(data), 9973))
    expected = expected_totals(records)
    for header in (data[:20], unpatched(data)[:20]):
        for cut in sorted(cuts):
            totals, source, _ = read_back(tmp_path, header + data[20:cut], scan=False)
            assert source == "scan" and totals == expected, cut
    totals, source, _ = read_back(tmp_path, data, scan=False)
    assert source == "ledgersMap" and totals == expected


def last_record_cuts(tmp_path):
    path, locations, _ = write_log(tmp_path, 9, RECORDS, finalize=False)
    with open(path, "rb") as handle:
        data = handle.read()
    last_offset = (locations[-1] & 0xFFFFFFFF) - 4
    assert len(data) == last_offset + 4 + len(RECORDS[-1][1])
    return data, locations, last_offset


def scan_file(tmp_path, data: bytes) -> tuple[EntryLogReader, list]:
    (tmp_path / "9.log").write_bytes(data)
    reader = EntryLogReader(OsDisk(), str(tmp_path / "9.log"))
    return reader, list(reader.scan())


def test_crash_mid_append_ends_at_the_torn_record(tmp_path):
    # kill -9 (A2): the file ends with any prefix of the last record.
    data, locations, last_offset = last_record_cuts(tmp_path)
    for cut in range(last_offset, len(data)):
        reader, found = scan_file(tmp_path, data[:cut])
        assert [f.location for f in found] == locations[:-1], cut
        assert reader.end.offset == last_offset, cut
        assert reader.end.cut_bytes == cut - last_offset, cut
        assert reader.end.clean is (cut == last_offset) and not reader.corrupt, cut
        reader = EntryLogReader(OsDisk(), str(tmp_path / "9.log"))
        assert reader.ledger_totals() == (expected_totals(RECORDS[:-1]), "scan"), cut


def test_power_loss_mid_append_keeps_every_earlier_entry(tmp_path):
    # Power loss (A1): the unsynced rest of the last record reads back as zeros. A zero
    # size is where the writer stopped (E2). Once the size field itself survived, the
    # format cannot tell the zeros from an entry: the scan yields one entry whose bytes
    # are partly zeros, and only its digest (scrub) exposes it. No index location
    # points at it: it was never synced (R1).
    data, locations, last_offset = last_record_cuts(tmp_path)
    for cut in range(last_offset, len(data)):
        torn = data[:cut] + bytes(len(data) - cut)
        reader, found = scan_file(tmp_path, torn)
        assert [f.location for f in found[:len(locations) - 1]] == locations[:-1], cut
        if cut - last_offset < 4:
            assert len(found) == len(locations) - 1, cut
            assert reader.end.offset == last_offset and reader.end.reason == "padding tail"
        else:
            assert found[-1].location == locations[-1] and found[-1].entry != RECORDS[-1][1]
        assert not reader.corrupt, cut
