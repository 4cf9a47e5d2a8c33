"""What an operator sees of a re-replication copy under way (issue 54): the worker's log says
how far the copy is and how fast it goes, then that it is done; the bookie's /metrics show a
copy in progress and the copied entries and bytes growing while it goes; the auditor says once
(not every rescan) that the bookie is lost. A throttled copy of a real ledger (5,000 entries)
on four bookie daemons and a real ZooKeeper."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from api.client.distribution import write_set
from api.client.ensemble import BookKeeper
from api.cluster.autorecovery.copy_progress import PROGRESS_LOG_INTERVAL_S
from api.cluster.underreplication import Underreplication
from tests.cluster.test_autorecovery import (PASSWORD, bookie_id, cleanup,  # noqa: F401
                                             start_bookies, wait_until)

ENTRIES, PAYLOAD = 5000, 300
#: About 1 MB to copy (the lost bookie's 2 of 3 residues at 3/2/2): some 11 s at this rate,
#: so the copy outlives two progress intervals and two of the auditor's rescans (5 s).
RATE_BYTES = 100_000


def _metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^(bookie_autorecovery_\w+) (\S+)$", text, re.MULTILINE)}


async def test_a_copy_under_way_is_logged_and_counted(tmp_path, zk_uri, cleanup):  # noqa: F811
    bookies = start_bookies(tmp_path, zk_uri, 4, "--rereplication-rate-bytes", str(RATE_BYTES))
    cleanup.extend(bookies)
    by_id = {bookie_id(d): d for d in bookies}
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
        await writer.append_many(b"%05d" % i + b"p" * (PAYLOAD - 5) for i in range(ENTRIES))
        await writer.close()
        members = (await bk.store.read(writer.ledger_id)).ensembles[0][1]
        ur = Underreplication(bk.store.client, bk.store.root)
        auditor = await wait_until(lambda: asyncio.to_thread(ur.auditor), "an auditor")
        victim = next(b for b in members if b != auditor)  # the auditor stays the same one
        by_id[victim].kill9()

        holder = await wait_until(lambda: asyncio.to_thread(ur.lock_holder, writer.ledger_id),
                                  "a worker takes the marked ledger")
        worker = by_id[holder]

        async def copying():
            found = await asyncio.to_thread(_metrics, worker.url)
            busy = found["bookie_autorecovery_copies_in_progress"] == 1
            return found if busy and found["bookie_autorecovery_entries_copied_total"] else None
        first = await wait_until(copying, "the metrics show the copy under way")

        async def grown():
            found = await copying()
            return found if found and found["bookie_autorecovery_bytes_copied_total"] > \
                first["bookie_autorecovery_bytes_copied_total"] else None
        await wait_until(grown, "the copied bytes grow while the copy goes")
        await wait_until(lambda: asyncio.to_thread(
            lambda: ur.marker(writer.ledger_id) is None), "the ledger is whole again")

    done = await asyncio.to_thread(_metrics, worker.url)
    assert done["bookie_autorecovery_copies_in_progress"] == 0
    fragment = sum(1 for e in range(ENTRIES) if members.index(victim) in write_set(e, 3, 2))
    assert done["bookie_autorecovery_entries_copied_total"] == fragment
    log = worker.log_text()
    what = f"ledger {writer.ledger_id}: {victim}'s fragment of segment 0 to "
    progress = re.findall(re.escape(what) + r"\S+: copying, (\d+) of (\d+) entries, .+/s", log)
    assert progress and all(int(total) == fragment for _, total in progress), log[-3000:]
    assert re.search(re.escape(what) + rf"\S+: copied {fragment} entries, .+ in [\d.]+ s, "
                     r".+/s", log), log[-3000:]
    seconds = fragment * PAYLOAD / RATE_BYTES
    assert len(progress) <= seconds / PROGRESS_LOG_INTERVAL_S + 1  # not a line a batch
    said = sum(d.log_text().count(f"auditor: bookie {victim} is lost")
               for d in bookies if bookie_id(d) != victim)
    assert said == 1  # once, though it stayed lost over several rescans
