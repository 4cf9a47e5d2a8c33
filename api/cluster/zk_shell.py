"""``pulsar zookeeper-shell``, the part the Pulsar helm chart runs from the bookie's image.

The chart's cluster-initialize job (charts/pulsar/templates/bookkeeper-cluster-initialize.yaml)
runs, in the bookie image, ``bin/pulsar zookeeper-shell -r -server ZK ls /PREFIX`` until
ZooKeeper answers, then ``bin/pulsar zookeeper-shell -server ZK create /PREFIX`` before
``bin/bookkeeper shell initnewcluster``. Pulsar's command is ZooKeeper's own ``ZooKeeperMain``;
this answers the same commands with the same exit codes, so those scripts run unchanged:

    ZS1. ``ls PATH`` prints the children as ZooKeeperMain does (``[a, b]``) and exits 0;
         ``get PATH`` prints the data; ``create PATH [DATA]`` prints ``Created PATH``.
    ZS2. A missing node, an existing node on ``create`` or a refused ACL is one line on
         stderr in ZooKeeperMain's words and exit 1: the chart's ``create ... && echo ... &&
         initnewcluster`` must not go on after a failed create.
    ZS3. ZooKeeper unreachable: exit 1 after ``-timeout`` ms (ZooKeeperMain waits forever;
         the chart wraps it in ``timeout 15`` and loops, which works with either).

It speaks with this process's ZooKeeper credentials (api/client/zk_auth.py), as the bookie.
"""

from __future__ import annotations

import argparse
import sys

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from api.client.zk_auth import new_client

COMMANDS = ("ls", "get", "create", "stat")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsar zookeeper-shell",
        description="ZooKeeper's shell commands that the Pulsar helm chart runs from the bookie "
                    "image: ls, get, create, stat. Exit 0 on success, 1 on a ZooKeeper error.")
    parser.add_argument("-server", dest="server", default="localhost:2181",
                        help="ZooKeeper connect string, host:port[,host:port...] (default "
                             "localhost:2181)")
    parser.add_argument("-timeout", dest="timeout_ms", type=int, default=10_000,
                        help="connection and session timeout in ms (default 10000)")
    parser.add_argument("-r", dest="read_only", action="store_true",
                        help="read-only mode, as ZooKeeperMain's -r: accepted; this shell "
                             "only writes on 'create'")
    parser.add_argument("command", choices=COMMANDS, help="the ZooKeeper command")
    parser.add_argument("path", help="the znode path, e.g. /pulsar")
    parser.add_argument("data", nargs="?", default="",
                        help="data for 'create' (default empty)")
    return parser


def run(args: argparse.Namespace) -> int:
    timeout = args.timeout_ms / 1000
    client = new_client(args.server, timeout=timeout)
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError:
        print(f"zookeeper-shell: cannot connect to {args.server} within {args.timeout_ms} ms",
              file=sys.stderr)
        return 1
    try:
        return _command(client, args)
    except NoNodeError:
        print(f"Node does not exist: {args.path}", file=sys.stderr)  # ZS2
    except NodeExistsError:
        print(f"Node already exists: {args.path}", file=sys.stderr)
    except NoAuthError:
        print(f"Insufficient permission : {args.path}", file=sys.stderr)
    finally:
        client.stop()
        client.close()
    return 1


def _command(client, args: argparse.Namespace) -> int:
    if args.command == "ls":
        print("[" + ", ".join(sorted(client.get_children(args.path))) + "]")
    elif args.command == "get":
        data, _ = client.get(args.path)
        print(data.decode("utf-8", "replace") if data else "null")
    elif args.command == "stat":
        _, stat = client.get(args.path)
        print(f"version = {stat.version}\nnumChildren = {stat.numChildren}\n"
              f"dataLength = {stat.dataLength}")
    else:
        if args.read_only:
            print("zookeeper-shell: -r (read-only) refuses 'create'", file=sys.stderr)
            return 1
        client.create(args.path, args.data.encode("utf-8"))
        print(f"Created {args.path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
