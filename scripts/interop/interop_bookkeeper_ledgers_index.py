"""BookKeeper's own DbLedgerStorage classes on a ``ledgers`` index our bookie wrote
(docs/formats.md §7.2): a real run, not in CI (CI has no BookKeeper).

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_ledgers_index.py

1. Our ``LedgerMetadataIndex`` writes: ledger 1 live with usage counters and a digest type,
   ledger 2 fenced with an explicit LAC, ledger 3 deleted (a tombstone), ledger 4 carried over
   from the older BKLD form, and a usage-pending key naming ledger 2.
2. ``bk class scripts/interop/java/LedgersIndexProbe.java`` (BookKeeper's LedgerMetadataIndex
   and LightProto ``LedgerData``) must load exactly ledgers 1, 2 and 4, with our fenced flags,
   master keys and explicit LAC, parse every key it reads, and not see ledger 3. Then it
   rewrites ledger 1 (``touch``, as a write handle does) and creates ledger 5.
3. ``bk shell check-db-ledgers-index`` must pass: it parses every value, negative keys too.
4. Our bookie opens the index again: ledger 1's counters are now not known (BookKeeper dropped
   the extension), ledger 2's are kept, ledger 3 is still deleted, ledger 5 exists.
Prints a line per check, "ok" or "FAILED: why"; exits 0 only if every check held.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from bookie.entry import master_key  # noqa: E402
from ledgerindex import keys  # noqa: E402
from ledgerindex.keys import LedgerState  # noqa: E402
from ledgerindex.kv import KeyValueStore  # noqa: E402
from ledgerindex.ledgers import LedgerMetadataIndex  # noqa: E402

PROBE = os.path.join(ROOT, "scripts", "interop", "java", "LedgersIndexProbe.java")
KEY = master_key(b"secret")
LAC = bytes(range(40))
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok: " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        failures.append(what)


def bkld_v2(state: LedgerState) -> bytes:
    """The older BKLD value (docs/formats.md §7.2 "Older values"), as the older bookie wrote it."""
    return (b"BKLD\x02\x01" + bytes([state.digest_type, len(state.master_key)])
            + state.master_key + bytes(4) + (state.entry_count.to_bytes(8, "big", signed=True)
                                             + state.byte_count.to_bytes(8, "big", signed=True)))


def write_ours(current: str) -> None:
    path = os.path.join(current, "ledgers")
    with KeyValueStore.open(path) as kv:  # ledger 4 as an index of the older bookie held it
        kv.put(keys.encode_ledger_key(4), bkld_v2(LedgerState(
            master_key=KEY, digest_type=3, entry_count=2, byte_count=20)), sync=True)
    index = LedgerMetadataIndex.open(path)
    try:
        check(index.upgraded_count == 1, "our open carried the BKLD ledger 4 over")
        index.set_master_key(1, KEY, 3)
        index.set_usage(1, 5, 205)
        index.set_master_key(2, KEY, 1)
        index.set_fenced(2)
        index.set_explicit_lac(2, LAC)
        index.set_master_key(3, KEY, 3)
        index.flush()
        index.mark_deleted(3)
        index.begin_usage([2])  # a pending key on disk, as a checkpoint leaves it mid-way
    finally:
        index.close()


def probe(launcher: str, current: str, *actions: str) -> str:
    run = subprocess.run([launcher, "class", PROBE, current, *actions], capture_output=True,
                         text=True, timeout=300)
    if run.returncode:
        raise SystemExit(f"LedgersIndexProbe exited {run.returncode}: {run.stderr[-2000:]}")
    return run.stdout


def check_bookkeeper_reads(out: str) -> None:
    before = out.split("AFTER")[0]
    loaded = re.search(r"^LOAD (\d+)$", before, re.M)
    ledgers = dict(re.findall(r"^L (\d+) (.*)$", before, re.M))
    check(loaded is not None and loaded.group(1) == "3" and sorted(ledgers) == ["1", "2", "4"],
          f"BookKeeper's LedgerMetadataIndex loaded ledgers {sorted(ledgers)} (1, 2, 4; not the "
          f"deleted 3)")
    check("ERROR" not in before and "SHORTKEY" not in before,
          "BookKeeper's LedgerData.parseFrom took every key it reads")
    two = ledgers.get("2", "")
    check("exists=true" in two and "fenced=true" in two and KEY.hex() in two and LAC.hex() in two,
          f"ledger 2 as BookKeeper reads it: {two}")
    check("fenced=false" in ledgers.get("1", "") and KEY.hex() in ledgers.get("1", ""),
          f"ledger 1 as BookKeeper reads it: {ledgers.get('1')}")


def check_db_ledgers_index(launcher: str, data: str) -> None:
    conf = os.path.join(data, "bk.conf")
    with open(conf, "w") as out:
        out.write(f"journalDirectories={data}/journal\nledgerDirectories={data}/ledgers\n"
                  "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
                  "metadataServiceUri=zk://127.0.0.1:1/ledgers\n")
    run = subprocess.run([launcher, "shell", "-conf", conf, "check-db-ledgers-index", "-v"],
                         capture_output=True, text=True, timeout=300)
    text = run.stdout + run.stderr
    check(run.returncode == 0 and "Exception" not in text,
          f"bk shell check-db-ledgers-index exited {run.returncode}: "
          f"{[line for line in text.splitlines() if 'ndex' in line][-1:]}")


def check_ours_after(current: str) -> None:
    index = LedgerMetadataIndex.open(os.path.join(current, "ledgers"))
    try:
        one, two, five = index.get(1), index.get(2), index.get(5)
        check(one is not None and not one.usage_known and one.master_key == KEY,
              "our bookie: ledger 1, rewritten by BookKeeper, has its counters not known")
        check(two is not None and two.fenced and two.explicit_lac == LAC and two.digest_type == 1,
              "our bookie: ledger 2 kept fence, explicit LAC and digest type")
        check(index.is_deleted(3), "our bookie: ledger 3 is still deleted")
        check(five is not None and five.exists and five.master_key == bytes.fromhex("0102"),
              "our bookie: ledger 5, created by BookKeeper, exists")
    finally:
        index.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    if not launcher:
        print("BOOKKEEPER_LAUNCHER is not set: it names BookKeeper's `bk` launcher",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bk-ledgers-index-") as data:
        current = os.path.join(data, "ledgers", "current")
        os.makedirs(current)
        os.makedirs(os.path.join(data, "journal", "current"))
        write_ours(current)
        out = probe(launcher, current, "touch:1", "create:5:0102")
        check_bookkeeper_reads(out)
        check_db_ledgers_index(launcher, data)
        check_ours_after(current)
    print("ok: every check held" if not failures else f"FAILED: {len(failures)} checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
