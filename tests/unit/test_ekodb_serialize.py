"""The HTTP reply bytes: the common reply's shortcut writes exactly what the general
path writes."""

from __future__ import annotations

import pytest

from tuffdb.server.ekodb.proto import GZIP_MIN_BYTES, Response, serialize


def _expected(status: str, ctype: str, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


@pytest.mark.parametrize("body", [b"", b'{"a":1}', b"x" * (GZIP_MIN_BYTES + 10)])
def test_ok_json_reply_bytes(body: bytes) -> None:
    got = serialize(Response(200, body), keep_alive=True, gzip_ok=False)
    assert got == _expected("200 OK", "application/json", body)


def test_replies_off_the_shortcut_keep_their_headers() -> None:
    r = Response(200, b"{}", headers=[("X-RateLimit-Limit", "5")])
    assert serialize(r, keep_alive=True, gzip_ok=False) == _expected(
        "200 OK", "application/json", b"{}", "X-RateLimit-Limit: 5\r\n")
    assert serialize(Response(200, b"{}"), keep_alive=False, gzip_ok=False) == _expected(
        "200 OK", "application/json", b"{}", "Connection: close\r\n")
    mp = Response(200, b"\x80", "application/msgpack")
    assert serialize(mp, keep_alive=True, gzip_ok=False) == _expected(
        "200 OK", "application/msgpack", b"\x80")
    assert serialize(Response(404, b"{}"), keep_alive=True, gzip_ok=False).startswith(
        b"HTTP/1.1 404 ")
    big = serialize(Response(200, b"x" * (GZIP_MIN_BYTES + 10)), keep_alive=True, gzip_ok=True)
    assert b"Content-Encoding: gzip\r\n" in big
