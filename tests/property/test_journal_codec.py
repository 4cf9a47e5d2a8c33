"""Journal codec properties (hypothesis): round trips, and every prefix scans without raising.

Written with journal/format.py's builders, read back with journal/reader.py on real files.
The prefix models are the two crash models' file shapes (docs/design.md §2.2): a file cut at the
crash (kill -9 during an extending write) and a cut inside preallocated zeros.
"""

from __future__ import annotations

import os
import struct
import tempfile
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie.disk import OsDisk
from journal import reader as reader_module
from journal.format import (
    META_KINDS, RecordKind, encode_add, encode_explicit_lac, encode_fence, encode_header,
    encode_master_key, padding_record)
from journal.reader import JournalReader

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
ledger_ids = st.integers(0, 2**63 - 1)
entry_ids = st.integers(0, 2**63 - 1)
unknown_meta_ids = st.integers(-(2**63), -1).filter(lambda e: e not in META_KINDS)


def _data(ledger_id, entry_id, rest):
    entry = struct.pack(">qq", ledger_id, entry_id) + rest
    return encode_add(entry), RecordKind.DATA, ledger_id, entry_id, entry


records = st.one_of(
    st.builds(_data, ledger_ids, entry_ids, st.binary(min_size=8, max_size=300)),
    st.builds(lambda l, k: (encode_master_key(l, k), RecordKind.LEDGER_KEY, l, -0x1000, k),
              ledger_ids, st.binary(max_size=40)),
    st.builds(lambda l: (encode_fence(l), RecordKind.FENCE, l, -0x2000, b""), ledger_ids),
    st.builds(lambda l, b: (encode_explicit_lac(l, b), RecordKind.EXPLICIT_LAC, l, -0x8000, b),
              ledger_ids, st.binary(min_size=16, max_size=40)),
    st.builds(lambda l, e, b: (struct.pack(">iqq", 16 + len(b), l, e) + b,
                               RecordKind.UNKNOWN_META, l, e, b""),
              ledger_ids, unknown_meta_ids, st.binary(max_size=30)),
)
journals = st.lists(st.lists(records, min_size=1, max_size=5), min_size=1, max_size=5)


def lay_out(groups, version=6):
    """(file bytes without tail, expected records incl. padding, start of the last group)."""
    data = bytearray(encode_header(version))
    expected = []
    last_group = len(data)
    for group in groups:
        last_group = len(data)
        for record, kind, ledger_id, entry_id, payload in group:
            expected.append((len(data), len(record), kind, ledger_id, entry_id, payload))
            data += record
        padding = padding_record(len(data))
        if padding:
            expected.append((len(data), len(padding), RecordKind.PADDING, -1, -1, b""))
            data += padding
    return bytes(data), expected, last_group


def scan(path):
    with JournalReader(OsDisk(), path) as reader:
        found = [(r.offset, r.size, r.kind, r.ledger_id, r.entry_id, r.payload)
                 for r in reader.scan(include_padding=True)]
    return found, reader.end


def write(path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def append_byte(path, byte: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(byte)


def write_byte(path, offset: int, byte: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(byte)


@SETTINGS
@given(groups=journals, tail=st.sampled_from([0, 3, 512, 5000]),
       chunk=st.sampled_from([29, 512, 4 << 20]))
def test_written_records_scan_back_exactly(groups, tail, chunk):
    data, expected, _ = lay_out(groups)
    with tempfile.TemporaryDirectory() as directory, \
            mock.patch.object(reader_module, "CHUNK_BYTES", chunk):
        path = os.path.join(directory, "1.txn")
        write(path, data + bytes(tail))
        found, end = scan(path)
    assert found == expected
    assert end.offset == len(data) and end.clean
    assert all((offset + size) % 512 == 0 for offset, size, kind, *_ in expected
               if kind is RecordKind.PADDING)


@SETTINGS
@given(groups=journals)
def test_every_prefix_of_the_last_group_scans_to_the_records_before_the_cut(groups):
    """kill -9 model: the file ends at the cut; nothing is invented, nothing raises."""
    data, expected, last_group = lay_out(groups)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "1.txn")
        write(path, data[:last_group])
        for cut in range(last_group, len(data) + 1):
            if cut > last_group:
                append_byte(path, data[cut - 1:cut])
            found, end = scan(path)
            complete = [r for r in expected if r[0] + r[1] <= cut]
            assert found == complete, f"cut={cut}"
            stop = complete[-1][0] + complete[-1][1] if complete else last_group
            assert end.offset == stop, f"cut={cut}"
            torn = data[stop:cut].rstrip(b"\0")
            assert end.cut_bytes == len(torn), f"cut={cut}"
            assert end.clean == (not torn), f"cut={cut}"


@SETTINGS
@given(groups=journals)
def test_every_prefix_inside_preallocated_zeros_scans_without_raising(groups):
    """Power-loss shape: the bytes after the cut read as zeros. At most the torn record can
    come back (zero-filled, ending on a boundary), the last whole record may be dropped only
    by the torn-inside-zeros rule, and the scan never raises."""
    data, expected, last_group = lay_out(groups)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "1.txn")
        write(path, data[:last_group] + bytes(len(data) - last_group + 1024))
        for cut in range(last_group, len(data) + 1):
            if cut > last_group:  # one more byte of the group reached the disk
                write_byte(path, cut - 1, data[cut - 1:cut])
            found, end = scan(path)
            check_zero_tail_scan(expected, cut, found, end, last_group)


def check_zero_tail_scan(expected, cut, found, end, last_group):
    complete = [r for r in expected if r[0] + r[1] <= cut]
    where = f"cut={cut} found={found[len(complete) - 1:]} end={end}"
    kept = len(complete)
    if complete and found[:kept] != complete:
        dropped = complete[-1]
        _, size, kind, _, _, payload = dropped
        assert found[:kept - 1] == complete[:-1], where
        assert (dropped[0] + size) % 512 != 0, where
        assert kind not in (RecordKind.FENCE, RecordKind.PADDING), where
        assert kind is RecordKind.UNKNOWN_META or payload[-1:] in (b"", b"\0"), where
        assert len(found) == kept - 1 and end.offset == dropped[0], where
        return
    extra = found[kept:]
    assert len(extra) <= 1, where
    returned_end = found[-1][0] + found[-1][1] if found else last_group
    if extra:
        offset, size, kind = extra[0][:3]
        first_torn = next(r for r in expected if r[0] + r[1] > cut)
        assert offset == first_torn[0] and offset + size > cut, where
        assert (offset + size) % 512 == 0 or kind is RecordKind.FENCE, where
    if end.clean:
        assert end.offset == returned_end, where
    else:
        assert end.offset in (returned_end, *(r[0] for r in expected)), where
        assert end.offset <= cut, where
