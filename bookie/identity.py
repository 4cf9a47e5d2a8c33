"""Data-dir identity: written on first start, checked on every start (BookKeeper's Cookie).

``IDENTITY`` (JSON) lives in ``current/`` of every journal dir, every ledger dir and every
index dir apart from its ledger dir (index_dirs):

    {"format": 1, "instanceId": "<uuid4>", "journalDir": "...", "ledgerDir": "...",
     "journalDirs": [...], "ledgerDirs": [...], "indexDirs": [...], "createdAt": "<ISO 8601>"}

(``indexDirs`` only with index dirs apart.)

A start is refused, naming both values, when two dirs carry different instance ids (dirs
swapped between bookies), when one dir has an identity and another has none but holds data
or was emptied (a lost or wiped disk would otherwise be served as if complete), when the
number of journal, ledger or index dirs changed (ID1), or when the format version is unknown.
A data dir with files but no identity at all (written before identities existed, or by
Apache BookKeeper) is adopted with a warning.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import uuid
from typing import TYPE_CHECKING, Sequence

from bookie.disk import atomic_replace, makedirs_durably
from bookie.errors import BookieError

if TYPE_CHECKING:
    from bookie.disk import Disk

log = logging.getLogger("bookie.identity")

IDENTITY = "IDENTITY"
FORMAT_VERSION = 1


class IdentityMismatch(BookieError):
    """The data dirs are not the ones this bookie wrote; the message names both values."""


def _read(disk: "Disk", directory: str) -> dict | None:
    path = os.path.join(directory, IDENTITY)
    if not disk.exists(path):
        return None
    handle = disk.open(path)
    try:
        raw = handle.read_at(0, 1 << 16)
    finally:
        handle.close()
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or "instanceId" not in data or "format" not in data:
            raise ValueError("missing instanceId or format")
    except ValueError as exc:
        raise IdentityMismatch(f"{path} is not a bookie identity file: {exc}") from None
    return data


def _has_data(disk: "Disk", directory: str) -> bool:
    return disk.exists(directory) and any(
        not name.startswith(IDENTITY) for name in disk.listdir(directory))


def _as_list(dirs: str | Sequence[str]) -> list[str]:
    return [dirs] if isinstance(dirs, str) else list(dirs)


def instance_id(disk: "Disk", journal_dirs: str | Sequence[str],
                ledger_dirs: str | Sequence[str], index_dirs: Sequence[str] = ()) -> str | None:
    """The data dirs' instance id if any has an identity, without creating anything (a
    cluster bookie compares it with its cookie in ZooKeeper before it starts)."""
    for directory in _as_list(journal_dirs) + _as_list(ledger_dirs) + list(index_dirs):
        ident = _read(disk, directory)
        if ident is not None:
            return ident["instanceId"]
    return None


def _counts(ident: dict) -> tuple[int, int, int]:
    """How many journal, ledger and index dirs (apart) the identity was written for (format
    1 without the lists: one journal and one ledger dir, no index dir apart)."""
    return (len(ident.get("journalDirs") or [0]), len(ident.get("ledgerDirs") or [0]),
            len(ident.get("indexDirs") or []))


def check_or_create(disk: "Disk", journal_dirs: str | Sequence[str],
                    ledger_dirs: str | Sequence[str], index_dirs: Sequence[str] = ()) -> dict:
    """Check every dir's identity; create it on a fresh (or adopted) data dir. Returns it.
    ``index_dirs``: the index dirs apart from their ledger dirs (config.separate_index_dirs);
    each is checked as a ledger dir is, so an emptied index volume refuses the start.

    ID1. Every dir carries the same instance id, and the identity's count of journal dirs
         and of ledger dirs is the configured one: a ledger's journal is ledgerId mod the
         journal count and its lastMark name depends on it, and a dir missing from the list
         would take its ledgers with it. Changing either count is refused, as BookKeeper's
         cookie refuses a changed directory list. So is a changed order: each dir's copy
         names its own kind and place (``dirKind``, ``dirIndex``), since journal i's
         ``lastMark.<i>`` is read for whatever dir stands at place i (swapped journal dirs
         replayed each from the other's mark: acknowledged adds lost). Index dirs too: a
         ledger dir served with an empty index would answer "no such entry"."""
    journals, ledgers, indexes = _as_list(journal_dirs), _as_list(ledger_dirs), list(index_dirs)
    every = journals + ledgers + indexes
    places = _places(journals, ledgers, indexes)
    for directory in every:
        makedirs_durably(disk, directory)
    found = {d: _read(disk, d) for d in every}
    for directory, ident in found.items():
        if ident is not None and ident["format"] != FORMAT_VERSION:
            raise IdentityMismatch(f"{directory}/{IDENTITY}: format version {ident['format']}, "
                                   f"this bookie knows {FORMAT_VERSION}")
    owners = {d: ident["instanceId"] for d, ident in found.items() if ident is not None}
    if len(set(owners.values())) > 1:
        b, b_id = next(iter(owners.items()))
        a, a_id = next((d, i) for d, i in owners.items() if i != b_id)
        raise IdentityMismatch(f"{places[a][0]} dir {a} belongs to bookie {a_id} but "
                               f"{places[b][0]} dir {b} to bookie {b_id}")
    if not owners:
        return _create(disk, journals, ledgers, indexes)
    ident = _shared(found[next(iter(owners))])
    _check_counts(ident, journals, ledgers, indexes)
    _check_places(found, places)
    missing = [d for d in every if d not in owners]
    if missing:
        if any(_has_data(disk, d) for d in every):
            held = missing[0]
            raise IdentityMismatch(
                f"{next(iter(owners))} belongs to bookie {ident['instanceId']} but "
                f"{places[held][0]} dir {held} has no identity "
                f"({'it holds other files' if _has_data(disk, held) else 'emptied'})")
        # ! A crash between the writes of _create: nothing was stored yet, so finishing the
        #   creation is safe.
        return _write(disk, ident, places)
    return ident


def _places(journals: list[str], ledgers: list[str],
            indexes: list[str]) -> dict[str, tuple[str, int]]:
    """Each dir's kind and place in its list, as its IDENTITY copy records them (an index
    dir's place: its place among the index dirs apart)."""
    return {**{d: ("journal", i) for i, d in enumerate(journals)},
            **{d: ("ledger", i) for i, d in enumerate(ledgers)},
            **{d: ("index", i) for i, d in enumerate(indexes)}}


def _shared(ident: dict) -> dict:
    """The identity every dir shares, without the one dir's place."""
    return {k: v for k, v in ident.items() if k not in ("dirKind", "dirIndex")}


def _check_places(found: dict, places: dict[str, tuple[str, int]]) -> None:
    """ID1: every dir stands where its copy says it stood (copies written before places
    were recorded say nothing, and one dir of each kind has only one place)."""
    for directory, (kind, index) in places.items():
        ident = found.get(directory)
        if ident is None or "dirKind" not in ident:
            continue
        if (ident["dirKind"], ident["dirIndex"]) != (kind, index):
            raise IdentityMismatch(
                f"{directory} was {ident['dirKind']} dir {ident['dirIndex']} of bookie "
                f"{ident['instanceId']} and is now configured as {kind} dir {index}: restore "
                f"the order of journal_dirs, ledger_dirs and index_dirs (a journal's "
                f"lastMark.<i> is read for the dir at place i)")


def _check_counts(ident: dict, journals: list[str], ledgers: list[str],
                  indexes: list[str]) -> None:
    """ID1."""
    had_journals, had_ledgers, had_indexes = _counts(ident)
    if (had_journals, had_ledgers) != (len(journals), len(ledgers)):
        raise IdentityMismatch(
            f"bookie {ident['instanceId']} was created with {had_journals} journal dir(s) "
            f"and {had_ledgers} ledger dir(s), now {len(journals)} and {len(ledgers)} are "
            f"configured ({IDENTITY}: journalDirs {ident.get('journalDirs') or ident.get('journalDir')}, "
            f"ledgerDirs {ident.get('ledgerDirs') or ident.get('ledgerDir')}): set journal_dirs "
            f"and ledger_dirs back; adding or removing dirs is not supported")
    if had_indexes != len(indexes):
        raise IdentityMismatch(
            f"bookie {ident['instanceId']} was created with {had_indexes} index dir(s) apart "
            f"from its ledger dirs ({IDENTITY}: indexDirs {ident.get('indexDirs') or []}), now "
            f"{len(indexes)} are configured: set index_dirs back (the ledger dirs' indexes "
            f"are where it was created with them)")


def _create(disk: "Disk", journals: list[str], ledgers: list[str],
            indexes: list[str]) -> dict:
    every = journals + ledgers + indexes
    if any(_has_data(disk, d) for d in every):
        log.warning("data dir has files but no identity: adopting it")
    ident = {"format": FORMAT_VERSION, "instanceId": str(uuid.uuid4()),
             "journalDir": os.path.abspath(journals[0]),
             "ledgerDir": os.path.abspath(ledgers[0]),
             "journalDirs": [os.path.abspath(d) for d in journals],
             "ledgerDirs": [os.path.abspath(d) for d in ledgers],
             "createdAt": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if indexes:
        ident["indexDirs"] = [os.path.abspath(d) for d in indexes]
    log.info("new data dir identity %s", ident["instanceId"])
    return _write(disk, ident, _places(journals, ledgers, indexes))


def _write(disk: "Disk", ident: dict, places: dict[str, tuple[str, int]]) -> dict:
    for directory in reversed(list(places)):  # index, then ledger dirs first, as before
        path = os.path.join(directory, IDENTITY)
        if not disk.exists(path):
            kind, index = places[directory]
            data = dict(ident, dirKind=kind, dirIndex=index)
            atomic_replace(disk, path, (json.dumps(data, indent=1) + "\n").encode())
    return ident
