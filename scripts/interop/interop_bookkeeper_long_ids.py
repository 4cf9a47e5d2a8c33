"""BookKeeper's own shell and client on ledgers past 2^31 (docs/bookkeeper-protocol.md §6): a real
run, not in CI (CI has no BookKeeper).

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_long_ids.py

On one ZooKeeper with 3 of our bookies:
  1. Our client creates a ledger (a 31-bit id), then the cluster is moved past 2^31 as a
     BookKeeper client would leave it (``<root>/idgen-long`` created, TestLongZkLedgerIdGenerator's
     way) and our client creates two more: ids from ``idgen-long/HOB-0000000001``, >= 2^32, at
     LongHierarchicalLedgerManager's znode paths; 10 entries each, closed.
  2. ``listledgers`` lists all three (BookKeeper's HierarchicalLedgerManager walks both
     layouts); ``ledgermetadata -ledgerid <long id>`` prints its metadata.
  3. ``readledger -m -l <long id> -fe 0 -le 9``: BookKeeper's client reads every entry.
  4. ``simpletest``: BookKeeper's client creates (and deletes) a ledger itself; its id comes
     from the same HOB-0000000001, and our client's next id is the one after it (our ids and
     BookKeeper's share the space); our store lists ours and not the deleted one.
Prints the shell's lines about those ledgers and a line per check, "ok" or "FAILED: why";
exit 0 only if every check held. Every process it starts is stopped by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.interop_bookkeeper_operator import run_checked, shell  # noqa: E402
from scripts.interop.interop_run import check, say  # noqa: E402

from api.client.ensemble import BookKeeper  # noqa: E402
from api.client.zookeeper import zk_call  # noqa: E402

ENTRIES = 10


async def write_ours(uri: str, cut_over: bool = False) -> list[int]:
    """One ledger of ENTRIES entries, closed; with ``cut_over`` one before the cutover and two
    after it (``idgen-long`` created between them)."""
    async with await BookKeeper.connect(uri) as bk:
        async def one() -> int:
            writer = await bk.create_ledger(3, 2, 2, password=b"")
            for i in range(ENTRIES):
                await writer.append(f"entry {i} of ledger {writer.ledger_id}".encode())
            await writer.close()
            return writer.ledger_id
        if not cut_over:
            return [await one()]
        short = await one()
        await asyncio.to_thread(zk_call, bk.store.client.ensure_path_async,
                                f"{bk.store.root}/idgen-long")
        return [short, await one(), await one()]


def lines_naming(out: str, ledger_id: int) -> list[str]:
    return [line.strip() for line in out.splitlines() if str(ledger_id) in line]


def body(run) -> None:
    uri = run.start_zookeeper("long-ids")
    ours = [run.start_ours(f"ours-{i}", uri) for i in range(3)]
    run.wait_registered(uri, [b["id"] for b in ours])
    conf = run.shell_conf(uri)

    short, *longs = asyncio.run(write_ours(uri, cut_over=True))
    check(short < 2**31 - 1 and longs[0] == 1 << 32 and longs[1] >> 32 == 1
          and longs[1] > longs[0],
          f"our client: ledger {short} before the cutover, {longs} after it "
          f"(HOB-0000000001: {longs[0]} = 1 << 32)")

    out = shell(run, conf, "listledgers")
    # The shell logs one {ledgerId=N} a ledger (ListLedgersCommand, BookKeeper 4.18).
    listed = {int(i) for i in re.findall(r"ledgerId=(\d+)", out)}
    for line in out.splitlines():
        if "ledgerId=" in line:
            say(f"  listledgers: {line.strip()}")
    check({short, *longs} <= listed, f"listledgers lists {short} and {longs}")

    out = shell(run, conf, "ledgermetadata", "-ledgerid", str(longs[0]))
    for line in out.splitlines():
        if str(longs[0]) in line or "ensemble" in line.lower() or "state" in line.lower():
            say(f"  ledgermetadata: {line.strip()}")
    check(str(longs[0]) in out and any(b["id"] in out for b in ours),
          f"ledgermetadata -ledgerid {longs[0]} prints its metadata (ensemble of our bookies)")

    out = shell(run, conf, "readledger", "-m", "-l", str(longs[0]), "-fe", "0",
                "-le", str(ENTRIES - 1))
    read = [i for i in range(ENTRIES)
            if f"entry {i} of ledger {longs[0]}" in out]
    for line in lines_naming(out, longs[0])[:3]:
        say(f"  readledger: {line}")
    check(read == list(range(ENTRIES)),
          f"readledger (BookKeeper's client) read entries {read} of ledger {longs[0]}")

    out = shell(run, conf, "simpletest", "-e", "3", "-w", "2", "-a", "2", "-n", str(ENTRIES))
    written = re.search(r"(\d+) entries written to ledger (\d+)", out)
    theirs = int(written.group(2)) if written else -1
    say(f"  simpletest: {written and written.group(0)}")
    after = asyncio.run(write_ours(uri))[0]
    listed = sorted(run.ledgers(uri))
    check(theirs >> 32 == 1 and theirs not in longs and after == theirs + 1
          and listed == [short, *longs, after],
          f"simpletest: BookKeeper's generator gave ledger {theirs} from HOB-0000000001 "
          f"beside ours (and deleted it, as simpletest does); our next one is {after}; "
          f"our store lists {listed}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed "
                                                    "when every check held)")
    return run_checked(parser, parser.parse_args(argv), "bk-long-ids-", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
