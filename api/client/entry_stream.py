"""EntryStream: the one shape of a range read, on one bookie (reader.py) and on a
replicated ledger (ensemble_reader.py): ``async for`` streams the entries in id order with
bounded memory, ``await`` collects them into a list (issue 55: the single-bookie reader
returned a list and the replicated one an iterator, so code written for one broke on the
other)."""

from __future__ import annotations


class EntryStream:
    """Entries of a range, in order: ``async for`` streams them (bounded memory), ``await``
    collects them into a list."""

    def __init__(self, start) -> None:
        self._start = start  # () -> an async iterator of entries

    def __aiter__(self):
        return self._start()

    def __await__(self):
        return self._collect().__await__()

    async def _collect(self) -> list:
        return [entry async for entry in self._start()]
