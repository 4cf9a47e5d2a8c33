"""The cluster side of a bookie (docs/cluster.md): its cookie and registration in ZooKeeper
and GC from metadata (member.py), ZooKeeper state it owns (zookeeper.py: registration,
cookies, the cluster instance id; underreplication.py: autorecovery's markers, locks and
election), autorecovery (autorecovery/), ``bookie cluster`` (cli.py) and a local ZooKeeper
server for it and the tests (local_zookeeper.py). It builds on api/client, never on
api/server."""
