"""Translation between ``umadb.v1`` wire messages and the event store, plus the error table.

Requests are parsed with the protobuf C parser; responses are assembled from stored entry
bytes (see ``tuffdb.events.codec``) without building message objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tuffdb.errors import (
    AuthError,
    CorruptionError,
    IntegrityError,
    LimitExceeded,
    NotEnoughReplicasError,
    NotLeaderError,
    PoisonedError,
    ProgrammingError,
    ProtocolError,
)
from tuffdb.events import codec
from tuffdb.events.api import Query, QueryItem
from tuffdb.server.umadb.grpc_h2 import StatusCode
from tuffdb.events import umadb_v1_pb2 as pb

ET = pb.ErrorResponse.ErrorType
U64_MAX = (1 << 64) - 1
DEFAULT_BATCH = 1024
MAX_BATCH = 4096
# Requests up to 4 MiB (UmaDB's decode limit); response messages are cut below 4 MiB, except
# that one event always goes out whole (it fitted in a request, so it fits in SEND_LIMIT).
MAX_REQUEST_BYTES = 4 * 1024 * 1024
MAX_RESPONSE_BYTES = MAX_REQUEST_BYTES - 64 * 1024
SEND_LIMIT = MAX_REQUEST_BYTES + 64 * 1024

# The one table mapping tuffdb's error tree to gRPC (spec: umadb-grpc.md section 5.1).
ERROR_TABLE: tuple[tuple[type[BaseException], StatusCode, int, str], ...] = (
    (IntegrityError, StatusCode.FAILED_PRECONDITION, ET.INTEGRITY, ""),
    (NotEnoughReplicasError, StatusCode.UNAVAILABLE, ET.IO, ""),
    (NotLeaderError, StatusCode.UNAVAILABLE, ET.IO, ""),
    (AuthError, StatusCode.UNAUTHENTICATED, ET.AUTHENTICATION, "authentication error: "),
    (DecodeError, StatusCode.INVALID_ARGUMENT, ET.SERIALIZATION, "serialization error: "),
    (ProtocolError, StatusCode.INVALID_ARGUMENT, ET.SERIALIZATION, "serialization error: "),
    (LimitExceeded, StatusCode.INVALID_ARGUMENT, ET.INVALID_ARGUMENT, "invalid argument: "),
    (ProgrammingError, StatusCode.INVALID_ARGUMENT, ET.INVALID_ARGUMENT, "invalid argument: "),
    (CorruptionError, StatusCode.DATA_LOSS, ET.CORRUPTION, "corruption error: "),
    (OSError, StatusCode.INTERNAL, ET.IO, "io error: "),
    # an earlier write or fsync failed: an I/O error that lasts until the server restarts
    (PoisonedError, StatusCode.INTERNAL, ET.IO, "io error: "),
)


def classify(exc: BaseException) -> tuple[StatusCode, int, str]:
    """(status code, ErrorType, message) for an exception, per :data:`ERROR_TABLE`."""
    for cls, code, etype, prefix in ERROR_TABLE:
        if isinstance(exc, cls):
            msg = str(exc)
            if prefix and not msg.startswith(prefix):
                msg = prefix + msg
            return code, etype, msg
    return StatusCode.INTERNAL, ET.INTERNAL, f"internal error: {exc}"


def error_details(etype: int, message: str) -> bytes:
    msg = pb.ErrorResponse(message=message, error_type=etype)  # type: ignore[arg-type]
    result: bytes = msg.SerializeToString()
    return result


def items_from_pb(q: pb.Query) -> list[tuple[list[str], list[str]]] | None:
    """Planner items straight from a wire Query (``None`` = matches everything)."""
    out = []
    for i in q.items:
        types, tags = list(i.types), list(i.tags)
        if not types and not tags:
            return None
        out.append((types, tags))
    return out or None


def query_from_pb(q: pb.Query) -> Query:
    return Query([QueryItem(list(i.types), list(i.tags)) for i in q.items])


def encode_append(req: pb.AppendRequest, raw: bytes | None = None) -> tuple[
    list[bytes] | codec.TailBlock, list[str], list[Any], list[str] | None, tuple[str, int] | None
]:
    """Validate an AppendRequest and build entry tails; raises before anything is queued.

    Fast path (``raw`` given, events of equal encoded length, canonical or no uuids): a
    request's events are serialised back to back as ``0x0A varint(L) Event``, and an entry
    tail is ``0x12 varint(L) Event``; so the tails are the raw rows with their first byte
    changed, done for all rows at once in numpy.
    """
    tracking = None
    tr = b""
    if req.HasField("tracking_info"):
        ti = req.tracking_info
        codec.check_source(ti.source)
        tracking = (ti.source, ti.position)
        tr = codec.tracking_bytes(ti.source, ti.position)
    events = req.events
    n = len(events)
    types = [e.event_type for e in events]
    tags = [e.tags for e in events]
    us = [e.uuid for e in events]
    uuids: list[str] | None = None
    canonical = True
    if any(us):
        if all(us) and codec.all_canonical_uuids(us):
            uuids = us
        else:
            canonical = False
            fixed = []
            for e, u in zip(events, us, strict=True):
                c = codec.canonical_uuid(u)
                if c != u:
                    e.uuid = c
                fixed.append(c)
            uuids = fixed if all(fixed) else None
    if any(e.metadata for e in events):
        for e in events:
            md = e.metadata
            if md:
                codec.check_metadata([m.key for m in md], [m.value for m in md])
    if n and raw is not None and canonical:
        block = _tail_block(raw, n, tr)
        if block is not None:
            return block, types, tags, uuids, tracking
    small = codec.MAX_NAME_BYTES // 4
    varint = codec.varint
    tails = []
    for e, t, tg in zip(events, types, tags, strict=True):
        if len(tg) > 16 or len(t) > 256 or sum(map(len, tg)) + len(t) > small:
            codec.check_names(t.encode(), [x.encode() for x in tg])
        evb = e.SerializeToString()
        tails.append(b"\x12" + varint(len(evb)) + evb + tr)
    return tails, types, tags, uuids, tracking


def _tail_block(raw: bytes, n: int, tr: bytes) -> codec.TailBlock | None:
    """The fast path of :func:`encode_append`, or None when the request does not fit it."""
    if n < 8 or raw[0] != 0x0A:
        return None
    length, at = codec.read_varint(raw, 1)
    if length > codec.MAX_NAME_BYTES:
        return None  # per-event size checks needed
    h = at - 1
    row = 1 + h + length
    if n * row > len(raw):
        return None
    arr = np.frombuffer(raw, np.uint8, n * row).reshape(n, row)
    head = np.frombuffer(raw, np.uint8, 1 + h)
    if not (arr[:, : 1 + h] == head).all():
        return None  # events of different lengths
    out = arr.copy()
    out[:, 0] = 0x12
    if tr:
        out = np.hstack([out, np.tile(np.frombuffer(tr, np.uint8), (n, 1))])
    return codec.TailBlock(out.tobytes(), out.shape[1], n)


def read_message(body: bytes, head: int | None) -> bytes:
    """A ReadResponse from joined entries and an optional head."""
    if head is None:
        return body
    return body + b"\x10" + codec.varint(head)


def head_message(position: int | None) -> bytes:
    """HeadResponse / TrackingResponse / AppendResponse: field 1 uint64 (absent if None)."""
    if position is None:
        return b""
    return b"\x08" + codec.varint(position)
