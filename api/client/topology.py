"""Where each bookie stands (docs/cluster.md §6): its network location, ``/zone/rack`` as
BookKeeper's network-topology strings go, and its host; and the two forms that carry it.

A location has two levels, read as BookKeeper's policies read them: the rack-aware policy
counts distinct whole locations (racks), the zone-aware one distinct first levels (zones,
its ``/zone/upgradedomain``). A one-level ``/rack`` stands in BookKeeper's default region.
A bookie nobody placed is in BookKeeper's default rack, ``/default-region/default-rack``.

Where a location comes from, the first that has one:
    1. the rack map Pulsar keeps in ZooKeeper (``/bookies`` beside ``/ledgers``,
       ``rack_map_path``; BookieRackAffinityMapping's
       JSON: ``{group: {bookieId: {"rack": "/r", "hostname": "h"}}}``): the operator's
       explicit word, and the one BookKeeper's own clients in a Pulsar cluster read;
    2. the bookie's registration: the ``topology.location`` and ``topology.host``
       properties of its service info (settings ``topology_location``/``topology_host``);
    3. the default rack, and the host of the bookie's id.

Invariant:
    TP1. Every bookie has exactly one location and one host for a placement decision; a
         malformed location in any source is refused where it is written (a setting, the
         rack map tool) and passed over where it is read (that bookie is in the default
         rack), never half-parsed.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath

from bookie.location import DEFAULT_LOCATION, BadLocation, parse_location

#: Pulsar's BookieRackAffinityMapping.BOOKIE_INFO_ROOT_PATH, beside the ledgers root.
RACK_MAP_NAME = "bookies"
RACK_MAP_GROUP = "default"  # Pulsar's default bookie affinity group
#: Service-info property names a bookie publishes its place under (docs/cluster.md §1).
LOCATION_PROPERTY = "topology.location"
HOST_PROPERTY = "topology.host"

__all__ = ["BadLocation", "DEFAULT_LOCATION", "Location", "parse_location"]


def rack_map_path(root: str) -> str:
    """Where Pulsar keeps its rack map for a cluster whose ledgers root is ``root``: beside
    it, ``/bookies`` for ``/ledgers``, as Pulsar's own chroot keeps both (``/pulsar/bookies``
    beside ``/pulsar/ledgers``)."""
    parent = posixpath.dirname(root.rstrip("/")) or "/"
    return posixpath.join(parent, RACK_MAP_NAME)


def host_of(bookie_id: str) -> str:
    """The host part of a ``host:port`` bookie id (the whole id if it has no port)."""
    return bookie_id.rsplit(":", 1)[0] if ":" in bookie_id else bookie_id


@dataclasses.dataclass(frozen=True)
class Location:
    location: str = DEFAULT_LOCATION
    host: str = ""

    @property
    def zone(self) -> str:
        return self.location.split("/")[1]

    @property
    def rack(self) -> str:
        """The whole location: racks of the same name in two zones are two racks."""
        return self.location

    @property
    def placed(self) -> bool:
        return self.location != DEFAULT_LOCATION


def locate(bookie_id: str, rack_map: dict[str, Location],
           properties: dict[str, str] | None) -> Location:
    """TP1: the rack map's word, else the registration's, else the default rack."""
    if bookie_id in rack_map:
        return rack_map[bookie_id]
    properties = properties or {}
    try:
        location = parse_location(properties[LOCATION_PROPERTY])
    except (KeyError, BadLocation):
        location = DEFAULT_LOCATION
    return Location(location, properties.get(HOST_PROPERTY) or host_of(bookie_id))


def decode_rack_map(data: bytes | None) -> dict[str, Location]:
    """Pulsar's rack map, every group merged (a bookie is in one group); entries without a
    valid rack are passed over (TP1). Not JSON, or not that shape: empty."""
    try:
        groups = json.loads(bytes(data or b"{}").decode())
    except (UnicodeDecodeError, ValueError):
        return {}
    found: dict[str, Location] = {}
    if not isinstance(groups, dict):
        return found
    for members in groups.values():
        for bookie_id, info in (members.items() if isinstance(members, dict) else ()):
            try:
                rack = str(info["rack"])
                # Pulsar's getRack puts a missing leading "/" in front (pulsar-admin
                # set-bookie-rack --rack rack1 stores "rack1").
                location = parse_location(rack if rack.startswith("/") else "/" + rack)
            except (TypeError, KeyError, BadLocation):
                continue
            found[bookie_id] = Location(location, str(info.get("hostname") or "") or
                                        host_of(bookie_id))
    return found


def encode_rack_map(places: dict[str, Location], group: str = RACK_MAP_GROUP,
                    existing: bytes | None = None) -> bytes:
    """The rack map as Pulsar's ``pulsar-admin bookies set-bookie-rack`` writes it:
    ``places`` set into ``existing`` (every other entry and group kept; a bookie already in
    a group is updated there, a new one goes to ``group``)."""
    try:
        groups = json.loads(bytes(existing or b"{}").decode())
    except (UnicodeDecodeError, ValueError):
        groups = {}
    if not isinstance(groups, dict):
        groups = {}
    for bookie_id, where in sorted(places.items()):
        home = next((name for name, members in groups.items()
                     if isinstance(members, dict) and bookie_id in members), group)
        entry = groups.setdefault(home, {}).setdefault(bookie_id, {})
        if not isinstance(entry, dict):
            entry = groups[home][bookie_id] = {}
        entry.update(rack=where.location, hostname=where.host)
    return json.dumps(groups, indent=2, sort_keys=True).encode()


def topology_script(places: dict[str, Location]) -> str:
    """A script for BookKeeper's ``ScriptBasedMapping`` (``networkTopologyScriptFileName``):
    it prints one location per address argument (a bookie id's host), the default rack for hosts it does not know.
    BookKeeper resolves by host (NetUtils.resolveNetworkLocation), so bookies sharing a host
    must share a location here; ``conflicts`` names those that do not."""
    by_host: dict[str, str] = {}
    for bookie_id, where in sorted(places.items()):
        by_host.setdefault(host_of(bookie_id), where.location)
    cases = "".join(f"    {host}) echo {location} ;;\n"
                    for host, location in sorted(by_host.items()))
    return ("#!/bin/sh\n# Written by `bookie cluster topology`: BookKeeper's ScriptBasedMapping "
            "calls it with host names.\nfor host in \"$@\"; do\n  case \"$host\" in\n"
            f"{cases}    *) echo {DEFAULT_LOCATION} ;;\n  esac\ndone\n")


def conflicts(places: dict[str, Location]) -> list[str]:
    """Addresses (a bookie id's host) whose bookies stand in more than one location: a
    mapping keyed by address (the script, Pulsar's by-host lookup) cannot say that."""
    seen: dict[str, set[str]] = {}
    for bookie_id, where in places.items():
        seen.setdefault(host_of(bookie_id), set()).add(where.location)
    return sorted(host for host, locations in seen.items() if len(locations) > 1)
