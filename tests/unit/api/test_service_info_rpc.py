"""A bookie that speaks BookKeeper's protocol registers it as BookKeeper's bookies do
(docs/bookkeeper-protocol.md §2): the http endpoint first, for this project's clients, then
id ``bookie`` with protocol ``bookie-rpc``, the one DefaultBookieAddressResolver picks."""

from api.client.metadata_format import decode_service_info, encode_service_info


def test_the_rpc_endpoint_follows_the_http_one():
    data = encode_service_info("127.0.0.1", 4181, rpc_port=3181)
    assert decode_service_info(data) == [("http", "127.0.0.1", 4181, "http"),
                                         ("bookie", "127.0.0.1", 3181, "bookie-rpc")]
    tls = encode_service_info("127.0.0.1", 4181, tls=True, rpc_port=3181)
    assert decode_service_info(tls)[0] == ("http", "127.0.0.1", 4181, "https")


def test_without_the_listener_only_http_is_registered():
    assert decode_service_info(encode_service_info("127.0.0.1", 4181)) == [
        ("http", "127.0.0.1", 4181, "http")]
