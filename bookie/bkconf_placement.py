"""bk_server.conf's placement strictness as BookKeeper reads it (docs/cluster.md §6): each
policy has its own enforce key with its own default, ``enforceMinNumRacksPerWriteQuorum``
(false) for RackawareEnsemblePlacementPolicy and ``enforceStrictZoneawarePlacement`` (true)
for ZoneawareEnsemblePlacementPolicy. ``placement_strict`` takes the one of the policy
``ensemblePlacementPolicy`` names; the other key is noted as ignored."""

from __future__ import annotations

from bookie.bkconf_keys import _bool

#: policy -> (its enforce key, BookKeeper's default)
ENFORCE = {"rack": ("enforceMinNumRacksPerWriteQuorum", False),
           "zone": ("enforceStrictZoneawarePlacement", True)}


def apply(conf) -> None:
    policy = conf.settings.get("placement_policy", ("rack", ""))[0]
    for name, (key, default) in ENFORCE.items():
        given = key in conf.props and conf.props[key].value.strip() != ""
        if name != policy:
            if given:
                conf.note("ignored", key, f"the {name} policy's; ensemblePlacementPolicy "
                                          f"names {policy}")
            continue
        try:
            strict = _bool(conf.props[key].value) if given else default
        except ValueError as exc:
            raise conf.fail(key, f"not a value for placement_strict: {exc}") from None
        if given or strict:
            conf.set("placement_strict", strict, key)
            if given:
                conf.note("checked", key, f"placement_strict = {str(strict).lower()}")
