"""A bookie's settings as placement (docs/cluster.md §6): what it publishes about where it
stands, and the policy its autorecovery places copies by."""

from __future__ import annotations

from api.client.placement import Placement, PlacementRules
from api.client.topology import HOST_PROPERTY, LOCATION_PROPERTY, parse_location


def published_place(config) -> dict[str, str]:
    """The service-info properties of a bookie's registration (TP1's second source)."""
    place = {}
    if config.topology_location:
        place[LOCATION_PROPERTY] = parse_location(config.topology_location)
    if config.topology_host:
        place[HOST_PROPERTY] = config.topology_host
    return place


def placement_of(config) -> Placement:
    return Placement(PlacementRules(
        policy=config.placement_policy,
        min_racks=config.placement_min_racks_per_write_quorum,
        min_zones=config.placement_min_zones_per_write_quorum,
        desired_zones=config.placement_desired_zones_per_write_quorum,
        strict=config.placement_strict))
