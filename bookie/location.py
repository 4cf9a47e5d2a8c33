"""The grammar of a bookie's network location (docs/cluster.md §6): ``/zone/rack``, as
BookKeeper's network-topology strings go. A leaf, so that the settings check it where they
are loaded and the cluster client reads it (api/client/topology.py)."""

from __future__ import annotations

import re

DEFAULT_ZONE = "default-region"
DEFAULT_LOCATION = "/default-region/default-rack"  # NetworkTopology.DEFAULT_REGION_AND_RACK

_PART = re.compile(r"[A-Za-z0-9._-]+")


class BadLocation(ValueError):
    """A network location that is not ``/zone/rack`` or ``/rack``."""


def parse_location(text: str) -> str:
    """``/zone/rack``, normalised (one level gains the default region). BadLocation names
    what is wrong."""
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or parts[0] != "" or \
            not all(_PART.fullmatch(part) for part in parts[1:]):
        raise BadLocation(f"network location {text!r}: expected /zone/rack or /rack, each "
                          f"part of letters, digits, '.', '_' or '-'")
    return "/".join(["", DEFAULT_ZONE] + parts[1:]) if len(parts) == 2 else "/".join(parts)
