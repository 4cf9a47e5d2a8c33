"""bk_server.conf's auditor schedule keys (docs/cluster.md §4). BookKeeper's auditor runs two
periodic ledger checks: ``auditorPeriodicCheckInterval`` (every ledger's fragments, by their
first and last entries) and ``auditorReplicasCheckInterval`` (each bookie's list of entries).
Ours has one, the replica check, which asks every bookie of every closed fragment for all the
entries it holds: it covers both. So both keys set ``replicas_check_interval_s``; given both,
the shorter non-zero interval wins (the check then runs at least as often as either asks),
and 0 for both is never, as in BookKeeper."""

from __future__ import annotations

from bookie.bkconf_keys import _int

#: BookKeeper's older name of compactionRateByEntries (its getCompactionRateByEntries falls
#: back to it); not an auditor key, but as small a rule, so it lives here.
OLD_RATE, RATE = "compactionRate", "compactionRateByEntries"
KEYS = ("auditorPeriodicCheckInterval", "auditorReplicasCheckInterval")


def apply_old_rate(conf) -> None:
    if OLD_RATE not in conf.props:
        return
    if RATE in conf.props and conf.props[RATE].value.strip():
        conf.note("ignored", OLD_RATE, f"{RATE} is set and wins, as in BookKeeper")
    elif not conf.props[OLD_RATE].value.strip():
        conf.note("ignored", OLD_RATE, "empty: BookKeeper reads it as unset")
    else:
        try:
            conf.set("compaction_rate_entries", _int(conf.props[OLD_RATE].value), OLD_RATE)
        except ValueError as exc:
            raise conf.fail(OLD_RATE, f"not a value for compaction_rate_entries: {exc}") \
                from None


def apply(conf) -> None:
    apply_old_rate(conf)
    given = {}
    for key in KEYS:
        if key not in conf.props:
            continue
        if not conf.props[key].value.strip():
            conf.note("ignored", key, "empty: BookKeeper reads it as unset")
            continue
        try:
            given[key] = _int(conf.props[key].value)
        except ValueError as exc:
            raise conf.fail(key, f"not a value for replicas_check_interval_s: {exc}") from None
    if not given:
        return
    running = [seconds for seconds in given.values() if seconds > 0]
    conf.set("replicas_check_interval_s", min(running) if running else 0, *given)
