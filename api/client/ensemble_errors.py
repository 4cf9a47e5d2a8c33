"""The replicated client's own errors (beside bookie.errors, whose codes bookies send)."""

from __future__ import annotations

from bookie.errors import BookieError, IOFailure


class RecoveryUndecided(IOFailure):
    """EN4: recovery could not decide where the ledger ends; nothing was changed but the
    state IN_RECOVERY and the fences. Retry later."""


class LedgerClosed(BookieError):
    """EN5: an append to a writer that is closing or closed (BKLedgerClosedException)."""

    code = "ELEDGERCLOSED"


class NotEnoughBookies(IOFailure):
    """Fewer writable bookies than the ensemble needs (BookKeeper's BKNotEnoughBookiesException)."""
