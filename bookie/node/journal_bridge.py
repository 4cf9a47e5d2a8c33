"""The bridge between the journal threads and the event loop: records in, completions out.

A group's completion reaches the loop through one ``call_soon_threadsafe`` (N1, N4, N5).
With several journal dirs each has its own journal and thread; every record of a ledger goes
to journal ``ledgerId mod count`` (BookKeeper's Bookie.getJournal), so a ledger's records
keep their order and one journal's mark covers all of them (CM1 in bookie/checkpoint.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bookie.errors import BookieError, IOFailure
from journal import format as jformat

if TYPE_CHECKING:
    from bookie.node.runtime import LedgerRuntime
    from ledgerindex.keys import LedgerState


class JournalBridge:
    """Mixin of ``Bookie``: queueing records and completing their futures (room for them:
    add_room.py)."""

    def _call_threadsafe(self, fn, *args) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def _complete_group_threadsafe(self, tokens: list, error: BaseException | None) -> None:
        self._call_threadsafe(self._complete_group, tokens, error)

    def _complete_group(self, tokens: list, error: BaseException | None) -> None:
        if self._room_waiters:  # bookie/node/add_room.py AR2: the group's bytes left
            self._room_freed()
        for future, ledger_id, lac in tokens:
            if error is None and lac is not None:
                self._raise_lac(ledger_id, lac)
            if future is not None and not future.done():  # None: a deferred-sync add
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

    @property
    def journal(self):
        """The first journal (the only one unless ``journal_dirs``), None before start."""
        return self.journals[0] if self.journals else None

    @property
    def journal_queued_bytes(self) -> int:
        """Bytes queued over every journal, not yet synced: one memory budget."""
        return sum(journal.queued_bytes for journal in self.journals)

    @property
    def journal_queued_records(self) -> int:
        return sum(journal.queued_count for journal in self.journals)

    def journal_of(self, ledger_id: int):
        """The journal every record of the ledger goes to."""
        return self.journals[ledger_id % len(self.journals)]

    def _submit(self, record: bytes | None, ledger_id: int, lac: int | None = None):
        future = self._loop.create_future()
        try:
            self.journal_of(ledger_id).submit(record, (future, ledger_id, lac))
        except BookieError:
            raise
        except Exception as exc:
            raise IOFailure(f"journal refused a record: {exc}") from exc
        return future

    def _journal_key_once(self, ledger_id: int, runtime: LedgerRuntime,
                          state: LedgerState) -> None:
        """docs/formats.md §3.8: a master-key record before the first record about a ledger, and
        again when a "no key" (zero) ledger takes a real key, or a ledger its digest type, so
        replay learns them too: the state holding them reaches RocksDB only at a checkpoint,
        and without the type replay cannot tell a torn first entry from a good one (J4)."""
        key, digest_type = state.master_key, state.digest_type
        if runtime.journaled_key != key or runtime.journaled_digest != digest_type:
            self.journal_of(ledger_id).submit(
                jformat.encode_master_key(ledger_id, key, digest_type), None)
            runtime.journaled_key, runtime.journaled_digest = key, digest_type
