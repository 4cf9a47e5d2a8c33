"""``python -m tests.support.crash_serve CRASH_AT PATTERN [EVENTS] serve ...``: a bookie daemon
on a CrashingDisk that SIGKILLs itself at the CRASH_AT-th matching event. EVENTS, a comma list
(default: syncs and renames, ``crashing_disk.EVENTS``), may add ``unlink``."""

from __future__ import annotations

import asyncio
import sys

from bookie.cli import build_parser, _load, setup_logging, serve
from tests.support.crashing_disk import EVENTS, CrashingDisk


def main() -> int:
    crash_at, pattern, rest = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    events = EVENTS
    if rest and rest[0] != "serve":
        events, rest = tuple(rest[0].split(",")), rest[1:]
    args = build_parser().parse_args(rest)
    config = _load(args)
    setup_logging(config)
    return asyncio.run(serve(config, disk=CrashingDisk(crash_at, pattern, events)))


if __name__ == "__main__":
    sys.exit(main())
