"""Stored event layout: each event is kept as the protobuf bytes of one
``ReadResponse.events`` element, so a read response is assembled by joining stored bytes.

Entry = ``0x0A varint(L) | 0x08 varint(position) | 0x12 varint(EL) Event``
``| [0x1A varint(TL) TrackingInfo]``
(``L`` counts everything after the first varint). ``ReadResponse`` and ``SubscribeResponse``
both carry their events in field 1, so the same joined bytes serve both. Normative
description: ``docs/format/events-log.md``.

The caller's thread builds the *tail* (``0x12 ... Event ... TrackingInfo``); the writer
prepends the position-dependent *head* when it assigns positions (:func:`entries_for`).
"""

from __future__ import annotations

import re
import uuid as _uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
from google.protobuf.message import DecodeError

from tuffdb.errors import CorruptionError, LimitExceeded, ProgrammingError
from tuffdb.events.api import Event, SequencedEvent, TrackingInfo
from tuffdb.events import umadb_v1_pb2 as pb

if TYPE_CHECKING:
    from collections.abc import Mapping

# Limits (one constant each, checked before anything is written).
MAX_TAGS_PER_EVENT = 65_535
MAX_NAME_BYTES = 65_535  # one type or tag, and type + all tags of one event together
MAX_METADATA_ENTRIES = 65_535
MAX_METADATA_FIELD_BYTES = 65_535
MAX_TRACKING_SOURCE_BYTES = 255
# One encoded event (embedded; the gRPC face caps whole requests at 4 MiB).
MAX_EVENT_BYTES = 16 * 1024 * 1024

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
# Many canonical uuids joined by newlines, checked with one regex call.
_CANONICAL_UUIDS = re.compile(
    r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n)*"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)


def all_canonical_uuids(uuids: Sequence[str]) -> bool:
    return bool(uuids) and _CANONICAL_UUIDS.fullmatch("\n".join(uuids)) is not None


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


def encode_names(etype: object, tags: object) -> tuple[bytes, list[bytes]]:
    """An event's type and tags as UTF-8, checked (``check_names``): the type a str, the
    tags a list (or other sequence) of str. A str as the tags was taken as its letters (the
    tags of ``Event("T", b"", "order-7")`` were o, r, d, ...), a non-str tag escaped as an
    AttributeError.

    :raises ProgrammingError: a type or tags of the wrong type.
    :raises LimitExceeded: too many tags, or names too long.
    """
    if type(etype) is not str:
        raise ProgrammingError(f"event type must be a str, not {type(etype).__name__}")
    if isinstance(tags, str | bytes) or not isinstance(tags, Sequence):
        raise ProgrammingError(f"event tags must be a list of str, not {type(tags).__name__}")
    try:
        tag_bs = [x.encode() for x in tags]
    except AttributeError:
        bad = next(x for x in tags if type(x) is not str)
        raise ProgrammingError(f"event tags must be str, not {type(bad).__name__}") from None
    type_b = etype.encode()
    check_names(type_b, tag_bs)
    return type_b, tag_bs


def event_bytes(data: object) -> bytes:
    """An event's data as bytes (bytes, bytearray or memoryview; ``bytes(5)`` would have
    made five zero bytes of an int, and a str escaped as a TypeError).

    :raises ProgrammingError: anything else.
    """
    if type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise ProgrammingError(f"event data must be bytes, not {type(data).__name__}")


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
    data = event_bytes(event.data)
    type_b, tag_bs = encode_names(etype, tags)
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


def _uniform_block(
    evs: Sequence[Event], tracking: bytes
) -> tuple[TailBlock, list[str], list[Sequence[str]]] | None:
    """All events share type and tags, carry no uuid or metadata, and have equal-length
    bytes data (a batch for one entity): build every tail as a numpy row at once."""
    n = len(evs)
    if n < 8:
        return None
    first = evs[0]
    t, tg = first.type, first.tags
    types = [e.type for e in evs]
    tags = [e.tags for e in evs]
    if types.count(t) != n or tags.count(tg) != n or type(t) is not str:
        return None
    # C-level checks (no per-event Python frames): no uuid, no metadata, equal-length bytes.
    if [e.uuid for e in evs].count(None) != n or any([e.metadata for e in evs]):  # noqa: C419 (a list: any() over it runs in C)
        return None
    datas = [e.data for e in evs]
    if set(map(type, datas)) != {bytes} or len(set(map(len, datas))) != 1:
        return None  # (the general path checks the data)
    dl = len(datas[0])
    type_b, tag_bs = encode_names(t, tg)
    parts = [b"\x0a", varint(len(type_b)), type_b]
    for tb in tag_bs:
        parts += (b"\x12", varint(len(tb)), tb)
    prefix = b"".join(parts) + b"\x1a" + varint(dl)
    el = len(prefix) + dl
    if el > MAX_EVENT_BYTES:
        raise LimitExceeded(f"event encodes to {el} bytes; the limit is {MAX_EVENT_BYTES}")
    head = b"\x12" + varint(el) + prefix
    h = len(head)
    width = h + dl + len(tracking)
    rows = np.empty((n, width), np.uint8)
    rows[:, :h] = np.frombuffer(head, np.uint8)
    if dl:
        rows[:, h : h + dl] = np.frombuffer(b"".join(datas), np.uint8).reshape(n, dl)
    if tracking:
        rows[:, h + dl :] = np.frombuffer(tracking, np.uint8)
    return TailBlock(rows.tobytes(), width, n), types, tags


def encode_events(
    events: Iterable[Event], tracking: bytes = b""
) -> tuple[list[bytes] | TailBlock, list[str], list[Sequence[str]], list[str] | None]:
    """Entry tails, types, tags and uuids (``None`` unless every event has one).

    Fast paths: a uniform batch (one type, one tag list, equal-size data, no uuid or
    metadata) is built as numpy rows; otherwise consecutive events with the same type and
    tags reuse one encoded prefix, and events without uuid or metadata take a single join.
    """
    evs = events if isinstance(events, list | tuple) else list(events)
    uniform = _uniform_block(evs, tracking)
    if uniform is not None:
        return uniform[0], uniform[1], uniform[2], None
    tails: list[bytes] = []
    types: list[str] = []
    tags_out: list[Sequence[str]] = []
    uuids: list[str] | None = []
    append = tails.append
    join = b"".join
    last_t: object = None
    last_tags: object = None
    prefix = b""
    for ev in evs:
        t = ev.type
        tg = ev.tags
        if t is not last_t or (tg is not last_tags and tg != last_tags):
            type_b, tag_bs = encode_names(t, tg)
            parts = [b"\x0a", varint(len(type_b)), type_b]
            for tb in tag_bs:
                parts += (b"\x12", varint(len(tb)), tb)
            prefix = join(parts)
            last_t, last_tags = t, tg
        data = ev.data
        if type(data) is not bytes:
            data = event_bytes(data)
        if ev.uuid is None and not ev.metadata:
            dl = varint(len(data))
            n = len(prefix) + 1 + len(dl) + len(data)
            if n > MAX_EVENT_BYTES:
                raise LimitExceeded(f"event encodes to {n} bytes; the limit is {MAX_EVENT_BYTES}")
            append(join((b"\x12", varint(n), prefix, b"\x1a", dl, data, tracking)))
            uuids = None
        else:
            pb_bytes, _, _ = encode_event(ev)
            append(tail_of(pb_bytes, tracking))
            if uuids is not None:
                u = canonical_uuid(ev.uuid)
                if u:
                    uuids.append(u)
                else:
                    uuids = None
        types.append(ev.type)
        tags_out.append(tg)
    return tails, types, tags_out, uuids


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


def _varint_rows(first: int, n: int, k: int) -> np.ndarray:
    """Varints of ``first .. first+n-1`` (all ``k`` bytes long) as an ``(n, k)`` array."""
    p = np.arange(first, first + n, dtype=np.uint64)
    out = np.empty((n, k), np.uint8)
    for j in range(k):
        b = (p >> np.uint64(7 * j)) & np.uint64(0x7F)
        if j < k - 1:
            b |= np.uint64(0x80)
        out[:, j] = b
    return out


def _varint_len(n: int) -> int:
    k = 1
    while n >> (7 * k):
        k += 1
    return k


class TailBlock:
    """``count`` entry tails of equal length ``width`` joined in ``data`` (the wire fast path:
    built from a request's raw bytes without touching events one by one)."""

    __slots__ = ("count", "data", "width")

    def __init__(self, data: bytes, width: int, count: int) -> None:
        assert len(data) == width * count
        self.data = data
        self.width = width
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[bytes]:
        w = self.width
        return (self.data[i * w : (i + 1) * w] for i in range(self.count))


def nbytes(tails: Sequence[bytes] | TailBlock) -> int:
    if type(tails) is TailBlock:
        return len(tails.data)
    return sum(map(len, tails))


def entries_block(first: int, tails: Sequence[bytes] | TailBlock) -> tuple[bytes, np.ndarray]:
    """Joined entries for consecutive positions and each entry's length.

    Fast path (tails of equal length, the usual batch of similar events): the entries are
    assembled as rows of one numpy array, so the per-event Python work is nil. Otherwise a
    plain loop (:func:`entries_for`).
    """
    n = len(tails)
    if type(tails) is TailBlock:
        tl = tails.width
        tail_rows = np.frombuffer(tails.data, np.uint8).reshape(n, tl)
    else:
        tl = len(tails[0])  # type: ignore[index]
        if n < 8 or len(set(map(len, tails))) != 1:
            entries = entries_for(first, tails)  # type: ignore[arg-type]
            return b"".join(entries), np.fromiter(map(len, entries), np.int64, n)
        tail_rows = np.frombuffer(b"".join(tails), np.uint8).reshape(n, tl)
    blocks = []
    lens = []
    i = 0
    while i < n:
        p = first + i
        k = _varint_len(p)
        band_end = 1 << (7 * k)  # first position whose varint is longer
        m = min(n - i, band_end - p)
        lv = varint(tl + 1 + k)
        h = len(lv)
        row = 2 + h + k + tl
        arr = np.empty((m, row), np.uint8)
        arr[:, 0] = 0x0A
        arr[:, 1 : 1 + h] = np.frombuffer(lv, np.uint8)
        arr[:, 1 + h] = 0x08
        arr[:, 2 + h : 2 + h + k] = _varint_rows(p, m, k)
        arr[:, 2 + h + k :] = tail_rows[i : i + m]
        blocks.append(arr.tobytes())
        lens.append(np.full(m, row, np.int64))
        i += m
    return (blocks[0] if len(blocks) == 1 else b"".join(blocks)), (
        lens[0] if len(lens) == 1 else np.concatenate(lens)
    )


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


IndexRow = tuple[int, str, list[str]]


def index_entries(joined: bytes) -> tuple[list[int], list[IndexRow]]:
    """One pass over joined entries for rebuilding the index (recovery, a follower's
    apply): the entries' offsets plus the end offset (as :func:`split_entries`), and
    ``(position, type, tags)`` per entry (as :func:`types_and_tags`), read off the wire
    format directly instead of through protobuf objects (~1 us an event saved).

    What it returns is checked as the protobuf parser would (the wire structure, UTF-8 of
    the type and tags); the fields the index does not use (data, uuid, metadata,
    tracking) are stepped over and left to the reader's decode. An entry not laid out
    as this store writes them (fields other than these, an event field twice) is read by
    the protobuf parser instead, so the rows are the parser's in every case.

    :raises ValueError, IndexError: the bytes are not whole entries.
    """
    end = len(joined)
    offsets: list[int] = []
    rows: list[IndexRow] = []
    pos = 0
    while pos < end:
        if joined[pos] != 0x0A:
            raise ValueError(f"bad entry tag {joined[pos]:#x} at {pos}")
        offsets.append(pos)
        n, pos = _field_length(joined, pos, end)
        stop = pos + n
        if stop > end:
            raise ValueError("entry overruns its frame")
        position = 0
        etype = ""
        tags: list[str] = []
        had_event = False
        while pos < stop:
            key = joined[pos]
            if key == 0x08:  # position
                position, pos = read_varint(joined, pos + 1)
                continue
            if (key != 0x12 and key != 0x1A) or (had_event and key == 0x12):  # noqa: PLR1714
                return split_entries(joined), _parsed_rows(joined)
            m, pos = _field_length(joined, pos, stop)
            inner = pos + m
            if inner > stop:
                raise ValueError("field overruns its entry")
            if key == 0x12:  # the event: its type and tags
                had_event = True
                while pos < inner:
                    k = joined[pos]
                    if k & 7 != 2 or k >= 0x80 or k < 0x08:  # noqa: PLR2004 - every Event
                        # field is length-delimited and numbered 1 to 15 (a one-byte key);
                        # the parser refuses field 0
                        return split_entries(joined), _parsed_rows(joined)
                    f, pos = _field_length(joined, pos, inner)
                    if pos + f > inner:
                        raise ValueError("field overruns its event")
                    if k == 0x0A:
                        etype = joined[pos : pos + f].decode()
                    elif k == 0x12:
                        tags.append(joined[pos : pos + f].decode())
                    pos += f
            pos = inner
        if pos != stop:
            raise ValueError("field overruns its entry")
        rows.append((position, etype, tags))
    offsets.append(end)
    return offsets, rows


def _field_length(buf: bytes, pos: int, limit: int) -> tuple[int, int]:
    """``(length, where its bytes start)`` of the length-delimited field whose one-byte
    key is at ``pos`` (a length under 128 is one byte: read inline)."""
    n = buf[pos + 1] if pos + 1 < limit else 0x80
    if n < 0x80:
        return n, pos + 2
    return read_varint(buf, pos + 1)


def _parsed_rows(joined: bytes) -> list[IndexRow]:
    return [(p, t, list(tags)) for p, t, tags in types_and_tags(joined)]


# Compiled (mypyc), the wire scan above is ~3x faster than protobuf objects; interpreted,
# it is slower than they are, so the interpreted build keeps them.
_COMPILED = not __file__.endswith(".py")


def entries_for_index(joined: bytes) -> tuple[list[int], Sequence[tuple[int, str, Sequence[str]]]]:
    """``(offsets, rows)`` of joined entries for the index: :func:`index_entries` where
    this module is compiled, the protobuf parser's otherwise (the same values)."""
    if _COMPILED:
        return index_entries(joined)
    return split_entries(joined), list(types_and_tags(joined))


def fold_rows(rows: Sequence[tuple[int, str, Sequence[str]]], names: dict[str, int],
              ids: list[int], postings: dict[str, list[int]]) -> None:
    """Add rows to an index being built: each row's type id (numbered in order of first
    appearance in ``names``) to ``ids``, its position to each of its tags' postings (once,
    however often the tag is repeated)."""
    for p, t, tags in rows:
        tid = names.get(t)
        if tid is None:
            tid = names[t] = len(names)
        ids.append(tid)
        for tag in tags:
            lst = postings.get(tag)
            if lst is None:
                postings[tag] = [p]
            elif lst[-1] != p:
                lst.append(p)


def decode_entries(joined: bytes) -> list[SequencedEvent]:
    """Decode joined entries in bulk (protobuf C parser), then wrap them.

    :raises CorruptionError: the bytes are not entries (reads check every frame's CRC
        first, so this means stored entries that were never valid)
    """
    try:
        msg = pb.ReadResponse.FromString(joined)
    except DecodeError as exc:
        raise CorruptionError(f"stored events do not decode: {exc}") from exc
    out: list[SequencedEvent] = []
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
