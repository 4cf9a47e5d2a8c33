"""BookKeeper's cluster-wide shell commands, under its names and flags: ``whatisinstanceid``,
``initnewcluster``, ``forceauditchecks`` (BookieShell's WhatIsInstanceId, InitNewCluster,
ForceAuditorChecksCmd). Settings and exit codes: bookie/shell/bk_settings.py (BS1-BS3).

The Pulsar helm chart's init containers loop on ``whatisinstanceid`` until it exits 0 and its
cluster-initialize job runs ``initnewcluster`` only when it does not, so:

    BK1. ``whatisinstanceid`` exits 0 only when ``<root>/INSTANCEID`` exists, printing
         BookKeeper's line ``Metadata Service Uri: URI InstanceId: ID``. No root, no
         INSTANCEID or no answer from ZooKeeper: 255. (BookKeeper prints ``InstanceId:
         null`` and exits 0 for a root without INSTANCEID; here that tree is "not
         initialised", and ``initnewcluster`` initialises it.)
    BK2. ``initnewcluster`` creates INSTANCEID once (ZK4): exit 0 with BookKeeper's
         "Successfully initiated cluster" line, or 1 with its "Ledger root path: ROOT already
         exists" when the tree already has an instance id.
"""

from __future__ import annotations

import argparse
import time

from api.client.zookeeper import ZkMetadataStore, parse_uri
from api.cluster.underreplication import Underreplication
from api.cluster.zookeeper import cluster_instance_id, init_new_cluster, tree_exists
from bookie.shell.bk_settings import (EXIT_BK_FALSE, add, failure, metadata_uri, settings)
from bookie.shell.cookie import zookeeper
from bookie.shell.output import EXIT_OK, Output

#: BookKeeper's forceauditchecks moves a check's last run this far back (21 days).
FORCE_BACK_MS = 21 * 24 * 3600 * 1000
#: flag -> (BookKeeper's long flag, the znode under underreplication/, what it forces)
_CHECKS = {"calc": ("checkallledgerscheck", "checkallledgersctime", "CheckAllLedgers"),
           "ppc": ("placementpolicycheck", "placementpolicycheckctime", "PlacementPolicyCheck"),
           "rc": ("replicascheck", "replicascheckctime", "ReplicasCheck")}


def register(commands, common: argparse.ArgumentParser) -> None:
    add(commands, "whatisinstanceid", what_is_instance_id,
        "print the cluster's instance id (BookKeeper's name)",
        "Print 'Metadata Service Uri: URI InstanceId: ID' from <root>/INSTANCEID. Exit 0 if "
        "the cluster is initialised, 255 if it is not or ZooKeeper does not answer.")
    add(commands, "initnewcluster", init_cluster,
        "create the cluster's INSTANCEID (BookKeeper's name; bookie cluster init)",
        "Create <root>, <root>/available/readonly, <root>/INSTANCEID (a new UUID) and the "
        "ledger layout. Exit 1 if the cluster already has an instance id.")
    checks = add(commands, "forceauditchecks", force_audit_checks,
                 "make the auditor run its periodic checks soon (BookKeeper's name)",
                 "Move the last run of the chosen auditor checks 21 days back in ZooKeeper "
                 "(BookKeeper's znodes). This project's auditor reads replicascheckctime "
                 "every round, so -rc takes effect without a restart; it audits every ledger "
                 "every round anyway (-calc) and schedules placement checks in-process "
                 "(-ppc: effective for BookKeeper's auditors, which must be restarted).")
    for short, (long, _, _) in _CHECKS.items():
        checks.add_argument(f"-{short}", f"--{long}", dest=short, action="store_true",
                            help=f"force the {long} check")


def what_is_instance_id(args: argparse.Namespace, out: Output) -> int:
    uri = metadata_uri(settings(args, zookeeper_only=True))
    with zookeeper(uri) as (client, root):
        if not tree_exists(client, root):  # BookKeeper's words
            return failure(f"BookKeeper metadata doesn't exist in ZooKeeper ({uri}). Has the "
                           f"cluster been initialized? Try running bookkeeper shell "
                           f"initnewcluster")
        instance = cluster_instance_id(client, root)
    if instance is None:  # BK1
        return failure(f"INSTANCEID does not exist in ZooKeeper ({uri}): the cluster is not "
                       f"initialised. Try running bookkeeper shell initnewcluster")
    out.emit({"type": "instanceid", "metadataServiceUri": uri, "instanceId": instance},
             f"Metadata Service Uri: {uri} InstanceId: {instance}")
    return EXIT_OK


def init_cluster(args: argparse.Namespace, out: Output) -> int:
    uri = metadata_uri(settings(args, zookeeper_only=True))
    hosts, root = parse_uri(uri)
    out.text(f"Initializing ZooKeeper metadata for new cluster, ZKServers: {hosts} ledger "
             f"root path: {root}")
    with zookeeper(uri) as (client, root):
        instance, created = init_new_cluster(client, root)
        if not created:  # BK2
            return failure(f"Ledger root path: {root} already exists (instance {instance})",
                           EXIT_BK_FALSE)
        ZkMetadataStore(uri, client=client).start()  # the LAYOUT znode, as BookKeeper's
    out.emit({"type": "initnewcluster", "metadataServiceUri": uri, "instanceId": instance},
             f"Successfully initiated cluster. ZKServers: {hosts} ledger root path: {root} "
             f"instanceId: {instance}")
    return EXIT_OK


def force_audit_checks(args: argparse.Namespace, out: Output) -> int:
    chosen = [short for short in _CHECKS if getattr(args, short)]
    if not chosen:
        return failure("Command line args must contain atleast one type of check. This was "
                       "a no-op.")
    uri = metadata_uri(settings(args, zookeeper_only=True))
    ctime_ms = int(time.time() * 1000) - FORCE_BACK_MS
    with zookeeper(uri) as (client, root):
        ur = Underreplication(client, root)
        for short in chosen:
            _, znode, name = _CHECKS[short]
            ur.set_check_ctime_ms(znode, ctime_ms)
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ctime_ms / 1000))
            out.emit({"type": "forceauditcheck", "check": name, "ctimeMs": ctime_ms},
                     f"Resetting {name}CTime to : {when}Z")
    return EXIT_OK
