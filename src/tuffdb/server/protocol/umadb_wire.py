"""Translation between ``umadb.v1`` wire messages and the event store, plus the error table.

Requests are parsed with the protobuf C parser; responses are assembled from stored entry
bytes (see ``tuffdb.events.codec``) without building message objects.
"""

from __future__ import annotations

import grpc
from google.protobuf.message import DecodeError

from tuffdb.errors import (
    AuthError,
    CorruptionError,
    IntegrityError,
    LimitExceeded,
    ProgrammingError,
    ProtocolError,
)
from tuffdb.events import codec
from tuffdb.events.api import Query, QueryItem
from tuffdb.server.protocol import umadb_v1_pb2 as pb

ET = pb.ErrorResponse.ErrorType
U64_MAX = (1 << 64) - 1
DEFAULT_BATCH = 1024
MAX_BATCH = 4096
# Every response message stays below the client's 4 MiB receive limit.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024 - 64 * 1024
MAX_REQUEST_BYTES = 4 * 1024 * 1024 + 64 * 1024

# The one table mapping tuffdb's error tree to gRPC (spec: umadb-grpc.md section 5.1).
ERROR_TABLE: tuple[tuple[type[BaseException], grpc.StatusCode, int, str], ...] = (
    (IntegrityError, grpc.StatusCode.FAILED_PRECONDITION, ET.INTEGRITY, ""),
    (AuthError, grpc.StatusCode.UNAUTHENTICATED, ET.AUTHENTICATION, "authentication error: "),
    (DecodeError, grpc.StatusCode.INVALID_ARGUMENT, ET.SERIALIZATION, "serialization error: "),
    (ProtocolError, grpc.StatusCode.INVALID_ARGUMENT, ET.SERIALIZATION, "serialization error: "),
    (LimitExceeded, grpc.StatusCode.INVALID_ARGUMENT, ET.INVALID_ARGUMENT, "invalid argument: "),
    (ProgrammingError, grpc.StatusCode.INVALID_ARGUMENT, ET.INVALID_ARGUMENT, "invalid argument: "),
    (CorruptionError, grpc.StatusCode.DATA_LOSS, ET.CORRUPTION, "corruption error: "),
    (OSError, grpc.StatusCode.INTERNAL, ET.IO, "io error: "),
)


def classify(exc: BaseException) -> tuple[grpc.StatusCode, int, str]:
    """(status code, ErrorType, message) for an exception, per :data:`ERROR_TABLE`."""
    for cls, code, etype, prefix in ERROR_TABLE:
        if isinstance(exc, cls):
            msg = str(exc)
            if prefix and not msg.startswith(prefix):
                msg = prefix + msg
            return code, etype, msg
    return grpc.StatusCode.INTERNAL, ET.INTERNAL, f"internal error: {exc}"


def error_details(etype: int, message: str) -> bytes:
    return pb.ErrorResponse(message=message, error_type=etype).SerializeToString()


def query_from_pb(q: pb.Query) -> Query:
    return Query([QueryItem(list(i.types), list(i.tags)) for i in q.items])


def encode_append(req: pb.AppendRequest) -> tuple[
    list[bytes], list[str], list, list[str] | None, tuple[str, int] | None
]:
    """Validate an AppendRequest and build entry tails; raises before anything is queued."""
    tracking = None
    tr = b""
    if req.HasField("tracking_info"):
        ti = req.tracking_info
        codec.check_source(ti.source)
        tracking = (ti.source, ti.position)
        tr = codec.tracking_bytes(ti.source, ti.position)
    tails = []
    types = []
    tags = []
    uuids: list[str] | None = []
    canonical = codec.canonical_uuid
    varint = codec.varint
    small = codec.MAX_NAME_BYTES // 4
    for e in req.events:
        t = e.event_type
        tg = e.tags
        if len(tg) > 16 or len(t) > 256 or sum(map(len, tg)) + len(t) > small:
            codec.check_names(t.encode(), [x.encode() for x in tg])
        u = e.uuid
        if u:
            c = canonical(u)
            if c != u:
                e.uuid = c
            if uuids is not None:
                uuids.append(c)
        else:
            uuids = None
        md = e.metadata
        if md:
            codec.check_metadata([m.key for m in md], [m.value for m in md])
        evb = e.SerializeToString()
        tails.append(b"\x12" + varint(len(evb)) + evb + tr)
        types.append(t)
        tags.append(tg)
    return tails, types, tags, uuids, tracking


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
