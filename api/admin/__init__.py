"""Apache BookKeeper's admin REST API (its ``httpServerPort``) on a listener of its own,
``admin_port`` (docs/admin-api.md): BookKeeper's paths, methods, status codes and JSON field
names, each answered by what this bookie already does (``bookie.node.Bookie``, the
cluster's ZooKeeper tree through api/cluster and api/client).

It is the fourth room of api/ (docs/design.md §5): it may import server/, client/ and
cluster/; none of them imports it, and only the composition root (bookie/cli.py) does.
The /v1 API (api/server) is untouched by it.
"""
