"""A registration as Apache BookKeeper's bookie writes it (a BookieServiceInfo with only a
``bookie-rpc`` endpoint, no http), put in front of one of our daemons' BookKeeper port under
an id of its own: clients must then reach that "BookKeeper bookie" over BookKeeper's
protocol (api/client/bkport/transport.py)."""

from __future__ import annotations

from api.client.metadata_format import BookieServiceInfoFormat
from api.client.zookeeper import parse_uri


def register_as_bookkeeper(zk, zk_uri: str, daemon) -> str:
    """The id registered (ephemeral, on ``zk``'s session) for ``daemon``'s bookie_port."""
    _, root = parse_uri(zk_uri)
    theirs = f"127.0.0.1:{daemon.bk_port}"
    info = BookieServiceInfoFormat()
    info.endpoints.add(id="bookie", host="127.0.0.1", port=daemon.bk_port,
                       protocol="bookie-rpc")
    zk.create(f"{root}/available/{theirs}", info.SerializeToString(), ephemeral=True)
    return theirs
