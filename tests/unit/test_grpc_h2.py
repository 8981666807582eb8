"""gRPC-over-HTTP/2 helpers (server/umadb/grpc_h2.py): status trailers and deadlines."""

from __future__ import annotations

import base64

import pytest

from tuffdb.server.umadb.grpc_h2 import parse_timeout, percent_encode, status_block


def test_grpc_message_is_percent_encoded_outside_printable_ascii() -> None:
    assert percent_encode("plain text: ok") == b"plain text: ok"
    assert percent_encode("100% sure") == b"100%25 sure"
    assert percent_encode("caf\u00e9\n") == b"caf%C3%A9%0A"


def test_status_block_base64_encodes_binary_trailers_without_padding() -> None:
    fields = status_block(9, "condition failed", ((b"grpc-status-details-bin", b"\x00\x01"),))
    assert fields[0] == (b"grpc-status", b"9")
    assert fields[1] == (b"grpc-message", b"condition failed")
    name, value = fields[2]
    assert name == b"grpc-status-details-bin"
    assert value == b"AAE"  # unpadded, as gRPC asks senders to emit
    assert base64.b64decode(value + b"=") == b"\x00\x01"
    assert status_block(0, "") == [(b"grpc-status", b"0")]


@pytest.mark.parametrize(("raw", "seconds"), [
    (b"1S", 1.0), (b"250m", 0.25), (b"3M", 180.0), (b"1H", 3600.0), (b"500u", 0.0005),
    (b"7n", 7e-9), (b"99999999m", 99999.999),
])
def test_grpc_timeout_units(raw: bytes, seconds: float) -> None:
    assert parse_timeout(raw) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", [b"", b"S", b"10", b"10x", b"123456789S", b"-1S", b"1.5S"])
def test_malformed_grpc_timeout_is_ignored(raw: bytes) -> None:
    assert parse_timeout(raw) is None
