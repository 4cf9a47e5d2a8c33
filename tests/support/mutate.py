"""Byte mutations drawn by hypothesis, for hand-written decoders held to a reference
(the v3 hot paths against protobuf): bits flipped, tails cut, bytes inserted."""

from __future__ import annotations

from hypothesis import strategies as st


def mutated(packet: bytes, data) -> bytes:
    """``packet`` after 1-4 mutations drawn from ``data`` (hypothesis's ``st.data()``)."""
    bent = bytearray(packet)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, max(0, len(bent) - 1)))
        if kind == "flip" and bent:
            bent[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "cut":
            del bent[at:]
        else:
            bent[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    return bytes(bent)
