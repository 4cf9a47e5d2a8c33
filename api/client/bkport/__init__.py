"""Bookies over Apache BookKeeper's own protocol (docs/ledger_client.md, "Transports"):
``connection.py`` one pipelined v3 connection per bookie (KC1-KC5), ``errors.py`` v3
statuses as the bookie's error classes, ``client.py`` ``BkBookieClient`` (the calls of
``BookieClient`` the replicated client makes), ``transport.py`` ``ProtocolTransport``
(which transport each bookie gets). The frames are api/bkproto/'s codecs."""
