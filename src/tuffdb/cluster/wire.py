"""The replication stream's messages, on one TCP connection per follower.

A message is ``length u32 | type u8 | header_length u32 | header | blob`` (little-endian;
``length`` counts everything after itself): the header is a MessagePack map, the blob raw
bytes (log frames, file contents). One decoder for both ends; every malformed input is a
:class:`~tuffdb.errors.ProtocolError`, never a partial message.

| type | name | from | header | blob |
|---|---|---|---|---|
| 1 | HELLO | follower | cluster, node, lsn, epoch, history | |
| 2 | WELCOME | leader | epoch, leader, mode ("stream" or "snapshot"), lsn, history | |
| 3 | FILE | leader | store, name, offset, size | a chunk of the file |
| 4 | SNAPSHOT_END | leader | lsn, epoch, history | |
| 5 | ROUND | leader | epoch, lsn, store, time_ns, parts ``[[name, offset, length]]`` | the parts' bytes, in order |
| 6 | ACK | follower | lsn | |
| 7 | PING | leader | epoch, lsn, time_ns | |
| 8 | REFUSE | either | reason | |
| 9 | FORWARD | follower | kind (e.g. ``events.append``), request fields | the request |
| 10 | FORWARD_REPLY | leader | the handler's reply fields (``code``/``message`` on failure) | the reply |
| 11 | CHALLENGE | leader | nonce (16 random bytes) | |
| 12 | AUTH | follower | proof (:func:`proof` of the nonce, or empty bytes), nonce (16 random bytes) | |
| 13 | PROVEN | leader | proof (:func:`leader_proof` of the AUTH's nonce, or empty bytes) | |

Every connection starts with the leader's ``CHALLENGE``, the other end's ``AUTH`` and the
leader's ``PROVEN``, so each end proves the cluster secret to the other: when the leader
has one, the AUTH's proof must be the HMAC-SHA256 of its nonce under it, or the leader
answers ``REFUSE`` and hangs up (nothing else is read or sent); when the other end has
one, PROVEN's proof must be the HMAC of the AUTH's nonce under it (with another label, so
neither proof can be played back as the other), or that end hangs up and follows nobody
there (a node that took over the leader key in etcd, or a man in the middle, without the
secret streams nothing to followers and is forwarded no client write). Then the other end
sends ``HELLO`` (the log) or ``FORWARD``: a connection that opens with ``FORWARD`` carries
forwarded requests (a follower's face passing a write on to the leader), one at a time,
instead of the log.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
from enum import IntEnum
from typing import Any

import msgspec

from tuffdb.errors import ProtocolError

PREFIX = struct.Struct("<IBI")  # length (after itself), type, header length
MAX_MESSAGE_BYTES = 64 << 20  # a FILE chunk or a ROUND: rounds are at most 8 MiB of frames
FILE_CHUNK_BYTES = 4 << 20


class Msg(IntEnum):
    HELLO = 1
    WELCOME = 2
    FILE = 3
    SNAPSHOT_END = 4
    ROUND = 5
    ACK = 6
    PING = 7
    REFUSE = 8
    FORWARD = 9
    FORWARD_REPLY = 10
    CHALLENGE = 11
    AUTH = 12
    PROVEN = 13


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


def encode(kind: Msg, header: dict[str, Any], blob: bytes = b"") -> bytes:
    head = _encode(header)
    return PREFIX.pack(1 + 4 + len(head) + len(blob), kind, len(head)) + head + blob


def send(sock: socket.socket, kind: Msg, header: dict[str, Any], blob: bytes = b"") -> None:
    head = _encode(header)
    prefix = PREFIX.pack(1 + 4 + len(head) + len(blob), kind, len(head))
    sock.sendall(prefix + head + blob if len(blob) < 65536 else prefix + head)
    if len(blob) >= 65536:
        sock.sendall(blob)


def proof(secret: bytes, cluster: str, nonce: bytes) -> bytes:
    """What a node that knows the cluster's ``secret`` answers a leader's ``nonce`` with."""
    return hmac.new(secret, b"tuffdb-replication\0" + cluster.encode() + b"\0" + nonce,
                    hashlib.sha256).digest()


def leader_proof(secret: bytes, cluster: str, nonce: bytes) -> bytes:
    """What a leader that knows the cluster's ``secret`` answers the other end's ``nonce``
    with (another label than :func:`proof`: one is never the other)."""
    return hmac.new(secret, b"tuffdb-replication-leader\0" + cluster.encode() + b"\0" + nonce,
                    hashlib.sha256).digest()


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("replication connection closed by the peer")
        got += k
    return bytes(buf)


def recv(sock: socket.socket) -> tuple[Msg, dict[str, Any], bytes]:
    """The next message; ConnectionError at EOF, ProtocolError if it is malformed."""
    raw = _read_exact(sock, PREFIX.size)
    length, kind, head_len = PREFIX.unpack(raw)
    if length > MAX_MESSAGE_BYTES or head_len > length - 5:
        raise ProtocolError(f"replication message of {length} bytes (header {head_len}): "
                            f"over the {MAX_MESSAGE_BYTES}-byte limit or inconsistent")
    body = _read_exact(sock, length - 5)
    return decode(kind, body[:head_len], body[head_len:])


def decode(kind: int, head: bytes, blob: bytes) -> tuple[Msg, dict[str, Any], bytes]:
    try:
        msg = Msg(kind)
    except ValueError:
        raise ProtocolError(f"unknown replication message type {kind}") from None
    try:
        header = _decode(head)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"replication message header is not MessagePack: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("replication message header is not a map")
    return msg, header, blob


def field(header: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``header[name]`` checked against ``kind``; ProtocolError naming it otherwise."""
    value = header.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProtocolError(f"replication message: field {name!r} missing or not {kind}")
    return value


def history_field(header: dict[str, Any], name: str) -> list[list[int]]:
    """An epoch history (``[[epoch, first lsn], ...]``, state.py) at ``header[name]``, or
    an empty one if absent; ProtocolError if it has another shape."""
    value = header.get(name) or []
    if not isinstance(value, list) or not all(
            isinstance(step, list) and len(step) == 2
            and all(type(x) is int for x in step) for step in value):
        raise ProtocolError(f"replication message: field {name!r} is not an epoch history")
    return value
