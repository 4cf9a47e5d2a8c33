"""``cookie show|delete`` and ``listbookies``: a cluster bookie's cookie and membership in
ZooKeeper (docs/cluster.md §1-2). These talk to ZooKeeper, not to the data dir."""

from __future__ import annotations

import argparse
import contextlib

from api.client.metadata_format import decode_cookie, decode_service_info
from api.client.zk_auth import new_client
from api.client.zookeeper import parse_uri, zk_read, zk_start
from api.cluster.zookeeper import ZkCookies
from bookie.shell.datadir import UsageError
from bookie.shell.output import EXIT_OK, Output

EXIT_ABSENT = 1
URI_ENV = "BOOKIE_METADATA_SERVICE_URI"  # as `bookie cluster up` prints it


def zookeeper_options() -> argparse.ArgumentParser:
    """The parent parser of every command that talks to a cluster's ZooKeeper: the URI, or
    BookKeeper's -conf file that holds it (bookkeeper shell's $BOOKIE_CONF; resolved by
    ``bookie.shell.main`` through bk_settings.py)."""
    zk = argparse.ArgumentParser(add_help=False)
    zk.add_argument("--metadata-service-uri", default=None, metavar="zk://HOST:PORT/ledgers",
                    help=f"the cluster's ZooKeeper (as the bookies' metadata_service_uri; "
                    f"default ${URI_ENV}, else the -conf file's)")
    zk.add_argument("-conf", "--conf", dest="conf", metavar="FILE",
                    help="BookKeeper's bookkeeper.conf: its metadataServiceUri (or zkServers)")
    zk.set_defaults(zk_command=True)
    return zk


@contextlib.contextmanager
def zookeeper(uri: str):
    """A started kazoo client and the root of ``uri``; stopped and closed on exit."""
    hosts, root = parse_uri(uri)
    client = new_client(hosts)
    try:
        zk_start(client)
        yield client, root
    finally:
        client.stop()
        client.close()


def register(commands, common: argparse.ArgumentParser) -> None:
    zk = zookeeper_options()
    cookie = commands.add_parser(
        "cookie", parents=[common, zk], help="show or delete a bookie's cookie in ZooKeeper",
        description="A bookie writes its cookie (BookKeeper's format: bookie id, journal and "
        "ledger dirs, data-dir instance id) to ZooKeeper on its first start, and refuses to "
        "start when its data dirs do not match it (a wiped or swapped disk). 'show' prints "
        "it; 'delete' removes it so that the bookie starts on the dirs it has, as a new "
        "member: do that only once its old copies are known lost (autorecovery). Exit 1 if "
        "there is no cookie.")
    cookie.add_argument("action", choices=("show", "delete", "list"),
                        help="show or delete one bookie's cookie, or list them all")
    cookie.add_argument("--bookie-id", metavar="HOST:PORT", help="the bookie (show, delete)")
    cookie.set_defaults(handler=cookie_command)
    bookies = commands.add_parser(
        "listbookies", parents=[common, zk], help="the bookies registered in ZooKeeper",
        description="List the writable and the read-only bookies registered under "
        "available/ and available/readonly/, with their HTTP endpoints.")
    bookies.set_defaults(handler=list_bookies)


def cookie_command(args: argparse.Namespace, out: Output) -> int:
    if args.action != "list" and not args.bookie_id:
        raise UsageError(f"cookie {args.action} needs --bookie-id HOST:PORT")
    with zookeeper(args.metadata_service_uri) as (client, root):
        cookies = ZkCookies(client, root)
        if args.action == "list":
            for bookie_id in cookies.bookie_ids():
                out.emit({"type": "cookie", "bookieId": bookie_id}, bookie_id)
            return EXIT_OK
        found = cookies.read(args.bookie_id)
        if found is None:
            out.error(f"no cookie of bookie {args.bookie_id} in {args.metadata_service_uri}")
            return EXIT_ABSENT
        cookie = decode_cookie(found[0])
        if args.action == "show":
            out.emit({"type": "cookie", **cookie, "version": found[1]},
                     "\n".join(f"{key}: {value}" for key, value in cookie.items()))
            return EXIT_OK
        cookies.delete(args.bookie_id)
        out.emit({"type": "deleted", **cookie},
                 f"deleted the cookie of bookie {args.bookie_id} (instance "
                 f"{cookie['instanceId']}); it will start on the data dirs it has")
        return EXIT_OK


def list_bookies(args: argparse.Namespace, out: Output) -> int:
    with zookeeper(args.metadata_service_uri) as (client, root):
        for state, path in (("writable", f"{root}/available"),
                            ("read-only", f"{root}/available/readonly")):
            for bookie_id in sorted(zk_read(client.get_children_async, path)
                                    if zk_read(client.exists_async, path) else []):
                if bookie_id == "readonly":
                    continue
                data, _ = zk_read(client.get_async, f"{path}/{bookie_id}")
                endpoints = [f"{p}://{h}:{port}" for _, h, port, p in decode_service_info(data)]
                out.emit({"type": "bookie", "bookieId": bookie_id, "state": state,
                          "endpoints": endpoints},
                         f"{bookie_id:<24} {state:<10} {' '.join(endpoints)}")
        return EXIT_OK
