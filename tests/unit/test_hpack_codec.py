"""HPACK decoding (server/umadb/hpack_codec.py) against RFC 7541 Appendix C, and its errors."""

from __future__ import annotations

import pytest

from tuffdb.server.umadb import hpack_codec
from tuffdb.server.umadb.hpack_codec import Decoder, HPACKError, encode

# RFC 7541 C.3 (no Huffman) and C.4 (Huffman): three requests on one connection.
REQUESTS = [
    ("828684410f7777772e6578616d706c652e636f6d", "828684418cf1e3c2e5f23a6ba0ab90f4ff",
     [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"),
      (b":authority", b"www.example.com")]),
    ("828684be58086e6f2d6361636865", "828684be5886a8eb10649cbf",
     [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"),
      (b":authority", b"www.example.com"), (b"cache-control", b"no-cache")]),
    ("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
     "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
     [(b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/index.html"),
      (b":authority", b"www.example.com"), (b"custom-key", b"custom-value")]),
]


@pytest.mark.parametrize("huffman", [False, True], ids=["plain", "huffman"])
def test_rfc7541_request_sequence_decodes_and_keeps_the_dynamic_table(huffman: bool) -> None:
    d = Decoder()
    for plain, huff, want in REQUESTS:
        assert list(d.decode(bytes.fromhex(huff if huffman else plain))) == want
    # After C.3.3 / C.4.3 the table holds custom-key, cache-control, :authority (newest first).
    assert d.table == [(b"custom-key", b"custom-value"), (b"cache-control", b"no-cache"),
                       (b":authority", b"www.example.com")]
    assert d.size == 164


def test_a_repeated_block_is_cached_only_while_the_table_is_unchanged() -> None:
    d = Decoder()
    first = bytes.fromhex(REQUESTS[0][0])
    d.decode(first)  # inserts :authority
    indexed = bytes.fromhex("828684be")  # refers to dynamic entry 62
    assert d.decode(indexed)[-1] == (b":authority", b"www.example.com")
    d.decode(bytes.fromhex("400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))  # insert
    # entry 62 is now custom-key: the cached answer for the same bytes must not be reused
    assert d.decode(indexed)[-1] == (b"custom-key", b"custom-value")


def test_table_size_update_evicts_and_bounds() -> None:
    d = Decoder()
    d.decode(bytes.fromhex(REQUESTS[0][0]))
    assert d.table
    d.decode(bytes.fromhex("20"))  # size update to 0: everything evicted
    assert d.table == [] and d.size == 0
    with pytest.raises(HPACKError, match="above the advertised"):
        d.decode(bytes.fromhex("3fe21f"))  # 4097 > the 4096 we advertised


@pytest.mark.parametrize(("block", "why"), [
    ("80", "index 0"),
    ("bf", "beyond the table"),  # dynamic index 63 with an empty table
    ("410f7777", "past the header block"),  # string shorter than its length
    ("8220", "after a header field"),  # size update after a field
    ("ff", "bad header block"),  # integer cut short
])
def test_malformed_blocks_raise_hpack_error(block: str, why: str) -> None:
    with pytest.raises(HPACKError, match=why):
        Decoder().decode(bytes.fromhex(block))


def test_encode_round_trips_through_the_decoder_without_touching_its_table() -> None:
    fields = [(b":status", b"200"), (b"content-type", b"application/grpc"),
              (b"grpc-status", b"3"), (b"grpc-message", b"x" * 300)]
    d = Decoder()
    assert list(d.decode(encode(fields))) == fields
    assert d.table == []
    assert hpack_codec.STATIC[7] == (b":status", b"200")
