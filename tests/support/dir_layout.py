"""Several ledger and journal dirs laid out for tests, drills and benchmarks as one
machine's "disks" would be: ``<root>/d<i>/ledgers`` and ``<root>/d<i>/journal`` (the kill -9
drill's crash-target globs match them), and the ``--dirs L,J`` flag the scripts share."""

from __future__ import annotations

import argparse
import os


def dir_lists(root: str, ledgers: int, journals: int) -> tuple[str, str]:
    """(ledger_dirs, journal_dirs) settings: ``ledgers`` and ``journals`` dirs under root."""
    return (",".join(os.path.join(str(root), f"d{i}", "ledgers") for i in range(ledgers)),
            ",".join(os.path.join(str(root), f"d{i}", "journal") for i in range(journals)))


def parse_dirs(text: str) -> tuple[int, int]:
    """``--dirs L,J``: L ledger dirs and J journal dirs, at least one of each."""
    try:
        ledgers, journals = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dirs {text!r}: expected L,J such as 3,2") from None
    if ledgers < 1 or journals < 1:
        raise argparse.ArgumentTypeError("--dirs L,J needs at least one of each")
    return ledgers, journals
