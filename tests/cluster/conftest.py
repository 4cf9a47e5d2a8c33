"""The cluster tests' fixtures (``zookeeper``, ``zk_uri``) live in tests/conftest.py, shared
with tests/deploy/ (a cluster bookie's metrics)."""
