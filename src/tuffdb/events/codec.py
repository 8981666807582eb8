"""Stored event layout: each event is kept as the protobuf bytes of one
``ReadResponse.events`` element, so a read response is assembled by joining stored bytes.

Entry = ``0x0A varint(L) | 0x08 varint(position) | 0x12 varint(EL) Event | [0x1A varint(TL) TrackingInfo]``
(``L`` counts everything after the first varint). ``ReadResponse`` and ``SubscribeResponse``
both carry their events in field 1, so the same joined bytes serve both. Normative
description: ``docs/format/events-log.md``.

The caller's thread builds the *tail* (``0x12 ... Event ... TrackingInfo``); the writer
prepends the position-dependent *head* when it assigns positions (:func:`entries_for`).
"""

from __future__ import annotations

import re
import uuid as _uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tuffdb.errors import LimitExceeded, ProgrammingError
from tuffdb.events.api import Event, SequencedEvent, TrackingInfo
from tuffdb.server.protocol import umadb_v1_pb2 as pb

if TYPE_CHECKING:
    from collections.abc import Mapping

# Limits (one constant each, checked before anything is written).
MAX_TAGS_PER_EVENT = 65_535
MAX_NAME_BYTES = 65_535  # one type or tag, and type + all tags of one event together
MAX_METADATA_ENTRIES = 65_535
MAX_METADATA_FIELD_BYTES = 65_535
MAX_TRACKING_SOURCE_BYTES = 255
MAX_EVENT_BYTES = 16 * 1024 * 1024  # one encoded event (embedded; the gRPC face caps requests at 4 MiB)

_SMALL = 1 << 14
_VARINTS: list[bytes] = []


def _varint_slow(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINTS = [_varint_slow(i) for i in range(_SMALL)]


def varint(n: int, _table: list[bytes] = _VARINTS) -> bytes:
    """Protobuf base-128 varint of a non-negative int (table lookup below 16,384)."""
    if n < _SMALL:
        return _table[n]
    return _varint_slow(n)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a varint at ``pos``; returns ``(value, next_pos)``."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def canonical_uuid(value: object) -> str:
    """``""`` for none, else the lowercase hyphenated form; ProgrammingError if unparsable."""
    if value is None or value == "":
        return ""
    if type(value) is str and _CANONICAL_UUID.match(value):
        return value
    if isinstance(value, _uuid.UUID):
        return str(value)
    try:
        return str(_uuid.UUID(str(value)))
    except ValueError:
        raise ProgrammingError(f"invalid uuid {value!r}: pass a UUID or its string form") from None


def check_names(type_b: bytes, tags: Sequence[bytes] | Sequence[str]) -> None:
    if len(tags) > MAX_TAGS_PER_EVENT:
        raise LimitExceeded(f"event has {len(tags)} tags; the limit is {MAX_TAGS_PER_EVENT}")
    size = len(type_b) + sum(len(t) for t in tags)
    if size > MAX_NAME_BYTES:
        raise LimitExceeded(
            f"event type and tags take {size} bytes; the limit is {MAX_NAME_BYTES} together"
        )


def check_metadata(keys: Sequence[str], values: Sequence[str]) -> None:
    if len(keys) > MAX_METADATA_ENTRIES:
        raise LimitExceeded(f"metadata has {len(keys)} entries; limit {MAX_METADATA_ENTRIES}")
    if len(set(keys)) != len(keys):
        raise ProgrammingError("metadata contains duplicate keys")
    for s in (*keys, *values):
        if len(s) > MAX_METADATA_FIELD_BYTES // 4 and len(s.encode()) > MAX_METADATA_FIELD_BYTES:
            raise LimitExceeded(
                f"metadata key or value longer than {MAX_METADATA_FIELD_BYTES} bytes"
            )


def check_source(source: str) -> bytes:
    b = source.encode()
    if len(b) > MAX_TRACKING_SOURCE_BYTES:
        raise LimitExceeded(
            f"tracking source is {len(b)} bytes; the limit is {MAX_TRACKING_SOURCE_BYTES}"
        )
    return b


def _field(tag: bytes, b: bytes) -> bytes:
    return tag + varint(len(b)) + b


def tracking_bytes(source: str, position: int) -> bytes:
    """``0x1A`` field of a SequencedEvent carrying ``TrackingInfo``."""
    body = _field(b"\x0a", source.encode()) + b"\x10" + varint(position)
    return _field(b"\x1a", body)


def encode_event(event: Event) -> tuple[bytes, str, Sequence[str]]:
    """Validate one embedded :class:`Event`; returns ``(Event protobuf, type, tags)``.

    :raises LimitExceeded: when a size limit is exceeded.
    :raises ProgrammingError: on an invalid uuid or duplicate metadata keys.
    """
    etype = event.type
    tags = event.tags
    data = event.data
    if type(data) is not bytes:
        data = bytes(data)
    type_b = etype.encode()
    tag_bs = [t.encode() for t in tags]
    check_names(type_b, tag_bs)
    parts = [b"\x0a", varint(len(type_b)), type_b]
    for tb in tag_bs:
        parts += (b"\x12", varint(len(tb)), tb)
    parts += (b"\x1a", varint(len(data)), data)
    if event.uuid is not None:
        u = canonical_uuid(event.uuid)
        if u:
            parts += (b"\x22\x24", u.encode())
    md = event.metadata
    if md:
        keys = list(md)
        values = [md[k] for k in keys]
        check_metadata(keys, values)
        for k, v in zip(keys, values, strict=True):
            body = _field(b"\x0a", k.encode()) + _field(b"\x12", v.encode())
            parts += (b"\x2a", varint(len(body)), body)
    out = b"".join(parts)
    if len(out) > MAX_EVENT_BYTES:
        raise LimitExceeded(f"event encodes to {len(out)} bytes; the limit is {MAX_EVENT_BYTES}")
    return out, etype, tags


def tail_of(event_pb: bytes, tracking: bytes = b"") -> bytes:
    """The position-independent part of an entry."""
    return b"\x12" + varint(len(event_pb)) + event_pb + tracking


def entries_for(first_position: int, tails: Sequence[bytes]) -> list[bytes]:
    """Full entries for consecutive positions (the writer's per-event work, kept tiny)."""
    out: list[bytes] = []
    append = out.append
    p = first_position
    for t in tails:
        pv = varint(p)
        append(b"\x0a" + varint(len(t) + 1 + len(pv)) + b"\x08" + pv + t)
        p += 1
    return out


def split_entries(buf: bytes | memoryview, start: int = 0, end: int | None = None) -> list[int]:
    """Offsets of the entries in ``buf[start:end]`` plus the end offset (recovery path)."""
    end = len(buf) if end is None else end
    offsets = []
    pos = start
    while pos < end:
        if buf[pos] != 0x0A:
            raise ValueError(f"bad entry tag {buf[pos]:#x} at {pos}")
        offsets.append(pos)
        n, pos = read_varint(buf, pos + 1)
        pos += n
    if pos != end:
        raise ValueError("entry overruns its frame")
    offsets.append(end)
    return offsets


def decode_entries(joined: bytes) -> list[SequencedEvent]:
    """Decode joined entries in bulk (protobuf C parser), then wrap them."""
    msg = pb.ReadResponse.FromString(joined)
    out = []
    append = out.append
    for se in msg.events:
        e = se.event
        md = e.metadata
        ev = Event(
            e.event_type,
            e.data,
            list(e.tags),
            e.uuid or None,
            {m.key: m.value for m in md} if md else None,
        )
        ti = se.tracking_info if se.HasField("tracking_info") else None
        append(
            SequencedEvent(ev, se.position, TrackingInfo(ti.source, ti.position) if ti else None)
        )
    return out


def uuids_of(joined: bytes) -> list[str]:
    return [se.event.uuid for se in pb.ReadResponse.FromString(joined).events]


def types_and_tags(joined: bytes) -> Iterable[tuple[int, str, Sequence[str]]]:
    """``(position, type, tags)`` per entry, for rebuilding the index from the log."""
    for se in pb.ReadResponse.FromString(joined).events:
        e = se.event
        yield se.position, e.event_type, e.tags


def metadata_pairs(md: Mapping[str, str]) -> tuple[list[str], list[str]]:
    keys = list(md)
    return keys, [md[k] for k in keys]
