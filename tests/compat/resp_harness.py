"""Shared pieces of the differential RESP tests: a raw client that returns each reply's
exact bytes, a parser for those bytes, and the comparison of a command script run on
tuffdb and on a real redis-server.

Replies Redis leaves unordered (SMEMBERS, HGETALL, SINTER...) are compared as sorted
collections; everything else byte for byte (README of the spec: redis-types.md §5.3).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tuffdb.server.resp._process import redis_server_path, start_redis, start_tuffdb

NEEDS_REDIS = pytest.mark.skipif(
    redis_server_path() is None,
    reason="redis-server is not installed (apt-get install redis-server; dev.py does it)")

# Commands whose reply (or its nested arrays) Redis returns in no particular order.
UNORDERED_TOP = frozenset({
    "SMEMBERS", "SINTER", "SUNION", "SDIFF", "HGETALL", "HKEYS", "HVALS", "KEYS",
})


class RawClient:
    """Sends commands as multibulk and returns each reply's exact bytes."""

    def __init__(self, port: int, timeout: float = 30) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line_end(self, pos: int) -> int:
        while (end := self.buf.find(b"\r\n", pos)) < 0:
            self._fill()
        return end

    def _frame_end(self, pos: int) -> int:
        end = self._line_end(pos)
        kind, head = self.buf[pos : pos + 1], self.buf[pos + 1 : end]
        if kind in b"$=!" and head != b"-1":
            stop = end + 2 + int(head) + 2
            while len(self.buf) < stop:
                self._fill()
            return stop
        if kind in b"*~>%" and head != b"-1":
            n = int(head) * (2 if kind == b"%" else 1)
            pos = end + 2
            for _ in range(n):
                pos = self._frame_end(pos)
            return pos
        return end + 2

    def send(self, *args: bytes | str) -> None:
        parts = [a.encode() if isinstance(a, str) else a for a in args]
        self.sock.sendall(b"*%d\r\n" % len(parts)
                          + b"".join(b"$%d\r\n%b\r\n" % (len(p), p) for p in parts))

    def read(self) -> bytes:
        end = self._frame_end(0)
        out, self.buf = self.buf[:end], self.buf[end:]
        return out

    def call(self, *args: bytes | str) -> bytes:
        self.send(*args)
        return self.read()


def parse(raw: bytes) -> Any:
    """One RESP2/RESP3 reply as nested Python values: ("err", line), ("status", line),
    ("int", n), ("null",), ("double", text), ("bool", b), bytes for bulks, and
    ("array"|"set"|"push", [items]) / ("map", [(k, v)]) for aggregates."""
    value, end = _parse(raw, 0)
    assert end == len(raw), f"trailing bytes after a reply: {raw!r}"
    return value


def _parse(raw: bytes, pos: int) -> tuple[Any, int]:  # noqa: PLR0911
    end = raw.index(b"\r\n", pos)
    kind, head = raw[pos : pos + 1], raw[pos + 1 : end]
    nxt = end + 2
    if kind == b"+":
        return ("status", head), nxt
    if kind == b"-":
        return ("err", head), nxt
    if kind == b":":
        return ("int", int(head)), nxt
    if kind == b"_":
        return ("null",), nxt
    if kind == b",":
        return ("double", head), nxt
    if kind == b"(":
        return ("big-number", head), nxt
    if kind == b"#":
        return ("bool", head == b"t"), nxt
    if kind in b"$=":
        if head == b"-1":
            return ("null",), nxt
        n = int(head)
        return raw[nxt : nxt + n], nxt + n + 2
    if kind in b"*~>":
        if head == b"-1":
            return ("null-array",), nxt
        items = []
        for _ in range(int(head)):
            item, nxt = _parse(raw, nxt)
            items.append(item)
        name = {b"*": "array", b"~": "set", b">": "push"}[kind]
        return (name, items), nxt
    if kind == b"%":
        pairs = []
        for _ in range(int(head)):
            k, nxt = _parse(raw, nxt)
            v, nxt = _parse(raw, nxt)
            pairs.append((k, v))
        return ("map", pairs), nxt
    raise AssertionError(f"unknown reply type {kind!r} in {raw!r}")


def _sort_key(x: Any) -> str:
    return repr(x)


def normalise(cmd: tuple[str, ...], raw: bytes) -> Any:
    """The reply with the order Redis does not promise taken out."""
    name = cmd[0].upper()
    value = parse(raw)
    if name in UNORDERED_TOP and isinstance(value, tuple) and value[0] in ("array", "set"):
        if name == "HGETALL" and value[0] == "array":  # RESP2: a flat field/value list
            items = value[1]
            pairs = sorted(zip(items[::2], items[1::2], strict=True), key=_sort_key)
            return ("hash-pairs", pairs)
        return (value[0], sorted(value[1], key=_sort_key))
    if name == "HGETALL" and isinstance(value, tuple) and value[0] == "map":
        return ("map", sorted(value[1], key=_sort_key))
    if name in ("SPOP", "SRANDMEMBER") and len(cmd) > 2 and isinstance(value, tuple) \
            and value[0] in ("array", "set"):  # noqa: PLR2004
        return (value[0], sorted(value[1], key=_sort_key))
    return value


def run_script(port: int, script: list[tuple[str, ...]]) -> list[bytes]:
    c = RawClient(port)
    try:
        c.call("FLUSHALL")
        return [c.call(*cmd) for cmd in script]
    finally:
        c.close()


def compare(servers: tuple[int, int], script: list[tuple[str, ...]], *,
            exact: bool = False) -> None:
    """Run ``script`` on both servers (fresh keyspace) and compare each reply, byte for
    byte with ``exact``, else after :func:`normalise`."""
    # The two servers run the script one after the other, so a reply that depends on the
    # wall clock (TTL after an absolute EXPIREAT) may not appear in a script: it would
    # differ by one whenever the two runs straddle a rounding boundary.
    ours = run_script(servers[0], script)
    theirs = run_script(servers[1], script)
    for cmd, a, b in zip(script, ours, theirs, strict=True):
        if cmd[0] == "HELLO" and a[:1] in b"%*":
            # server name, version and client id legitimately differ: compare the shape
            assert a.split(b"\r\n")[0] == b.split(b"\r\n")[0]
            continue
        if exact:
            assert a == b, f"{' '.join(cmd)!r}: tuffdb {a!r} != redis {b!r}"
        else:
            assert normalise(cmd, a) == normalise(cmd, b), \
                f"{' '.join(cmd)!r}: tuffdb {a!r} != redis {b!r}"


def watched_exec_runs(port: int, setup: list[tuple[str, ...]], key: str,
                      other: tuple[str, ...]) -> bool:
    """Whether a transaction runs when ``key`` was watched (after ``setup`` on a fresh
    keyspace) and then another client ran ``other`` (False: EXEC aborted)."""
    a, b = RawClient(port), RawClient(port)
    try:
        a.call("FLUSHALL")
        for cmd in setup:
            a.call(*cmd)
        a.call("WATCH", key)
        b.call(*other)
        a.call("MULTI")
        a.call("PING")
        return not a.call("EXEC").startswith(b"*-1")
    finally:
        a.close()
        b.close()


def tuffdb_and_redis(tmp_path_factory: pytest.TempPathFactory,
                     name: str) -> Iterator[tuple[int, int]]:
    """(tuffdb port, redis-server port) for a module: a fresh tuffdb (everysec) and a
    throw-away redis-server, stopped at the end."""
    tuff = start_tuffdb(tmp_path_factory.mktemp(name))
    red = start_redis()
    try:
        yield tuff.port, red.port
    finally:
        tuff.stop()
        red.stop()


def client_flags(admin: RawClient, client_id: str) -> str:
    """The ``flags=`` field of one client's CLIENT LIST line (``b``: blocked or held)."""
    listing = admin.call("CLIENT", "LIST").decode()
    line = next(x for x in listing.splitlines() if f"id={client_id} " in x)
    return line.split(" flags=", 1)[1].split(" ", 1)[0]
