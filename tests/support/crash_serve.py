"""``python -m tests.support.crash_serve CRASH_AT PATTERN -- serve-flags...``: a bookie daemon
on a CrashingDisk that SIGKILLs itself at the CRASH_AT-th matching sync or rename."""

from __future__ import annotations

import asyncio
import sys

from bookie.cli import build_parser, _load, setup_logging, serve
from tests.support.crashing_disk import CrashingDisk


def main() -> int:
    crash_at, pattern = int(sys.argv[1]), sys.argv[2]
    args = build_parser().parse_args(sys.argv[3:])
    config = _load(args)
    setup_logging(config)
    return asyncio.run(serve(config, disk=CrashingDisk(crash_at, pattern)))


if __name__ == "__main__":
    sys.exit(main())
