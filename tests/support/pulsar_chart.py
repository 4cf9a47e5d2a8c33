"""What the Pulsar helm chart gives a bookie pod, as environment variables: the keys of its
bookkeeper configmap (apache/pulsar-helm-chart, charts/pulsar/templates/bookkeeper-configmap.
yaml and _bookkeeper.tpl's ``pulsar.bookkeeper.config.common``, with values.yaml's
``bookkeeper.configData`` defaults), for a chart with ZooKeeper, a separate autorecovery and
persistent volumes. The pod's entrypoint runs ``bin/apply-config-from-env.py
conf/bookkeeper.conf`` with these in its environment (deploy/pulsar/, tests/deploy/)."""

from __future__ import annotations

import pathlib
import urllib.error
import urllib.request

#: The chart's own scripts, verbatim but for the Java-only and TLS lines (tests/deploy/
#: test_pulsar_entrypoint.py and scripts/demo/pulsar_image_check.py run them).
#: bookkeeper-cluster-initialize.yaml's script (the job's `timeout 60 sh -c`).
INIT_JOB = """\
bin/apply-config-from-env.py conf/bookkeeper.conf;
export BOOKIE_MEM="-Xmx128M";
if timeout 15 bin/bookkeeper shell whatisinstanceid; then
    echo "bookkeeper cluster already initialized";
else
    bin/pulsar zookeeper-shell -server {zk} create {prefix} && echo 'created for pulsar cluster "test"' &&
    bin/bookkeeper shell initnewcluster;
fi
"""
#: _bookkeeper.tpl pulsar.bookkeeper.init.verify_cluster_id, persistent volumes.
VERIFY_CLUSTER_ID = """\
set -e;
bin/apply-config-from-env.py conf/bookkeeper.conf;
export BOOKIE_MEM="-Xmx128M";
until timeout 15 bin/bookkeeper shell whatisinstanceid; do
  sleep 3;
done;
"""
#: bookkeeper-statefulset.yaml's main container (no bin/update-rocksdb-conf-from-env.py in
#: the image, so the chart takes its else branch).
MAIN = """\
export PULSAR_PREFIX_defaultRocksdbConf=${PULSAR_PREFIX_defaultRocksdbConf:-conf/default_rocksdb.conf}
export PULSAR_PREFIX_entryLocationRocksdbConf=${PULSAR_PREFIX_entryLocationRocksdbConf:-conf/entry_location_rocksdb.conf}
export PULSAR_PREFIX_ledgerMetadataRocksdbConf=${PULSAR_PREFIX_ledgerMetadataRocksdbConf:-conf/ledger_metadata_rocksdb.conf}
if [ -x bin/update-rocksdb-conf-from-env.py ] && [ -f "${PULSAR_PREFIX_entryLocationRocksdbConf}" ]; then
  echo "Updating ${PULSAR_PREFIX_entryLocationRocksdbConf} from environment variables starting with dbStorage_rocksDB_*"
  bin/update-rocksdb-conf-from-env.py "${PULSAR_PREFIX_entryLocationRocksdbConf}"
else
  export PULSAR_PREFIX_defaultRocksdbConf=conf/non_existing_default_rocksdb.conf
  export PULSAR_PREFIX_entryLocationRocksdbConf=conf/non_existing_entry_location_rocksdb.conf
  export PULSAR_PREFIX_ledgerMetadataRocksdbConf=conf/non_existing_ledger_metadata_rocksdb.conf
  export PULSAR_PREFIX_dbStorage_rocksDB_format_version=${PULSAR_PREFIX_dbStorage_rocksDB_format_version:-5}
fi
bin/apply-config-from-env.py conf/bookkeeper.conf;
OPTS="${OPTS} -Dlog4j2.formatMsgNoLookups=true" exec bin/pulsar bookie;
"""

PULSAR_CONF = pathlib.Path(__file__).resolve().parents[1] / "data" / "pulsar_bookkeeper.conf"


def chart_environment(zk_hosts: str, prefix: str = "/pulsar", http_port: int = 8000,
                      root: str = "/pulsar/data/bookkeeper",
                      index_dir: str | None = None) -> dict[str, str]:
    """The configmap's variables, with ZooKeeper, the metadata prefix, the http port and the
    data volumes' mount points as parameters (a test points them at its own)."""
    env = {
        # pulsar.bookkeeper.config.common
        "zkServers": "", "zkLedgersRootPath": "",
        "metadataServiceUri": f"zk+hierarchical://{zk_hosts}{prefix}/ledgers",
        "httpServerEnabled": "true", "httpServerPort": str(http_port),
        "useHostNameAsBookieID": "true",
        # the configmap's own keys
        "autoRecoveryDaemonEnabled": "false", "journalMaxBackups": "0",
        "journalDirectories": f"{root}/journal",
        "PULSAR_PREFIX_journalDirectories": f"{root}/journal",
        "ledgerDirectories": f"{root}/ledgers",
        # values.yaml bookkeeper.configData
        "PULSAR_MEM": "-Xms128m -Xmx256m -XX:MaxDirectMemorySize=256m",
        "PULSAR_GC": "-XX:+UseZGC -XX:+ZGenerational -XX:+ExitOnOutOfMemoryError",
        "minorCompactionThreshold": "0.2", "minorCompactionInterval": "360",
        "majorCompactionThreshold": "0.8", "majorCompactionInterval": "10800",
        "gcWaitTime": "300000", "isForceGCAllowWhenNoSpace": "true",
        "PULSAR_PREFIX_entryLocationCompactionInterval": "86400",
        "diskUsageLwmThreshold": "0.85", "diskUsageWarnThreshold": "0.9",
        "diskUsageThreshold": "0.95", "diskCheckInterval": "1800",
        # bookkeeper-statefulset.yaml exports these before it starts the bookie
        "PULSAR_PREFIX_defaultRocksdbConf": "conf/non_existing_default_rocksdb.conf",
        "PULSAR_PREFIX_entryLocationRocksdbConf":
            "conf/non_existing_entry_location_rocksdb.conf",
        "PULSAR_PREFIX_ledgerMetadataRocksdbConf":
            "conf/non_existing_ledger_metadata_rocksdb.conf",
        "PULSAR_PREFIX_dbStorage_rocksDB_format_version": "5",
    }
    if index_dir is not None:  # bookkeeper.volumes.index.enabled
        env["indexDirectories"] = index_dir
    return env


def chart_tls_environment(cert: str, key: str, ca: str) -> dict[str, str]:
    """pulsar.bookkeeper.config.tls, with tls.enabled and tls.bookie.enabled."""
    return {"PULSAR_PREFIX_tlsProviderFactoryClass": "org.apache.bookkeeper.tls.TLSContextFactory",
            "PULSAR_PREFIX_tlsCertificatePath": cert,
            "PULSAR_PREFIX_tlsKeyStoreType": "PEM", "PULSAR_PREFIX_tlsKeyStore": key,
            "PULSAR_PREFIX_tlsTrustStoreType": "PEM", "PULSAR_PREFIX_tlsTrustStore": ca,
            "PULSAR_PREFIX_tlsCertFilesRefreshDurationSeconds": "300"}


def probe(url: str) -> tuple[int, bytes]:
    """An HTTP GET as the kubelet's probe makes it: (status, body); (0, b"") when nothing
    answers (not yet listening)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""
