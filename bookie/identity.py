"""Data-dir identity: written on first start, checked on every start (BookKeeper's Cookie).

``IDENTITY`` (JSON) lives in ``current/`` of both the journal dir and the ledger dir:

    {"format": 1, "instanceId": "<uuid4>", "journalDir": "...", "ledgerDir": "...",
     "createdAt": "<ISO 8601>"}

A start is refused, naming both values, when the two dirs carry different instance ids
(dirs swapped between bookies), when one dir has an identity and the other has none but
holds data or was emptied (a lost or wiped disk would otherwise be served as if complete),
or when the format version is unknown. A data dir with files but no identity at all (written
before identities existed, or by Apache BookKeeper) is adopted with a warning.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import uuid
from typing import TYPE_CHECKING

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


def instance_id(disk: "Disk", journal_dir: str, ledger_dir: str) -> str | None:
    """The data dirs' instance id if either has an identity, without creating anything (a
    cluster bookie compares it with its cookie in ZooKeeper before it starts)."""
    for directory in (journal_dir, ledger_dir):
        ident = _read(disk, directory)
        if ident is not None:
            return ident["instanceId"]
    return None


def check_or_create(disk: "Disk", journal_dir: str, ledger_dir: str) -> dict:
    """Check both dirs' identity; create it on a fresh (or adopted) data dir. Returns it."""
    for directory in (journal_dir, ledger_dir):
        makedirs_durably(disk, directory)
    found = {d: _read(disk, d) for d in (journal_dir, ledger_dir)}
    for directory, ident in found.items():
        if ident is not None and ident["format"] != FORMAT_VERSION:
            raise IdentityMismatch(f"{directory}/{IDENTITY}: format version {ident['format']}, "
                                   f"this bookie knows {FORMAT_VERSION}")
    journal_id, ledger_id = (found[journal_dir] or {}).get("instanceId"), \
        (found[ledger_dir] or {}).get("instanceId")
    if journal_id and ledger_id and journal_id != ledger_id:
        raise IdentityMismatch(f"journal dir {journal_dir} belongs to bookie {journal_id} but "
                               f"ledger dir {ledger_dir} to bookie {ledger_id}")
    if bool(journal_id) != bool(ledger_id):
        present, missing = (journal_dir, ledger_dir) if journal_id else (ledger_dir, journal_dir)
        if not _has_data(disk, present) and not _has_data(disk, missing):
            # ! A crash between the two writes of _create: nothing was stored yet, so
            #   finishing the creation is safe.
            return _write(disk, found[present], journal_dir, ledger_dir)
        raise IdentityMismatch(
            f"{present} belongs to bookie {journal_id or ledger_id} but {missing} has no "
            f"identity ({'it holds other files' if _has_data(disk, missing) else 'emptied'})")
    if journal_id:
        return found[journal_dir]
    return _create(disk, journal_dir, ledger_dir)


def _create(disk: "Disk", journal_dir: str, ledger_dir: str) -> dict:
    if _has_data(disk, journal_dir) or _has_data(disk, ledger_dir):
        log.warning("data dir has files but no identity: adopting it")
    ident = {"format": FORMAT_VERSION, "instanceId": str(uuid.uuid4()),
             "journalDir": os.path.abspath(journal_dir), "ledgerDir": os.path.abspath(ledger_dir),
             "createdAt": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    log.info("new data dir identity %s", ident["instanceId"])
    return _write(disk, ident, journal_dir, ledger_dir)


def _write(disk: "Disk", ident: dict, journal_dir: str, ledger_dir: str) -> dict:
    data = (json.dumps(ident, indent=1) + "\n").encode()
    for directory in (ledger_dir, journal_dir):
        path = os.path.join(directory, IDENTITY)
        if not disk.exists(path):
            atomic_replace(disk, path, data)
    return ident
