"""``listunderreplicated``, ``decommission`` and ``autorecovery enable|disable|status``: the
operator's side of autorecovery (docs/cluster.md §4). These talk to ZooKeeper (and, for
decommission, wait on the cluster's replication workers), not to a data dir."""

from __future__ import annotations

import argparse
import sys
import time

from api.client.zookeeper import ZkMetadataStore, alive_bookies
from api.cluster.underreplication import Underreplication
from api.cluster.zookeeper import ZkCookies
from bookie.shell.cookie import zookeeper, zookeeper_options
from bookie.shell.output import EXIT_OK, Output

EXIT_PROBLEMS, EXIT_TIMEOUT = 1, 2


def register(commands, common: argparse.ArgumentParser) -> None:
    zk = zookeeper_options()
    listed = commands.add_parser(
        "listunderreplicated", parents=[common, zk],
        help="the ledgers marked under-replicated, with the bookies they miss",
        description="List every ledger the auditor or a replica check marked under-"
        "replicated (underreplication/ledgers/...): its missing replicas, when it was marked "
        "and which worker holds its lock. Exit 1 if any is marked.")
    listed.set_defaults(handler=list_underreplicated)
    decommission = commands.add_parser(
        "decommission", parents=[common, zk],
        help="move every copy off a bookie, then remove its cookie",
        description="Mark every ledger whose ensembles name BOOKIE_ID under-replicated, and "
        "wait (printing progress) while the replication workers copy its fragments to other "
        "bookies and replace it in the metadata; open ledgers on it are closed after "
        "open_ledger_rereplication_grace_period_s. When no ledger names it any more its "
        "cookie is deleted: the bookie can be stopped and its disks reused. The bookie may "
        "be running (its copies are read from it too) or gone. Needs autorecovery running "
        "somewhere (in the bookies by default, or 'bookie autorecovery'). Exit 2 on timeout.")
    decommission.add_argument("bookie_id", metavar="BOOKIE_ID", help="HOST:PORT")
    decommission.add_argument("--timeout-s", type=float, default=3600.0,
                              help="give up after this long (default 3600)")
    decommission.set_defaults(handler=decommission_bookie)
    switch = commands.add_parser(
        "autorecovery", parents=[common, zk], help="enable, disable or show autorecovery",
        description="'disable' stops the auditor from marking and the workers from taking "
        "ledgers (BookKeeper's underreplication/disable znode), e.g. during a planned "
        "restart of many bookies; 'enable' undoes it; 'status' shows the switch, the "
        "auditor, the lost-bookie delay in force and the marked ledgers' count. "
        "'set-delay N' stores lostBookieRecoveryDelay in ZooKeeper.")
    switch.add_argument("action", choices=("enable", "disable", "status", "set-delay"),
                        help="what to do (see above)")
    switch.add_argument("seconds", nargs="?", type=int, help="the delay, for set-delay")
    switch.set_defaults(handler=autorecovery_switch)


def list_underreplicated(args: argparse.Namespace, out: Output) -> int:
    with zookeeper(args.metadata_service_uri) as (client, root):
        ur = Underreplication(client, root)
        found = 0
        for ledger_id in ur.marked():
            marker = ur.marker(ledger_id)
            if marker is None:
                continue
            replicas, ctime_ms, _ = marker
            holder = ur.lock_holder(ledger_id)
            found += 1
            when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ctime_ms / 1000))
            out.emit({"type": "underreplicated", "ledgerId": ledger_id, "replicas": replicas,
                      "ctimeMs": ctime_ms, "lockedBy": holder},
                     f"{ledger_id:<12} missing {','.join(replicas) or '-'}  marked {when}Z"
                     + (f"  locked by {holder}" if holder else ""))
        if not args.json:
            out.text(f"{found} ledger(s) under-replicated")
        return EXIT_PROBLEMS if found else EXIT_OK


def decommission_bookie(args: argparse.Namespace, out: Output) -> int:
    bookie_id = args.bookie_id
    with zookeeper(args.metadata_service_uri) as (client, root):
        ur = Underreplication(client, root)
        ur.ensure()
        if ur.auditor() is None:
            out.error("no autorecovery process is running (no auditor vote): start the "
                      "bookies with autorecovery_daemon_enabled or run 'bookie autorecovery'")
        if not ur.enabled():
            out.error("autorecovery is disabled: 'bookie shell autorecovery enable' first")
        ur.set_decommissioning(bookie_id, True)
        store = ZkMetadataStore(args.metadata_service_uri, client=client).start()
        started = time.monotonic()
        first = None
        while True:
            ledgers = store.ledgers_naming(bookie_id)
            first = len(ledgers) if first is None else first
            for ledger_id in ledgers:
                ur.mark(ledger_id, [bookie_id])
            if not args.no_progress:
                print(f"decommission {bookie_id}: {len(ledgers)} of {first} ledger(s) still "
                      f"name it ({time.monotonic() - started:.0f} s)", file=sys.stderr,
                      flush=True)
            if not ledgers:
                break
            if time.monotonic() - started > args.timeout_s:
                out.error(f"decommission {bookie_id}: {len(ledgers)} ledger(s) still name it "
                          f"after {args.timeout_s:.0f} s: {ledgers[:20]}")
                return EXIT_TIMEOUT
            time.sleep(1.0)  # noqa: sleep-ok (progress poll of an operator command)
        cookie_deleted = ZkCookies(client, root).delete(bookie_id)
        ur.set_decommissioning(bookie_id, False)
        out.emit({"type": "decommissioned", "bookieId": bookie_id, "ledgers": first,
                  "cookieDeleted": cookie_deleted, "alive": bookie_id in alive_bookies(
                      client, root)},
                 f"decommissioned {bookie_id}: {first} ledger(s) moved off it; cookie "
                 f"{'deleted' if cookie_deleted else 'was absent'}")
        return EXIT_OK


def autorecovery_switch(args: argparse.Namespace, out: Output) -> int:
    with zookeeper(args.metadata_service_uri) as (client, root):
        ur = Underreplication(client, root)
        ur.ensure()
        if args.action in ("enable", "disable"):
            changed = ur.set_enabled(args.action == "enable")
            out.emit({"type": "autorecovery", "enabled": args.action == "enable",
                      "changed": changed},
                     f"autorecovery {args.action}d" + ("" if changed else " (already)"))
            return EXIT_OK
        if args.action == "set-delay":
            if args.seconds is None or args.seconds < 0:
                out.error("set-delay needs a number of seconds >= 0")
                return EXIT_TIMEOUT
            ur.set_lost_bookie_delay_s(args.seconds)
            out.emit({"type": "autorecovery", "lostBookieRecoveryDelay": args.seconds},
                     f"lostBookieRecoveryDelay = {args.seconds} s")
            return EXIT_OK
        status = {"enabled": ur.enabled(), "auditor": ur.auditor(),
                  "lostBookieRecoveryDelay": ur.lost_bookie_delay_s(),
                  "underreplicated": len(ur.marked()),
                  "replicasCheckCtimeMs": ur.replicas_check_ctime_ms(),
                  "decommissioning": sorted(ur.decommissioning())}
        out.emit({"type": "autorecovery", **status},
                 "\n".join(f"{key}: {value}" for key, value in status.items()))
        return EXIT_OK
