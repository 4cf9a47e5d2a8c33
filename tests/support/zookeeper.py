"""The tests' real ZooKeeper: api/cluster/local_zookeeper.py, the same one `bookie cluster up` runs."""

from api.cluster.local_zookeeper import ZooKeeperServer, free_port, missing

__all__ = ["ZooKeeperServer", "free_port", "missing"]
