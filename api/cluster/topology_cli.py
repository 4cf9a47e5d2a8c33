"""``bookie cluster topology``: where each registered bookie stands, and the two forms that
tell BookKeeper's own clients (docs/cluster.md §6): Pulsar's rack map in ZooKeeper and a
script for BookKeeper's ScriptBasedMapping. Also the layout ``bookie cluster up --racks
--hosts --zones`` gives a local cluster."""

from __future__ import annotations

import asyncio
import os

from api.client.topology import Location, conflicts, encode_rack_map, topology_script

URI_ENV = "BOOKIE_METADATA_SERVICE_URI"


def local_layout(index: int, racks: int, hosts: int, zones: int) -> dict[str, str]:
    """Bookie ``index`` of a local cluster: on host ``index mod hosts``; a host stands in one
    rack (host mod racks), a rack in one zone (rack mod zones), as machines do."""
    host = index % hosts
    rack = host % racks
    return {"location": f"/zone-{rack % zones}/rack-{rack}", "host": f"host-{host}"}


def add_parser(commands) -> None:
    topology = commands.add_parser(
        "topology", help="where each bookie stands; write Pulsar's rack map or BookKeeper's "
        "topology script from the registrations",
        description="List every registered bookie's network location (/zone/rack) and host, "
        "as our clients resolve them: Pulsar's rack map (/bookies) first, then the bookie's "
        "registration (settings topology_location, topology_host), else the default rack. "
        "--write-rack-map sets the registrations' places in Pulsar's rack map (other entries "
        "and affinity groups kept), so that "
        "BookKeeper's clients in a Pulsar cluster (BookieRackAffinityMapping) see them too; "
        "--script writes a script for BookKeeper's ScriptBasedMapping "
        "(networkTopologyScriptFileName). BookKeeper resolves a location by address: "
        "bookies sharing an address in different racks are reported (exit 1).")
    topology.add_argument("--metadata-service-uri", default=os.environ.get(URI_ENV),
                          required=URI_ENV not in os.environ,
                          help=f"zk://HOST:PORT/ledgers (default ${URI_ENV})")
    topology.add_argument("--write-rack-map", action="store_true",
                          help="write /bookies (Pulsar's JSON) from the registrations")
    topology.add_argument("--script", metavar="FILE",
                          help="write a ScriptBasedMapping script (mode 0755) to FILE")


def run(args) -> int:
    return asyncio.run(_run(args))


async def _run(args) -> int:
    from api.client.ensemble import BookKeeper  # noqa: PLC0415
    from api.client.topology import decode_rack_map, locate, rack_map_path  # noqa: PLC0415
    from api.client.zookeeper import read_rack_map  # noqa: PLC0415
    from api.cluster.zookeeper import write_rack_map  # noqa: PLC0415

    async with await BookKeeper.connect(args.metadata_service_uri) as bk:
        alive = sorted(await bk.alive_bookies())  # their registrations learned, too
        client, root = bk.store.client, bk.store.root
        existing = await asyncio.to_thread(read_rack_map, client, root)  # one read for all
        rack_map = decode_rack_map(existing)
        where = {b: locate(b, rack_map, bk.transport.published(b)) for b in alive}
        published = {b: locate(b, {}, bk.transport.published(b)) for b in alive}
        print(f"{'bookie':<22} {'location':<28} {'host':<16} source")
        for bookie_id in alive:
            source = ("rack map" if bookie_id in rack_map else
                      "registration" if published[bookie_id].placed else "default")
            print(f"{bookie_id:<22} {where[bookie_id].location:<28} "
                  f"{where[bookie_id].host:<16} {source}")
        if args.write_rack_map:
            places = {b: p for b, p in published.items() if p.placed}
            await asyncio.to_thread(write_rack_map, client, root,
                                    encode_rack_map(places, existing=existing))
            print(f"wrote Pulsar's rack map {rack_map_path(root)}: {len(places)} bookies "
                  f"set, every other entry and group kept")
        if args.script:
            _write_script(args.script, where)
    clashes = conflicts(where)
    for address in clashes:
        print(f"warning: bookies at {address} stand in different racks; BookKeeper's clients "
              f"resolve one location per address and will see one of them")
    return 1 if clashes else 0


def _write_script(path: str, where: dict[str, Location]) -> None:
    with open(path, "w") as handle:
        handle.write(topology_script(where))
    os.chmod(path, 0o755)
    print(f"wrote {path}: set networkTopologyScriptFileName={os.path.abspath(path)} in "
          f"BookKeeper's client configuration")
