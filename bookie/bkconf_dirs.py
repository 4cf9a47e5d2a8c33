"""bk_server.conf's directories: journalDirectories (or journalDirectory), ledgerDirectories
and indexDirectories, onto ``data_dir`` or ``journal_dirs``/``ledger_dirs``/``index_dirs``.

``conf`` is bookie/bkconf.py's BkConf (its ``props``, ``set``, ``note``, ``fail``).

indexDirectories is BookKeeper's DbLedgerStorage index dirs: ledger dir i keeps its RocksDB
indexes in ``<index dir i>/current/{locations,ledgers}`` (the Pulsar helm chart sets it with
``bookkeeper.volumes.index.enabled``). The same dirs as ledgerDirectories change nothing
(ignored); other dirs are ``index_dirs``; another count is refused (BC3, exit 78), as
DbLedgerStorage refuses to start with "ledger and index dirs size not matched".
"""

from __future__ import annotations

import os


def _value(conf, key: str) -> str:
    prop = conf.props.get(key)
    return prop.value if prop is not None else ""


def _dirs(conf, key: str) -> list[str]:
    return [os.path.normpath(item) for item in conf.props[key].items]


def apply(conf) -> None:
    journal_key = "journalDirectories" if _value(conf, "journalDirectories") else (
        "journalDirectory" if _value(conf, "journalDirectory") else None)
    if journal_key == "journalDirectories" and "journalDirectory" in conf.props:
        conf.note("ignored", "journalDirectory", "journalDirectories is set and wins, as in "
                                                 "BookKeeper")
    elif journal_key is None and "journalDirectory" in conf.props:
        conf.note("ignored", "journalDirectory", "empty: BookKeeper reads it as unset")
    ledger_key = "ledgerDirectories" if _value(conf, "ledgerDirectories") else None
    if journal_key is None and ledger_key is None:
        for key in ("journalDirectories", "ledgerDirectories"):
            if key in conf.props:
                conf.note("ignored", key, "empty: BookKeeper reads it as unset")
        _index(conf, None)
        return
    if journal_key is None or ledger_key is None:
        given = journal_key or ledger_key
        raise conf.fail(given, "set journalDirectories and ledgerDirectories together: "
                               "without the other, this bookie would put it under data_dir "
                               "where BookKeeper takes its default (/tmp/bk-txn, /tmp/bk-data)")
    journals, ledgers = _dirs(conf, journal_key), _dirs(conf, ledger_key)
    root = os.path.dirname(ledgers[0])
    if len(journals) == len(ledgers) == 1 and os.path.dirname(journals[0]) == root \
            and (os.path.basename(journals[0]), os.path.basename(ledgers[0])) == \
            ("journal", "ledgers"):
        conf.set("data_dir", root, journal_key, ledger_key)  # our own layout: D/journal...
    else:
        conf.set("journal_dirs", ",".join(journals), journal_key)
        conf.set("ledger_dirs", ",".join(ledgers), ledger_key)
    _index(conf, ledgers)


def _index(conf, ledgers: list[str] | None) -> None:
    """``ledgers``: the ledger dirs mapped, None for our one default ledger dir."""
    if "indexDirectories" not in conf.props:
        return
    items = [os.path.normpath(i) for i in conf.props["indexDirectories"].items]
    if not items:
        conf.note("ignored", "indexDirectories", "empty: BookKeeper reads it as unset, the "
                                                 "indexes live in the ledger directories")
        return
    if items == ledgers:
        conf.note("ignored", "indexDirectories", "the ledger directories: the indexes live "
                                                 "there, as unset")
        return
    count = 1 if ledgers is None else len(ledgers)
    if len(items) != count:
        raise conf.fail("indexDirectories", f"{len(items)} dir(s) but ledgerDirectories has "
                                            f"{count}: one index dir per ledger dir (BookKeeper "
                                            f"refuses it too: ledger and index dirs size not "
                                            f"matched)")
    conf.set("index_dirs", ",".join(items), "indexDirectories")
