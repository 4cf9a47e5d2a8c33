"""The ledger write operations: admission, adds, fence, explicit LAC, force, delete.

Admission checks everything first and changes nothing; then state, cache and journal are
updated in one step on the loop (N3, W1), and the answer waits for the durable record (N1,
N2), except deferred-sync adds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from bookie import entry as entry_mod
from bookie import write_rules
from bookie.entry import DigestType
from bookie.errors import BadDigest, BadRequest, IOFailure, NoLedger
from journal import format as jformat
from ledgerindex import keys

log = logging.getLogger("bookie.node")

SANITY_LEDGER_ID = 0x7FFF_FFFF_FFFF_FF00
SANITY_KEY = entry_mod.master_key(b"bookie-sanity")


#: ``try_add_now``'s "not without reading first": the caller awaits ``add_entry`` instead.
NOT_NOW = object()


class LedgerWrites:
    """Mixin of ``Bookie``: every operation that journals a record about a ledger."""

    def try_add_now(self, ledger_id: int, entry_id: int, data: bytes, master_key: bytes,
                    digest_type: DigestType | None = None, deferred_sync: bool = False):
        """``add_entry`` without a coroutine, for a listener that answers from a callback:
        the future of the durable record (N1), None once a deferred-sync add is queued, or
        NOT_NOW when admission must read from disk first (N6: the ledger's runtime is not
        loaded yet, or the id is a re-add), which ``add_entry`` does. Raises what
        ``add_entry`` raises for a refused add; recovery adds always take ``add_entry``."""
        runtime = self._runtime.get(ledger_id)
        if runtime is None or entry_id <= runtime.last_entry_id:
            return NOT_NOW
        return self._add_nowait(ledger_id, entry_id, data, master_key, digest_type, False,
                                deferred_sync, {})

    def try_add_run_now(self, ledger_id: int, entries: list[tuple[int, bytes]],
                        master_key: bytes, digest_type: DigestType | None = None,
                        deferred_sync: bool = False):
        """``add_batch`` as ``try_add_now`` is ``add_entry``: adds of one ledger that
        arrived together, admitted as a whole and queued as one journal item, without a
        coroutine. NOT_NOW as there, and for ids named twice (``add_batch`` refuses them;
        the caller's single adds each get their own answer)."""
        runtime = self._runtime.get(ledger_id)
        ids = [entry_id for entry_id, _ in entries]
        if runtime is None or min(ids) <= runtime.last_entry_id or len(set(ids)) != len(ids):
            return NOT_NOW
        old, state = self._admit_ledger(ledger_id, master_key, digest_type, False)
        lac, _ = self._admit_run(ledger_id, entries, state, {})  # no re-adds: no held copy
        self._admit(sum(len(data) for _, data in entries))
        return self._queue_run(ledger_id, entries, old, state, deferred_sync, lac, None)

    async def add_entry(self, ledger_id: int, entry_id: int, data: bytes, master_key: bytes,
                        digest_type: DigestType | None = None, recovery: bool = False,
                        deferred_sync: bool = False, room_wait_s: float | None = None) -> None:
        """Store one framed entry; returns once durable (N1). Body ids must match the path.
        ``room_wait_s``: wait that long for room (add_room.py) rather than refuse at once."""
        if recovery:
            await self._revive_if_placed_here(ledger_id, master_key)
        stored = await self._prefetch(ledger_id, (entry_id,))
        if room_wait_s is not None:
            deadline = self._loop.time() + room_wait_s
            while self.room_for(len(data)) is not None:  # no await from here to admission
                await self.until_room(len(data), max(0.0, deadline - self._loop.time()))
        future = self._add_nowait(ledger_id, entry_id, data, master_key, digest_type,
                                  recovery, deferred_sync, stored)
        if future is not None:
            await future  # N5

    def _add_nowait(self, ledger_id, entry_id, data, master_key, digest_type, recovery,
                    deferred_sync, stored):
        """Admit and queue one add; the future completes when durable (None if deferred)."""
        old, state = self._admit_ledger(ledger_id, master_key, digest_type, recovery)
        data = self._admit_entry(ledger_id, entry_id, data, state, recovery, stored)
        self._admit(len(data))
        return self._queue_add(ledger_id, entry_id, data, old, state, deferred_sync)

    def _admit_ledger(self, ledger_id, master_key, digest_type, recovery):
        """The checks of an add that concern the ledger, changing nothing: (stored state,
        state after the add)."""
        self._check_writable(privileged=recovery)
        old = self.storage.ledgers.get(ledger_id)
        state = self._ledger_for_write(ledger_id, master_key, digest_type)
        write_rules.check_fence(ledger_id, state.fenced, recovery)  # W8
        return old, state

    def _admit_entry(self, ledger_id, entry_id, data, state, recovery, stored):
        """The checks of one entry of an admitted ledger, changing nothing; the bytes to
        store (the held copy for a re-add of the same entry, W6)."""
        dtype = DigestType(state.digest_type)
        entry_mod.check_entry_shape(data, dtype)
        check_storable(ledger_id, entry_id, entry_mod.piggybacked_lac(data))
        if self.config.verify_digest and dtype.verifiable:
            entry_mod.verify_entry(data, dtype)
        if entry_id <= self._runtime_of(ledger_id).last_entry_id:
            return self._held_copy(ledger_id, entry_id, data, stored, dtype)
        return data

    def _queue_add(self, ledger_id, entry_id, data, old, state, deferred_sync):
        """Cache and journal one admitted entry; the future of its record (None if
        deferred). Batches take ``_queue_run``."""
        runtime = self._runtime_of(ledger_id)
        self._store_state(ledger_id, old, state)
        self.storage.add_entry(ledger_id, entry_id, data)  # W1: cache before journal
        self.stats.write_bytes += len(data)  # as BookKeeper's WRITE_BYTES: once stored
        runtime.last_entry_id = max(runtime.last_entry_id, entry_id)
        lac = entry_mod.piggybacked_lac(data)
        self._journal_key_once(ledger_id, runtime, state)
        record = jformat.encode_add(data)
        if deferred_sync:
            # N4: acknowledged now, but its LAC counts only once its group is synced: a LAC
            # raised at enqueue could be read and then taken back by a crash (kill -9 drill).
            self.journal_of(ledger_id).submit(record, (None, ledger_id, lac))
            return None
        return self._submit(record, ledger_id, lac)

    def _held_copy(self, ledger_id: int, entry_id: int, data: bytes,
                   stored: dict[int, bytes | None], dtype: DigestType):
        """W6: a re-add stores the held copy again when it is the same entry (a client's
        retry, or BookKeeper's recovery framing it again with a newer LAC); another payload
        is refused. The cached copy is the newest; else the stored one ``_prefetch`` read
        (N6)."""
        existing = self.storage.get_cached(ledger_id, entry_id)
        if existing is None:
            existing = stored.get(entry_id)
        return write_rules.held_copy(ledger_id, entry_id, existing, data, dtype)

    async def add_batch(self, ledger_id: int, entries: list[tuple[int, bytes]],
                        master_key: bytes, digest_type: DigestType | None = None,
                        recovery: bool = False, deferred_sync: bool = False,
                        records: bytes | None = None) -> list[int]:
        """Several adds of one ledger, admitted as a whole and queued together, so one
        journal group covers them and a refused batch stores nothing.

        ``records``: the entries' journal data records, each i32 length then the entry (a
        batch body is exactly that, docs/http-api.md), submitted to the journal as one item as they
        are; built here when not given."""
        ids = [entry_id for entry_id, _ in entries]
        if len(set(ids)) != len(ids):
            raise BadRequest("a batch names the same entry id twice")
        if recovery:
            await self._revive_if_placed_here(ledger_id, master_key)
        stored = await self._prefetch(ledger_id, ids)
        old, state = self._admit_ledger(ledger_id, master_key, digest_type, recovery)
        lac, to_store = self._admit_run(ledger_id, entries, state, stored)
        if to_store is not entries:
            entries, records = to_store, None  # W6: held copies stored, not the body's
        self._admit(sum(len(data) for _, data in entries))
        future = self._queue_run(ledger_id, entries, old, state, deferred_sync, lac, records)
        if future is not None:
            await asyncio.shield(future)  # N5
        return ids

    def _admit_run(self, ledger_id, entries, state, stored) -> tuple[int, list]:
        """``_admit_entry`` for every entry of a batch in one tight loop, digests last in
        one more, changing nothing; returns the highest piggybacked LAC of what is to be
        stored, and that: ``entries`` itself, or a copy where re-adds take their held copy
        (W6)."""
        dtype = DigestType(state.digest_type)
        need = entry_mod.METADATA_LENGTH + dtype.digest_length
        check_storable(ledger_id)
        last_known = self._runtime_of(ledger_id).last_entry_id
        lac_of, entry_max, lac_min = entry_mod.piggybacked_lac, keys.ENTRY_ID_MAX, keys.LAC_MIN
        lac, to_store = -1, entries
        for index, (entry_id, data) in enumerate(entries):
            if len(data) < need:
                entry_mod.check_entry_shape(data, dtype)
            entry_lac = lac_of(data)
            if not (0 <= entry_id <= entry_max and lac_min <= entry_lac <= entry_max):
                check_storable(ledger_id, entry_id, entry_lac)
            if entry_id <= last_known:
                held = self._held_copy(ledger_id, entry_id, data, stored, dtype)
                if held is not data:
                    to_store = list(entries) if to_store is entries else to_store
                    to_store[index] = (entry_id, held)
                    entry_lac = lac_of(held)
            if entry_lac > lac:
                lac = entry_lac
        if self.config.verify_digest and dtype.verifiable:
            bad = entry_mod.first_bad_digest([data for _, data in entries], dtype)
            if bad >= 0:
                entry_mod.verify_entry(entries[bad][1], dtype)  # BadDigest naming it
        return lac, to_store

    def _queue_run(self, ledger_id, entries, old, state, deferred_sync, lac, records):
        """``_queue_add`` for an admitted batch: one write-cache insert, one journal item
        (W1: cache before journal), one future for all: the journal syncs its queue in
        order (Q2), and the LAC raised then is the highest the entries carry (N4, N5)."""
        runtime = self._runtime_of(ledger_id)
        self._store_state(ledger_id, old, state)
        self.storage.add_run(ledger_id, entries)  # W1
        self.stats.write_bytes += sum(len(data) for _, data in entries)
        runtime.last_entry_id = max(runtime.last_entry_id,
                                    max(entry_id for entry_id, _ in entries))
        self._journal_key_once(ledger_id, runtime, state)
        if records is None:
            records = jformat.encode_adds(entries)
        if deferred_sync:
            self.journal_of(ledger_id).submit(records, (None, ledger_id, lac))  # N4, as in _queue_add
            return None
        return self._submit(records, ledger_id, lac)

    async def fence(self, ledger_id: int, master_key: bytes) -> tuple[int, int]:
        """Fence a ledger (creating it, as BookKeeper does for recovery); durable before 200."""
        self._check_serving()
        self._check_writable(privileged=True)
        check_storable(ledger_id)
        old = self.storage.ledgers.get(ledger_id)
        state = self._ledger_for_write(ledger_id, master_key, None, default_digest=None)
        runtime = self._runtime_of(ledger_id)
        if state is old and old.fenced:
            # FN1: fenced already, and the key checked: only the first fence is journaled
            # (as BookKeeper logs only the first). A later one answers once that record is
            # durable; one fenced before this process started was replayed, so is durable.
            if runtime.fence_record is not None:
                await asyncio.shield(runtime.fence_record)
            return runtime.lac, runtime.last_entry_id
        self._admit(16)
        self._store_state(ledger_id, old, dataclasses.replace(state, fenced=True))  # N3
        self._journal_key_once(ledger_id, runtime, state)
        record = runtime.fence_record = self._submit(jformat.encode_fence(ledger_id), ledger_id)
        await asyncio.shield(record)
        return runtime.lac, runtime.last_entry_id

    async def write_lac(self, ledger_id: int, master_key: bytes, body: bytes) -> int:
        """Store an explicit LAC body (docs/formats.md §6.4); durable before 200 (N2)."""
        self._check_serving()
        self._check_writable(privileged=True)
        body_ledger, lac = entry_mod.parse_lac_body(body)
        if body_ledger != ledger_id:
            raise BadRequest(f"explicit-LAC body names ledger {body_ledger}, the path {ledger_id}")
        check_storable(ledger_id, lac=lac)
        state = self._existing_state(ledger_id)
        self._check_key(ledger_id, state, master_key)
        dtype = DigestType(state.digest_type) if state.digest_type else None
        if self.config.verify_digest and dtype is not None and dtype.verifiable \
                and not entry_mod.lac_digest_ok(body, dtype):
            raise BadDigest(f"explicit-LAC body digest does not match for ledger {ledger_id}")
        runtime = self._runtime_of(ledger_id)
        self._admit(len(body))
        if entry_mod.lac_body_advances(state.explicit_lac, body):
            self._store_state(ledger_id, state,
                              dataclasses.replace(state, explicit_lac=bytes(body)))
        self._journal_key_once(ledger_id, runtime, state)
        record = jformat.encode_explicit_lac(ledger_id, body)
        await asyncio.shield(self._submit(record, ledger_id, lac))
        return runtime.lac

    async def force(self, ledger_id: int, master_key: bytes | None) -> int:
        """Answer once every earlier add of the ledger, deferred-sync ones too, is durable.
        ``master_key`` None: BookKeeper's FORCE_LEDGER, which carries no key (a force
        changes nothing, so BookKeeper checks none); HTTP always names one."""
        self._check_serving()
        try:
            state = self._existing_state(ledger_id)
        except NoLedger:
            if master_key is not None:
                raise
            # FL1: BookKeeper's bookie forces its journal and answers EOK whether or not it
            # holds the ledger. Its client forces every bookie of the ensemble, and in a
            # striped ledger one may hold no entry yet (docs/bookkeeper-protocol.md §3).
            self._node_state.check_not_failed_io()
            await asyncio.shield(self._submit(None, ledger_id))
            return -1
        if master_key is not None:
            self._check_key(ledger_id, state, master_key)
        self._node_state.check_not_failed_io()
        runtime = self._runtime_of(ledger_id)
        await asyncio.shield(self._submit(None, ledger_id))
        return runtime.last_entry_id

    async def _revive_if_placed_here(self, ledger_id: int, master_key: bytes) -> None:
        """W5: a recovery add to a tombstoned ledger that the cluster's metadata still lists
        brings the ledger back, empty (storage R6, GC G8), instead of being refused. GC
        deleted this copy because the metadata placed it elsewhere (GM2 in
        api/cluster/gc_metadata.py); a worker or a recovery now places one here again, and a
        tombstone must not wedge that (BookKeeper's over-replicated GC leaves none). A
        ledger deleted from the metadata keeps its tombstone: ids are never reused.

        W7 (bookie/write_rules.py): the key is checked before anything changes, and the
        ledger comes back fenced with its key and digest type. The metadata is read again
        once the tombstone is lifted (bug G): a delete that landed between the first read
        and the revive puts the tombstone back and refuses the add, so a copy is only ever
        placed back while the metadata lists the ledger, and a later delete is an ordinary
        one that GC from metadata (GM1) takes."""
        state = self.storage.ledgers.get(ledger_id)
        if state is None or state.exists or self.may_revive is None:
            return
        write_rules.check_revive_key(ledger_id, state.master_key, master_key)
        if not await self.may_revive(ledger_id):
            return

        def revive() -> None:  # on the checkpoint thread: never during a flush or GC step
            if self.storage.ledgers.is_deleted(ledger_id):
                self.storage.revive_ledger(ledger_id, write_rules.revived_state)
                self.gc.forget_dead(ledger_id)
        try:
            await asyncio.shield(asyncio.wrap_future(self.checkpoints.submit(revive)))
        except (IOFailure, OSError) as exc:
            self.fail_io(exc)
            raise IOFailure(f"reviving ledger {ledger_id}: {exc}") from exc
        self._runtime.pop(ledger_id, None)
        if not await self.may_revive(ledger_id):
            await self.delete_ledger(ledger_id)
            log.warning("ledger %d: deleted from the metadata while its copy was being "
                        "placed here again; its tombstone is back", ledger_id)
            raise NoLedger(f"ledger {ledger_id} was deleted from the metadata while its "
                           f"copy was being placed here again")
        log.info("ledger %d: tombstone lifted, its copy is placed here again (fenced)",
                 ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger: a synced tombstone before returning (§1.3); its entries stop
        being readable at once; later adds get NoLedger; GC reclaims the space."""
        self._check_serving()
        state = self.storage.ledgers.get(ledger_id)
        if state is None:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")
        self._node_state.check_not_failed_io()
        if state.exists:
            await self._write_outside_checkpoint(self.storage.delete_ledger, ledger_id)
        runtime = self._runtime.pop(ledger_id, None)
        if runtime is not None:
            self._release_waiters(runtime)

    async def sanity(self) -> dict:
        """Write and read back an entry of a reserved ledger through the real path."""
        self._check_serving()
        runtime = self._runtime_of(SANITY_LEDGER_ID)
        entry_id = runtime.last_entry_id + 1
        payload = f"sanity {time.time():.6f}".encode()
        data = entry_mod.frame_entry(SANITY_LEDGER_ID, entry_id, entry_id - 1, entry_id,
                                     payload)
        started = time.monotonic()
        await self.add_entry(SANITY_LEDGER_ID, entry_id, data, SANITY_KEY, DigestType.CRC32C)
        written = time.monotonic()
        back = await self.read_entry(SANITY_LEDGER_ID, entry_id)
        if back != data:
            raise IOFailure(f"sanity entry {entry_id} read back different bytes")
        return {"ok": True, "ledgerId": SANITY_LEDGER_ID, "entryId": entry_id,
                "writeMs": round((written - started) * 1000, 3),
                "readMs": round((time.monotonic() - written) * 1000, 3)}


def check_storable(ledger_id: int, entry_id: int | None = None, lac: int | None = None) -> None:
    """Refuse (400 EBADREQ) before journaling any id the indexes cannot store (an
    acknowledged entry 2**63-1 failed every later checkpoint and every replay, so the bookie
    never started again: docs/drills.md "Track record"). The ranges come from ledgerindex/keys.py
    only."""
    if not 0 <= ledger_id <= keys.LEDGER_ID_MAX:
        raise BadRequest(f"ledger id {ledger_id} is not in 0..{keys.LEDGER_ID_MAX}")
    if entry_id is not None and not 0 <= entry_id <= keys.ENTRY_ID_MAX:
        raise BadRequest(f"entry id {entry_id} is not in 0..{keys.ENTRY_ID_MAX}: the index "
                         f"cannot store it")
    if lac is not None and not keys.LAC_MIN <= lac <= keys.ENTRY_ID_MAX:
        raise BadRequest(f"LAC {lac} of ledger {ledger_id} is not in "
                         f"{keys.LAC_MIN}..{keys.ENTRY_ID_MAX}")
