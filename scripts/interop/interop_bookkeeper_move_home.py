"""``bookie shell bk-ready --move`` against BookKeeper's own DbLedgerStorage (issue 58): a
bookie of ours with 3 ledger dirs, one of them full, put ledger 7 (fenced) and the tombstone
of ledger 10 in dir 2 instead of dir 1 (7 mod 3 = 10 mod 3 = 1). BookKeeper's DbLedgerStorage
(scripts/interop/java/LedgerReadProbe.java, its own classes on the dirs) does not find ledger
7 there; after ``--move`` it reads every entry of it, fenced, and ledger 4 as before.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_move_home.py
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.interop_run import Failed, check, say  # noqa: E402
from tests.support.off_home import (ENTRIES, MOVED, STAYED, entry, off_home_ledgers,  # noqa: E402
                                    three_dirs)

PROBE = os.path.join(ROOT, "scripts", "interop", "java", "LedgerReadProbe.java")


def probe(launcher: str, dirs: str) -> dict[int, str]:
    """BookKeeper's DbLedgerStorage reading ledgers STAYED and MOVED: its line for each."""
    done = subprocess.run([launcher, "class", PROBE, dirs, f"{STAYED}:{ENTRIES - 1}",
                           f"{MOVED}:{ENTRIES - 1}"], capture_output=True, text=True,
                          timeout=300)
    lines = {int(line.split()[1]): line for line in done.stdout.splitlines()
             if line.startswith("R ")}
    if len(lines) != 2:
        raise Failed(f"LedgerReadProbe gave no answer: {done.stderr[-800:]}")
    return lines


def main() -> int:
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    if not launcher:
        print("BOOKKEEPER_LAUNCHER: BookKeeper's `bk` wrapper", file=sys.stderr)
        return 2
    work = pathlib.Path(tempfile.mkdtemp(prefix="bk-move-home-"))
    try:
        config = three_dirs(work)
        asyncio.run(off_home_ledgers(config))
        dirs = ",".join(os.path.dirname(d) for d in config.ledger_dirs_current)
        size = sum(len(entry(MOVED, e)) for e in range(ENTRIES))
        before = probe(launcher, dirs)
        check(f"entries={ENTRIES}" in before[STAYED], f"BookKeeper reads ledger {STAYED} in "
              f"its own dir: {before[STAYED]}")
        check("missing" in before[MOVED] and "exists=false" in before[MOVED],
              f"BookKeeper does not find ledger {MOVED} in dir 2: {before[MOVED]}")
        moved = subprocess.run([sys.executable, "-m", "bookie", "shell", "bk-ready",
                                "--ledger-dirs", dirs, "--move"], cwd=ROOT, text=True,
                               capture_output=True, timeout=300)
        check(moved.returncode == 0, f"bk-ready --move exited 0: "
              f"{[line for line in moved.stdout.splitlines() if 'moved' in line]}")
        after = probe(launcher, dirs)
        check(f"entries={ENTRIES} bytes={size}" in after[MOVED] and "fenced=true" in
              after[MOVED], f"BookKeeper reads every entry of ledger {MOVED}, fenced, in its "
              f"dir 1: {after[MOVED]}")
        check(after[STAYED] == before[STAYED], f"ledger {STAYED} as before: {after[STAYED]}")
        say("ok: every check held")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    except Failed as error:
        say(f"FAILED: {error} (kept {work})")
        return 1


if __name__ == "__main__":
    sys.exit(main())
