"""The ekoDB face's HTTP/1.1 protocol object: requests parsed from any split of the bytes
(a message's state is reset when the previous one completes), a declared body over the
limit refused before any of it arrives, and the bearer-token check of the app."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from tuffdb.server.ekodb.proto import HttpProtocol, Request, Response

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import App, Transport  # noqa: E402


def _conn(max_body: int = 1 << 20) -> tuple[HttpProtocol, Transport, list[Request]]:
    seen: list[Request] = []

    def handler(req: Request) -> Response:
        seen.append(req)
        return Response(200, b"{}")

    proto = HttpProtocol(handler, max_body=max_body)
    t = Transport()
    proto.connection_made(t)  # type: ignore[arg-type]
    return proto, t, seen


Parsed = tuple[str, bytes, dict[str, str], bytes]  # method, url, headers, body


def _requests(rng: random.Random, n: int) -> tuple[bytes, list[Parsed]]:
    wire, want = [], []
    for i in range(n):
        method = rng.choice(["GET", "PUT", "POST", "DELETE", "PATCH"])
        url = f"/api/x{i}/{'y' * rng.randrange(40)}?q={i}".encode()
        body = bytes(rng.randrange(97, 123) for _ in range(rng.randrange(0, 300))) \
            if method != "GET" else b""
        headers = {"host": "h", f"x-h{i % 3}": f"v{i}", "authorization": f"Bearer t{i}"}
        head = "".join(f"{k.title()}: {v}\r\n" for k, v in headers.items())
        if body:
            head += f"Content-Length: {len(body)}\r\n"
            headers["content-length"] = str(len(body))
        wire.append(f"{method} ".encode() + url + b" HTTP/1.1\r\n" + head.encode() + b"\r\n" + body)
        want.append((method, url, headers, body))
    return b"".join(wire), want


@pytest.mark.parametrize("seed", range(6))
def test_requests_parse_the_same_however_the_bytes_are_split(seed: int) -> None:
    rng = random.Random(seed)
    data, want = _requests(rng, 40)
    proto, t, seen = _conn()
    pos = 0
    while pos < len(data):  # pieces of 1 byte up to a few requests
        step = rng.choice([1, 2, 7, 50, 400, 3000])
        proto.data_received(data[pos:pos + step])
        pos += step
    assert [(r.method, r.url, r.headers, r.body) for r in seen] == want
    assert len(t.out) == 40 and not t.closed


def test_a_declared_body_over_the_limit_is_refused_before_it_arrives() -> None:
    proto, t, seen = _conn(max_body=1000)
    proto.data_received(b"PUT /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\n")
    assert seen == []
    assert len(t.out) == 1 and t.out[0].startswith(b"HTTP/1.1 413 ")
    assert t.closed
    proto.data_received(b"x" * 1001)  # what follows is dropped, not parsed
    assert seen == [] and len(t.out) == 1


def test_a_body_at_the_limit_is_taken() -> None:
    proto, t, seen = _conn(max_body=1000)
    proto.data_received(b"PUT /a HTTP/1.1\r\nHost: h\r\ncontent-length: 1000\r\n\r\n" + b"x" * 1000)
    assert [r.body for r in seen] == [b"x" * 1000]
    assert t.out[0].startswith(b"HTTP/1.1 200 ") and not t.closed


def test_bearer_tokens_by_any_case_of_the_scheme_and_nothing_else(tmp_path: Path) -> None:
    app = App(tmp_path)
    try:
        def status(auth: str | None) -> int:
            headers = {} if auth is None else {"authorization": auth}
            resp = app.app.handle(Request("POST", b"/api/find/c", headers, b"{}"))
            assert isinstance(resp, Response)
            return resp.status

        assert status(f"Bearer {app.token}") == 200
        assert status(f"bearer {app.token}") == 200  # a second form of the same token
        assert status(f"BEARER  {app.token} ") == 200
        assert status(f"Basic {app.token}") == 401
        assert status(app.token) == 401
        assert status(None) == 401
        assert status(f"Bearer {app.token[:-2]}") == 401
        assert status(f"Bearer {app.token}") == 200  # still cached, still good
    finally:
        app.close()
