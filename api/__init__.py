"""The bookie's network side, in three rooms (docs/design.md §5):

    server/   the HTTP server over a bookie.node.Bookie
    client/   the client library: BookieClient, single-bookie and replicated ledgers, the
              metadata stores (file://, zk://) and their formats
    cluster/  the cluster side of a bookie: registration, cookies, GC from metadata,
              autorecovery, ``bookie cluster``, a local ZooKeeper

and ``wire.py``, the batch body format that server and client share. The only aiohttp
importer of the product.
"""
