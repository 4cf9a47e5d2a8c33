"""``bookie cluster status``: every bookie of a local cluster and how it stands, and how many
ledgers are under-replicated (api/cluster/cli.py starts and stops the cluster).

One row a bookie: those ``cluster.json`` says the tool started, in their order, then any other
bookie registered in the cluster's ZooKeeper tree. ``registered`` is where ZooKeeper lists it
(``writable``, ``read-only``, or ``no``); ``state`` is the bookie's own answer (its
``/v1/bookie/info``), or ``down`` when it does not answer: a bookie killed with kill -9 stays
registered until its ZooKeeper session expires (10 s) but is down at once (issue 54). The last
line counts the ledgers marked under-replicated (BookKeeper's layout under
``<root>/underreplication``, api/cluster/underreplication.py), the ones autorecovery still has
to copy; ``bookie shell listunderreplicated`` lists them.
"""

from __future__ import annotations

import json
import urllib.request

from api.cluster.local_bookies import alive, client_ssl, say


def _get(url: str, context=None) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as reply:
            return json.loads(reply.read())
    except OSError:
        return None


def human(size: int | None) -> str:
    if size is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def _registered(client, root: str) -> dict[str, tuple[str, str]]:
    """bookie id -> (``writable`` or ``read-only``, its URL) as ZooKeeper lists them."""
    from api.client.metadata_format import decode_service_info  # noqa: PLC0415
    from api.client.zookeeper import zk_read  # noqa: PLC0415

    found: dict[str, tuple[str, str]] = {}
    for kind, path in (("writable", f"{root}/available"),
                       ("read-only", f"{root}/available/readonly")):
        names = zk_read(client.get_children_async, path) \
            if zk_read(client.exists_async, path) else []
        for bookie_id in sorted(n for n in names if n != "readonly"):
            endpoint = decode_service_info(zk_read(client.get_async,
                                                   f"{path}/{bookie_id}")[0])[0]
            found[bookie_id] = (kind, f"{endpoint[3]}://{endpoint[1]}:{endpoint[2]}")
    return found


def show(state: dict) -> int:
    """Print the table and the under-replicated count; 0 (a report, whatever it says)."""
    from api.client.zk_auth import new_client  # noqa: PLC0415
    from api.client.zookeeper import parse_uri, zk_start  # noqa: PLC0415
    from api.cluster.underreplication import Underreplication  # noqa: PLC0415

    hosts, root = parse_uri(state["metadataServiceUri"])
    client = new_client(hosts)
    try:
        zk_start(client)
        registered = _registered(client, root)
        started = {bookie["id"]: bookie for bookie in state["bookies"]}
        say(f"metadata service: {state['metadataServiceUri']}")
        say(f"{'bookie':<20} {'registered':<11} {'state':<10} {'free':>10} {'ledgers':>8}")
        context = client_ssl(state.get("tls"))
        for bookie_id in [*started, *(b for b in registered if b not in started)]:
            kind, url = registered.get(bookie_id, ("no", started.get(bookie_id, {}).get("url")))
            mine = started.get(bookie_id)
            answering = url is not None and (mine is None or alive(mine["pid"]))
            info = (_get(url + "/v1/bookie/info", context) if answering else None) or {}
            ledgers = _get(url + "/v1/ledgers?limit=100000", context) if info else None
            free = (info.get("freeBytes") or {}).get("ledgers")
            count = len(ledgers["ledgers"]) if ledgers else "?"
            say(f"{bookie_id:<20} {kind:<11} {info.get('state', 'down'):<10} "
                f"{human(free):>10} {count:>8}")
        marked = Underreplication(client, root).marked()
        say(f"under-replicated ledgers: {len(marked)}"
            + ("  (bookie shell listunderreplicated lists them)" if marked else ""))
        return 0
    finally:
        client.stop()
        client.close()
