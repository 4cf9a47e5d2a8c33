"""``bookie cluster init|up|status|down``: a cluster's instance id, and a whole cluster on one
machine, the way a developer tries it.

    bookie cluster init --metadata-service-uri zk://HOST:PORT/ledgers
    bookie cluster up --bookies 3 [--dir ./cluster] [--base-port 3181]
                      [--hosts M --racks N --zones Z --placement host|rack|zone]
    bookie cluster topology [--write-rack-map] [--script FILE]
    bookie cluster add [--dir ./cluster]
    bookie cluster status [--dir ./cluster]
    bookie cluster down [--dir ./cluster]

``up`` starts a ZooKeeper from Debian's package and N bookies on consecutive ports, each with
its own data dir under ``--dir``, all detached (they outlive the command), waits (bounded,
with progress lines) until each is ready and registered, and writes ``<dir>/cluster.json``
(PIDs, ports, the metadata URI), and prints the ``export BOOKIE_METADATA_SERVICE_URI=...``
line after which no command needs ``--metadata-service-uri``; a dir's ZooKeeper keeps its port
across ``down``/``up`` while it is free, so that line stays true. ``add`` starts one more bookie
in a running local cluster, on the port after the highest, and waits until it is ready.
With ``--hosts``, ``--racks`` or ``--zones`` each
bookie gets a place (``topology_location``, ``topology_host``: api/cluster/topology_cli.py),
which ``add`` continues; ``topology`` lists where each bookie stands (docs/cluster.md §6).
``init`` writes ``<root>/INSTANCEID`` (a new UUID, as
BookKeeper's ``shell initnewcluster``) into a tree that has none: every bookie's cookie then
carries it, and a bookie whose dirs name another instance refuses to start (CK2 in
api/cluster/member.py); the first bookie of an empty tree does the same by itself. ``status`` lists
every bookie the tool started and any other ZooKeeper knows, registered (writable, read-only)
or not, each one's ``/v1/bookie/info`` or ``down``, and the count of under-replicated ledgers
(api/cluster/cluster_status.py). ``down`` sends SIGTERM to each bookie by PID
(they unregister, drain and checkpoint), waits for them, then stops ZooKeeper. Exit codes: 0
done, 1 something did not come up or go down (``init``: the tree already has an instance id),
2 usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys

from api.client.metadata import MetadataError
from api.client.placement import POLICIES
from api.cluster.local_bookies import (alive, client_env, make_pki, next_free, port_free,
                                      rpc_text, say, start_bookie, stop_zookeeper, wait_gone,
                                      wait_ready)
from api.cluster import cluster_status, topology_cli
from api.cluster.local_zookeeper import ZooKeeperServer, missing

STATE_FILE = "cluster.json"
#: Every command that takes --metadata-service-uri reads it from here when it is not given
#: (and a bookie reads its metadata_service_uri setting from it too).
URI_ENV = "BOOKIE_METADATA_SERVICE_URI"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bookie cluster", description="A local cluster: one ZooKeeper and N bookies on "
        "127.0.0.1, each bookie with its own data dir (docs/cluster.md). 'up' starts it, "
        "'status' shows it, 'down' stops it.")
    commands = parser.add_subparsers(dest="command",
                                     metavar="init|up|add|status|down|topology")
    init = commands.add_parser(
        "init", help="give a cluster's ZooKeeper tree its instance id (INSTANCEID), once",
        description="Create <root>/INSTANCEID (a new UUID, BookKeeper's format) where the tree "
        "has none. Needed once for a tree whose bookies were registered before instance ids; "
        "the first bookie of an empty tree does it by itself. Exit 1 if the tree already has "
        "one (it is printed).")
    init.add_argument("--metadata-service-uri", default=os.environ.get(URI_ENV),
                      required=URI_ENV not in os.environ,
                      help=f"the cluster's ZooKeeper tree, zk://HOST:PORT/ledgers (default "
                      f"${URI_ENV})")
    up = commands.add_parser("up", help="start ZooKeeper and N bookies, wait until ready")
    up.add_argument("--bookies", type=int, default=3, help="how many bookies (default 3)")
    up.add_argument("--base-port", type=int, default=3181,
                    help="the first bookie's HTTP port; the others follow (default 3181)")
    up.add_argument("--tls", action="store_true",
                    help="make a private CA in DIR/pki and a certificate per bookie; the "
                         "bookies serve HTTPS only, with mutual TLS (docs/operations.md §6), "
                         "and with --rpc-base-port their bookie_port takes BookKeeper's "
                         "START_TLS and refuses plain requests (EUA); prints the variables a "
                         "client sets to use them")
    up.add_argument("--rpc-base-port", type=int, default=None,
                    help="also serve Apache BookKeeper's own protocol (the bookie_port "
                         "setting, docs/bookkeeper-protocol.md): the first bookie on this "
                         "port, the others on the next ones; BookKeeper's clients, shell "
                         "and autorecovery then use the cluster (default: off)")
    up.add_argument("--hosts", type=int, default=None,
                    help="lay the bookies out on this many hosts (bookie i on host i mod "
                         "HOSTS; each bookie's topology_host), for host-aware placement")
    up.add_argument("--racks", type=int, default=1,
                    help="racks the hosts stand in (host h in rack h mod RACKS; each "
                         "bookie's topology_location /zone-Z/rack-R; default 1)")
    up.add_argument("--zones", type=int, default=1,
                    help="zones the racks stand in (rack r in zone r mod ZONES; default 1)")
    up.add_argument("--placement", default="rack", choices=POLICIES,
                    help="the bookies' autorecovery placement policy (placement_policy; "
                         "docs/cluster.md §6; default rack)")
    topology_cli.add_parser(commands)
    for command in (up, commands.add_parser("add", help="start one more bookie in the local "
                                            "cluster, on the next port; wait until ready"),
                    commands.add_parser("status", help="bookies (down ones too), state, "
                                        "space, ledgers; under-replicated ledgers"),
                    commands.add_parser("down", help="SIGTERM every bookie, then ZooKeeper")):
        command.add_argument("--dir", default="./cluster",
                             help="where the cluster keeps its files (default ./cluster)")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect warnings: ZK5's line
    try:
        return {"init": init_cluster, "up": up, "add": add, "status": status,
                "down": down, "topology": topology_cli.run}[args.command](args)
    except MetadataError as exc:  # ZooKeeper's refusal or silence (ZK5): said, no traceback
        print(f"bookie cluster {args.command}: {exc}", file=sys.stderr)
        return 1


def init_cluster(args) -> int:
    from api.client.zookeeper import ZkMetadataStore  # noqa: PLC0415
    from api.cluster.zookeeper import create_cluster_instance_id  # noqa: PLC0415

    store = ZkMetadataStore(args.metadata_service_uri).start()
    try:
        instance, created = create_cluster_instance_id(store.client, store.root)
    finally:
        store._stop()
    if created:
        say(f"initialised cluster {args.metadata_service_uri}: instance {instance}")
        return 0
    print(f"bookie cluster init: {args.metadata_service_uri} is already initialised: instance "
          f"{instance}", file=sys.stderr)
    return 1


def up(args) -> int:
    root = os.path.abspath(args.dir)
    if os.path.exists(os.path.join(root, STATE_FILE)):
        say(f"a cluster is already described in {root}/{STATE_FILE}: "
            f"'bookie cluster down --dir {args.dir}' first")
        return 1
    reason = missing()
    if reason is not None:
        say(f"cannot start ZooKeeper: {reason}")
        return 1
    ports = [args.base_port + i for i in range(args.bookies)]
    rpc_ports = ([args.rpc_base_port + i for i in range(args.bookies)]
                 if args.rpc_base_port is not None else [None] * args.bookies)
    taken = [port for port in ports + rpc_ports if port is not None and not port_free(port)]
    if args.bookies < 1 or taken or min(args.hosts or 1, args.racks, args.zones) < 1:
        say(f"ports {taken} are in use: choose another --base-port" if taken
            else "--bookies, --hosts, --racks and --zones must be at least 1")
        return 2
    os.makedirs(root, exist_ok=True)
    say(f"starting ZooKeeper in {root}/zookeeper ...")
    zk_dir = os.path.join(root, "zookeeper")
    zookeeper = ZooKeeperServer(zk_dir, port=_stable_zk_port(zk_dir), detached=True).start()
    uri = f"zk://127.0.0.1:{zookeeper.port}/ledgers"
    state = {"metadataServiceUri": uri, "zookeeper": {"pid": zookeeper.pid,
                                                      "port": zookeeper.port},
             "bookies": [], "tls": make_pki(root) if args.tls else None,
             "rpc": args.rpc_base_port is not None,
             "layout": {"hosts": args.hosts or args.bookies, "racks": args.racks,
                        "zones": args.zones, "placement": args.placement,
                        "placed": bool(args.hosts or args.racks > 1 or args.zones > 1)}}
    for index, (port, rpc_port) in enumerate(zip(ports, rpc_ports)):
        state["bookies"].append(start_bookie(root, index, port, uri, state["tls"], rpc_port,
                                             _place(state, index)))
    _save(root, state)
    ok = all(wait_ready(bookie, state["tls"]) for bookie in state["bookies"])
    say(f"metadata service: {uri}")
    for bookie in state["bookies"]:
        say(f"bookie {bookie['id']}: {bookie['url']}{rpc_text(bookie)} (data "
            f"{bookie['dataDir']}, pid {bookie['pid']})")
    if not ok:
        say(f"not every bookie came up; logs in {root}/bookie-*/bookie.log")
    else:
        say(f"export {URI_ENV}={uri}   # then no command needs --metadata-service-uri")
        if state["tls"]:
            for name, value in client_env(state["tls"]).items():
                say(f"export {name}={value}   # TLS: trust the cluster's CA, show a "
                    f"client certificate")
    return 0 if ok else 1


def _stable_zk_port(zk_dir: str) -> int:
    """The port this cluster dir's ZooKeeper had last time (its zoo.cfg stays with the data)
    when it is free, so that an exported metadata URI stays right across down/up (issue 54);
    0 (any free port) for a new dir or a port now taken."""
    try:
        with open(os.path.join(zk_dir, "zoo.cfg")) as handle:
            lines = dict(line.strip().split("=", 1) for line in handle if "=" in line)
        port = int(lines.get("clientPort", "0"))
    except (OSError, ValueError):
        return 0
    return port if 0 < port < 65536 and port_free(port) else 0


def add(args) -> int:
    root = os.path.abspath(args.dir)
    state = _load(root)
    if state is None:
        say(f"no cluster in {root}: 'bookie cluster up --dir {args.dir}' first")
        return 1
    port = next_free(max(int(b["id"].rsplit(":", 1)[1]) for b in state["bookies"]) + 1)
    rpc_port = None
    if state.get("rpc"):
        rpc_port = next_free(max(b["rpcPort"] for b in state["bookies"]) + 1, avoid=port)
    bookie = start_bookie(root, len(state["bookies"]), port, state["metadataServiceUri"],
                           state.get("tls"), rpc_port, _place(state, len(state["bookies"])))
    state["bookies"].append(bookie)
    _save(root, state)
    ok = wait_ready(bookie, state.get("tls"))
    if ok:
        say(f"bookie {bookie['id']}: {bookie['url']}{rpc_text(bookie)} (data "
            f"{bookie['dataDir']}, pid {bookie['pid']})")
    return 0 if ok else 1


def _place(state: dict, index: int) -> dict:
    """Bookie ``index``'s settings for its place and policy (topology_cli.local_layout)."""
    layout = state.get("layout") or {}
    place = {"placement_policy": layout.get("placement", "rack")}
    if layout.get("placed"):
        where = topology_cli.local_layout(index, layout["racks"], layout["hosts"],
                                          layout["zones"])
        place.update(topology_location=where["location"], topology_host=where["host"])
    return place


def _load(root: str) -> dict | None:
    path = os.path.join(root, STATE_FILE)
    if not os.path.exists(path):
        say(f"no cluster in {root} ({STATE_FILE} is missing): 'bookie cluster up' first")
        return None
    with open(path) as handle:
        return json.load(handle)


def _save(root: str, state: dict) -> None:
    with open(os.path.join(root, STATE_FILE), "w") as handle:
        json.dump(state, handle, indent=1)


def status(args) -> int:
    state = _load(os.path.abspath(args.dir))
    return 1 if state is None else cluster_status.show(state)


def down(args) -> int:
    root = os.path.abspath(args.dir)
    state = _load(root)
    if state is None:
        return 1
    ok = True
    for bookie in state["bookies"]:
        if not alive(bookie["pid"]):
            say(f"bookie {bookie['id']} (pid {bookie['pid']}) is not running")
            continue
        say(f"stopping bookie {bookie['id']} (pid {bookie['pid']}): SIGTERM, draining ...")
        os.kill(bookie["pid"], signal.SIGTERM)
    for bookie in state["bookies"]:
        ok = wait_gone(bookie["pid"], f"bookie {bookie['id']}") and ok
    zookeeper = state["zookeeper"]
    if alive(zookeeper["pid"]):
        say(f"stopping ZooKeeper (pid {zookeeper['pid']})")
        ok = stop_zookeeper(zookeeper["pid"]) and ok
    if ok:
        os.remove(os.path.join(root, STATE_FILE))
        say(f"cluster stopped; data stays in {root}")
    return 0 if ok else 1
