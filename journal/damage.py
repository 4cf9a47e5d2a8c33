"""Telling damage from valid records in a journal (journal/reader.py's rules 4 and 5).

``record_problem`` says whether a record's fields are damage; ``DamageProbe`` looks past a
damaged record for plausible valid data, which makes the damage corruption, not a torn tail.
"""

from __future__ import annotations

import re
from typing import Protocol

from journal.format import (
    ALIGNMENT, KEY_TRAILER_LEN, LEN, META_KINDS, META_MIN_VERSION, META_PREFIX_LEN, META_RECORD_PREFIX,
    MIN_DATA_RECORD_LEN, MIN_EXPLICIT_LAC_BODY, MIN_RECORD_LEN, PADDING_MASK, PADDING_PREFIX,
    RECORD_PREFIX, V5, RecordKind)



class ScannedJournal(Protocol):
    """What a probe needs of the journal being scanned (journal/reader.py's JournalReader):
    named here so that this module does not import the reader that imports it."""

    version: int
    _max_length: int

    def _read(self, offset: int, size: int) -> bytes: ...


def record_problem(version: int, length: int, ledger_id: int, entry_id: int,
                   inner_length: int | None) -> str | None:
    """Why a record with these fields is damage (rule 4), or None if it is well formed.

    ``inner_length`` is the i32 after the ids (keyLen or bufLen), None if len < 20.
    """
    if ledger_id < 0:
        return f"negative ledgerId {ledger_id}"
    if entry_id >= 0:
        if length < MIN_DATA_RECORD_LEN:
            return f"data record of length {length} has no LAC field"
        return None
    kind = META_KINDS.get(entry_id)
    if kind is None:
        return None
    if version < META_MIN_VERSION[entry_id]:
        return f"{kind.value} record in a V{version} journal"
    if kind is RecordKind.FENCE:
        return None
    if inner_length is None or inner_length != length - META_PREFIX_LEN and not (
            kind is RecordKind.LEDGER_KEY
            and inner_length == length - META_PREFIX_LEN - KEY_TRAILER_LEN):
        return f"{kind.value} record of length {length} with inner length {inner_length}"
    if kind is RecordKind.EXPLICIT_LAC and inner_length < MIN_EXPLICIT_LAC_BODY:
        return f"explicit-LAC body of {inner_length} bytes"
    return None


V4_CANDIDATE = re.compile(
    rb"(?=\x00(?:[\x01-\xff][\x00-\xff]{2}|\x00[\x01-\xff][\x00-\xff]|\x00\x00[\x10-\xff]))")


class DamageProbe:
    """Plausibility checks at arbitrary offsets after damage, reading small pieces on demand."""

    def __init__(self, reader: ScannedJournal, file_size: int) -> None:
        self._reader = reader
        self._file_size = file_size
        self._window = b""
        self._window_start = 0

    def _get(self, offset: int, size: int) -> bytes:
        start = offset - self._window_start
        if start < 0 or start + size > len(self._window):
            self._window_start = offset
            self._window = self._reader._read(offset, max(size, 64 << 10))
            start = 0
        return self._window[start:start + size]

    def plausible_pair(self, offset: int) -> bool:
        """A plausible record at ``offset``, then another or the aligned end of the data."""
        end = self.plausible_record(offset)
        if end < 0:
            return False
        head = self._get(end, 4)
        if len(head) < 4 or head == b"\0\0\0\0":
            # In V5+ a flush ends aligned (J1); V4 has no such sign, so it needs two records.
            return self._reader.version >= V5 and end % ALIGNMENT == 0
        return self.plausible_record(end) >= 0

    def plausible_record(self, offset: int) -> int:
        """The end of a well-formed record at ``offset`` that fits in the file, else -1."""
        reader = self._reader
        head = self._get(offset, META_RECORD_PREFIX.size)
        if len(head) < PADDING_PREFIX.size:
            return -1
        length = LEN.unpack_from(head, 0)[0]
        if length == PADDING_MASK:
            pad_length = PADDING_PREFIX.unpack_from(head, 0)[1]
            end = offset + PADDING_PREFIX.size + pad_length
            fits = pad_length >= 0 and end <= self._file_size and end % ALIGNMENT == 0
            return end if reader.version >= V5 and fits else -1
        end = offset + 4 + length
        if not MIN_RECORD_LEN <= length <= reader._max_length or end > self._file_size:
            return -1
        if len(head) < RECORD_PREFIX.size:
            return -1
        _, ledger_id, entry_id = RECORD_PREFIX.unpack_from(head, 0)
        if entry_id < 0 and entry_id not in META_KINDS:
            return -1  # unknown meta records are legal but too weak a sign of valid data
        inner = None
        if length >= META_PREFIX_LEN and len(head) == META_RECORD_PREFIX.size:
            inner = META_RECORD_PREFIX.unpack_from(head, 0)[3]
        if record_problem(reader.version, length, ledger_id, entry_id, inner) is not None:
            return -1
        return end
