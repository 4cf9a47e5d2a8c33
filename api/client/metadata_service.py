"""``metadata_service_uri`` -> a LedgerMetadataStore (docs/cluster.md §1).

    file:///path/ledgers.json, or a plain path     FileMetadataStore (one host)
    zk://host:port[,host:port...]/root             ZkMetadataStore (also zk+hierarchical://,
    metadata-store:zk:host:port/ledgers            zk+null:// and Pulsar's form: metadata_uri.py)
"""

from __future__ import annotations

import urllib.parse

from api.client.metadata import FileMetadataStore
from api.client.metadata_uri import is_zookeeper


def open_metadata_store(uri: str):
    scheme = urllib.parse.urlsplit(uri).scheme
    if is_zookeeper(uri):  # ZkMetadataStore's parse_uri accepts it or says why not
        from api.client.zookeeper import ZkMetadataStore  # noqa: PLC0415 (kazoo: only then)

        return ZkMetadataStore(uri)
    if scheme == "file":
        return FileMetadataStore(urllib.parse.urlsplit(uri).path)
    if scheme == "":
        return FileMetadataStore(uri)
    raise ValueError(f"metadata service URI {uri!r}: scheme {scheme!r} is not file or zk")
