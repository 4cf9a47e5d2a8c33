"""Which dirs a cookie names (docs/formats.md §11.3), and the older form ours used to write.

Invariants:
    CF1. A cookie names the *configured* dirs, as BookKeeper's ``Cookie.generateCookie``
         does: ``journalDir`` the journal dirs comma-joined, ``ledgerDirs`` (and
         ``indexDirs``, only with index dirs) the dir list, each dir absolute and without
         ``current/``. BookKeeper's bookie given the same dirs then verifies our cookie,
         and we verify its, with neither rewritten.
    CF2. Our cookies before CF1 named each dir's ``current/``. A cookie that names exactly
         this configuration's ``current/`` dirs is that older form of the CF1 cookie: it is
         read as the CF1 cookie, so it proves the same thing, and rewritten once in CF1 form
         (api/cluster/member.py). Anything else (other dirs, other paths) is compared as it
         is: another bookie's or emptied dirs are still refused (CK1).
"""

from __future__ import annotations

import os

from bookie.config import split_dirs


def configured_dirs(config) -> dict:
    """CF1: the dir fields of this configuration's cookie. An absolute dir is named as
    configured (a trailing ``/`` kept), as BookKeeper names it, so that one bk.conf given
    to both bookies makes the same cookie; a relative one is made absolute (it names the
    dir whatever the daemon's working dir)."""
    def named(dirs):
        return [d if os.path.isabs(d) else os.path.abspath(d) for d in dirs]
    fields = {"journalDir": ",".join(named(split_dirs(config.journal_dirs, config.data_dir,
                                                      "journal"))),
              "ledgerDirs": named(split_dirs(config.ledger_dirs, config.data_dir, "ledgers"))}
    if config.index_dirs is not None:
        fields["indexDirs"] = named(split_dirs(config.index_dirs, "", ""))
    return fields


def older_dirs(config) -> dict:
    """CF2: the dir fields our cookies had before CF1 (each dir's ``current/``)."""
    fields = {"journalDir": ",".join(_absolute(config.journal_dirs_current)),
              "ledgerDirs": _absolute(config.ledger_dirs_current)}
    if config.index_dirs is not None:
        fields["indexDirs"] = _absolute(config.index_dirs_current)
    return fields


def in_configured_form(cookie: dict | None, config) -> dict | None:
    """CF2: ``cookie`` with its dirs in CF1 form if it is the older form of this
    configuration's cookie; otherwise ``cookie`` unchanged."""
    if cookie is None:
        return None
    older = older_dirs(config)
    named = {key: cookie[key] for key in ("journalDir", "ledgerDirs", "indexDirs")
             if key in cookie}
    if named != older:
        return cookie
    return dict(cookie, **configured_dirs(config))


def _absolute(dirs) -> list[str]:
    return [os.path.abspath(d) for d in dirs]
