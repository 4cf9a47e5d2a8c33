"""A client with the wrong password (plan.intruder): it opens the main ledger with it (the
client must refuse: Unauthorized), then fences it and adds to it, a recovery add and a plain
one, on every bookie, with the master key of that password.

Invariant:
    IN1. A bookie that holds the ledger or its tombstone with a key refuses every one of
         these (W8 ``check_key``, W7 ``check_revive_key``): checked when the request is
         delivered, against what the bookie held then (AUTH). A bookie that never saw the
         ledger cannot know its key and creates it, as BookKeeper's does, so the intruder
         only aims at bookies that hold something of it. Reads carry no key in BookKeeper's
         protocol (nor here): a wrong password reads a CRC32C ledger; what it must never do
         is get an entry stored, and so served.
"""

from __future__ import annotations

import asyncio

from api.client.codec import LedgerCodec
from bookie.errors import BookieError, Unauthorized
from tests.support.simulation.clients import CLIENT_ERRORS, WRONG_PASSWORD


class Intruder:
    def __init__(self, run) -> None:
        self.run = run
        self.refused = 0  # Unauthorized answers, the client's own refusal included

    async def act(self, ledger_id: int) -> None:
        run = self.run
        run.trace("intruder: opens the ledger with a wrong password")
        try:
            await run.bk("intruder").open_ledger(ledger_id, WRONG_PASSWORD)
            run.checker.violation("AUTH", "the client opened the ledger with a wrong "
                                          "password")
        except Unauthorized:
            self.refused += 1
        except CLIENT_ERRORS as exc:
            run.trace(f"intruder: open failed: {type(exc).__name__}")
        codec = LedgerCodec.for_password(ledger_id, WRONG_PASSWORD)
        payload = b"intruder-" * 3
        first = codec.frame(0, -1, len(payload), payload)
        later = codec.frame(1000, 999, 1000 * len(payload), payload)
        operations = (
            ("fence", lambda b: b.fence(ledger_id, codec.master_key)),
            ("recovery-add e0", lambda b: b.add_entries(ledger_id, [first], codec.master_key,
                                                        True, "crc32c")),
            ("add e1000", lambda b: b.add_entries(ledger_id, [later], codec.master_key,
                                                  False, "crc32c")))
        for bookie_id in sorted(run.net.bookies):
            if ledger_id not in run.net.bookies[bookie_id].memory:
                continue  # IN1: it cannot know the key
            for what, operation in operations:
                try:
                    await asyncio.wait_for(run.net.call(
                        "intruder", bookie_id, f"intruder {what}",
                        self._guarded(ledger_id, what, operation)), 1.0)
                except Unauthorized:
                    self.refused += 1
                except (BookieError, OSError, asyncio.TimeoutError):
                    pass

    def _guarded(self, ledger_id: int, what: str, operation):
        async def guarded(bookie):
            ledger = bookie.memory.get(ledger_id)
            keyed = ledger is not None and bool(ledger.master_key.strip(b"\0"))
            state = "tombstone" if keyed and ledger.deleted else "copy"
            result = await operation(bookie)
            if keyed:  # IN1
                self.run.checker.violation("AUTH", f"{bookie.bookie_id} took a wrong "
                                                   f"password's {what} on its {state}")
            return result
        return guarded
