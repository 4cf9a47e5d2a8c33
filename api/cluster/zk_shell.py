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
    ZS3. ZooKeeper unreachable: exit 1 once the connection or an answer has waited
         ZK_ANSWER_S (api/client/zk_bound.py ZK5; ZooKeeperMain waits forever, and the chart
         wraps it in ``timeout 15`` and loops, which works with either).

It speaks with this process's ZooKeeper credentials (api/client/zk_auth.py), as the bookie.
"""

from __future__ import annotations

import argparse
import sys

from api.client.metadata import MetadataError
from api.client.zk_auth import new_client
from api.client.zookeeper import zk_start
from api.cluster.zookeeper import ShellRefusal, shell_command

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
                        help="the ZooKeeper session timeout in ms (default 10000)")
    parser.add_argument("-r", dest="read_only", action="store_true",
                        help="read-only mode, as ZooKeeperMain's -r: accepted; this shell "
                             "only writes on 'create'")
    parser.add_argument("command", choices=COMMANDS, help="the ZooKeeper command")
    parser.add_argument("path", help="the znode path, e.g. /pulsar")
    parser.add_argument("data", nargs="?", default="",
                        help="data for 'create' (default empty)")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.read_only and args.command == "create":
        print("zookeeper-shell: -r (read-only) refuses 'create'", file=sys.stderr)
        return 1
    client = new_client(args.server, timeout=args.timeout_ms / 1000)
    try:
        zk_start(client)  # ZS3: bounded (ZK5), never ZooKeeperMain's wait forever
        print(shell_command(client, args.command, args.path, args.data.encode("utf-8")))
        return 0
    except ShellRefusal as refusal:  # ZS2
        print(refusal, file=sys.stderr)
    except MetadataError as err:
        print(f"zookeeper-shell: cannot connect or no answer: {err}", file=sys.stderr)
    finally:
        client.stop()
        client.close()
    return 1


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
