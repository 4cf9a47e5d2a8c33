"""The metadata service URIs an operator of BookKeeper 4.18 or Pulsar writes for a ZooKeeper
cluster (api/client/metadata_uri.py MU1, MU2), and clear refusals for the rest."""

from __future__ import annotations

import argparse

import pytest

from api.client.cli_replicated import cluster_uri
from api.client.metadata import FileMetadataStore
from api.client.metadata_service import open_metadata_store
from api.client.zookeeper import ZkMetadataStore, parse_uri


@pytest.mark.parametrize("uri, hosts, root", [
    ("zk://127.0.0.1:2181/ledgers", "127.0.0.1:2181", "/ledgers"),
    ("zk://zk1:2181,zk2:2182/a/b/ledgers/", "zk1:2181,zk2:2182", "/a/b/ledgers"),
    ("zk://zk1:2181;zk2:2182/ledgers", "zk1:2181,zk2:2182", "/ledgers"),  # BookKeeper's ;
    ("zk://zk1:2181", "zk1:2181", "/ledgers"),
    ("zk+hierarchical://zk1:2181/ledgers", "zk1:2181", "/ledgers"),
    ("ZK+Hierarchical://zk1:2181/ledgers", "zk1:2181", "/ledgers"),  # Java lower-cases it
    ("zk+null://zk1:2181;zk2:2181/pulsar/ledgers", "zk1:2181,zk2:2181", "/pulsar/ledgers"),
    ("metadata-store:zk:127.0.0.1:2181/ledgers", "127.0.0.1:2181", "/ledgers"),
    ("metadata-store:zk:zk1:2181,zk2:2181/ledgers", "zk1:2181,zk2:2181", "/ledgers"),
    ("metadata-store:zk:zk1:2181;zk2:2181/ledgers", "zk1:2181,zk2:2181", "/ledgers"),
    ("metadata-store:zk:zk1:2181", "zk1:2181", "/ledgers"),  # MU2: /ledgers all the same
])
def test_the_forms_bookkeeper_and_pulsar_accept(uri, hosts, root):
    assert parse_uri(uri) == (hosts, root)


@pytest.mark.parametrize("uri, said", [
    ("zk+flat://zk1:2181/ledgers", "flat ledger layout"),
    ("zk+longhierarchical://zk1:2181/ledgers", "longhierarchical ledger layout"),
    ("zk+ms://zk1:2181/ledgers", "ms ledger layout"),
    ("zk+tree://zk1:2181/ledgers", "unknown ledger layout 'tree'"),
    ("etcd://etcd1:2379/ledgers", "not a ZooKeeper one"),
    ("http://zk1:2181/ledgers", "not a ZooKeeper one"),
    ("zk:///ledgers", "use zk://HOST:PORT"),
    ("zk://zk1:2181/ledgers?x=1", "use zk://HOST:PORT"),
    ("zk://zk1:port/ledgers", "no host:port list"),
    ("metadata-store:etcd:http://etcd1:2379", "only ZooKeeper's"),
    ("metadata-store:oxia://oxia1:6648/bookkeeper", "only ZooKeeper's"),
    ("metadata-store:zk://zk1:2181/ledgers", "only ZooKeeper's"),
    ("metadata-store:zk:zk1:2181/pulsar/ledgers", "for another root write "
                                                  "zk://zk1:2181/pulsar/ledgers"),
    ("metadata-store:zk:zk1:2181/ledgers?sessionTimeoutMillis=1", "parameters"),
    ("metadata-store:zk:/ledgers", "no host:port list"),
])
def test_other_uris_are_refused_saying_why(uri, said):
    with pytest.raises(ValueError) as refused:
        parse_uri(uri)
    assert said in str(refused.value) and repr(uri) in str(refused.value)


@pytest.mark.parametrize("uri", ["metadata-store:zk:127.0.0.1:2181/ledgers",
                                 "zk+null://127.0.0.1:2181/ledgers"])
def test_every_reader_of_the_uri_takes_pulsars_and_bookkeepers_forms(uri):
    """The CLI's --metadata-service-uri and the metadata store factory go through parse_uri
    (a client is made, never started: no ZooKeeper needed)."""
    store = open_metadata_store(uri)
    assert isinstance(store, ZkMetadataStore)
    assert (store.hosts, store.root) == ("127.0.0.1:2181", "/ledgers")
    assert cluster_uri(argparse.Namespace(metadata_service_uri=uri)) == uri
    with pytest.raises(ValueError, match="flat ledger layout"):
        open_metadata_store("zk+flat://127.0.0.1:2181/ledgers")
    assert isinstance(open_metadata_store("file:///tmp/ledgers.json"), FileMetadataStore)
