"""Apache BookKeeper's own wire protocol (docs/bookkeeper-protocol.md §3): the frame codecs
shared by the bookie's second listener and by clients (tests, interop). ``v2`` is the packed
binary protocol (``BookieProtocol``, Pulsar's default); ``v3`` is
``BookkeeperProtocol.proto``'s protobuf ``Request``/``Response``; ``status`` maps the
bookie's errors to both protocols' numbers.
Codecs only: no I/O, no bookie; the listener is the server's (api/server/)."""
