"""Storage codec for documents: MessagePack (msgspec) with one ext code per non-native type.

Normative description: ``docs/format/documents.md``. Native MessagePack carries str, int,
float, bool, nil, bin (Binary), array (Array) and map (Object); everything else is an ext:

====  ==========  =====================================================
code  type        payload
====  ==========  =====================================================
1     Decimal     ASCII text of ``str(d)``
2     DateTime    ASCII ISO 8601 text (``datetime.isoformat()``; naive kept naive)
3     UUID        16 raw bytes
4     Duration    ``<qii`` days, seconds, microseconds (timedelta's own fields)
5     Set         MessagePack array of the elements (each encoded like a field)
6     Vector      little-endian float64 array
7     Bytes       raw bytes (a ``bytearray``; Binary is native bin)
8     Number      MessagePack int or float
9     Tuple       MessagePack array (an Array given as a tuple comes back a tuple)
10    Vector      little-endian float32 array: a vector each of whose components is a
                  float32 value exactly (embeddings from float32 models), read back as
                  the same float64 values; half the bytes of code 6
====  ==========  =====================================================
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import threading
import uuid
from array import array
from collections.abc import Iterable
from typing import Any

import msgspec

from tuffdb.documents.values import Number, Vector

EXT_DECIMAL, EXT_DATETIME, EXT_UUID, EXT_DURATION = 1, 2, 3, 4
EXT_SET, EXT_VECTOR, EXT_BYTES, EXT_NUMBER, EXT_TUPLE = 5, 6, 7, 8, 9
EXT_VECTOR32 = 10
DURATION = struct.Struct("<qii")

_Ext = msgspec.msgpack.Ext
_NATIVE = frozenset((str, int, float, bool, type(None), bytes))


def plain_scalars(values: Iterable[Any]) -> bool:
    """Whether every value is a str, int, float, bool or None: stored and read back as
    given. (Type identity, one test per value: compiled, it is a pointer comparison where
    ``all(map(frozenset.__contains__, map(type, ...)))`` was ~1 us for ten values.)"""
    for v in values:
        t = type(v)
        if not (t is str or t is int or t is float or t is bool or v is None):
            return False
    return True


def _native_values(values: Iterable[Any]) -> bool:
    """Whether every value is MessagePack-native (:data:`_NATIVE`), as :func:`plain_scalars`."""
    for v in values:
        t = type(v)
        if not (t is str or t is int or t is float or t is bool or v is None or t is bytes):
            return False
    return True


_ONE_F32 = struct.Struct("<f")
# by length (a few per database): (float32, float64) little-endian formats
_VECTOR_FORMATS: dict[int, tuple[struct.Struct, struct.Struct]] = {}


def _vector_ext(value: Vector) -> msgspec.msgpack.Ext:
    """Code 10 (float32s) when every component survives the round trip through float32
    exactly, else code 6 (float64s). ``struct`` takes a tuple's floats directly: 6x faster
    than ``array("d", value)``, which walks a tuple subclass item by item through its
    parser. The check (pack, unpack, one tuple comparison in C: ~4.5 us for 128
    components against 2 us for packing float64s; a float64 vector is usually told by
    its first component) halves what the record, the log and the cold
    blocks carry; the float64 bytes of float32 values also compress slowly (zstd -1 ran
    at ~290 MB/s on them)."""
    n = len(value)
    fmts = _VECTOR_FORMATS.get(n)
    if fmts is None:
        fmts = (struct.Struct(f"<{n}f"), struct.Struct(f"<{n}d"))
        if len(_VECTOR_FORMATS) < 64:
            _VECTOR_FORMATS[n] = fmts
    f32, f64 = fmts
    # The first component alone decides most float64 vectors (~0.3 us), so they do not
    # pay the whole check. NaN never compares equal: such a vector stays float64.
    try:
        if n and _ONE_F32.unpack(_ONE_F32.pack(value[0]))[0] == value[0]:
            packed = f32.pack(*value)
            if f32.unpack(packed) == value:
                return _Ext(EXT_VECTOR32, packed)
    except OverflowError:  # a component beyond float32's range
        pass
    return _Ext(EXT_VECTOR, f64.pack(*value))


def to_store(value: Any) -> Any:  # noqa: C901, PLR0911, PLR0912 - type or option dispatch, one case each
    """Turn a typed value into MessagePack-native objects and Ext instances."""
    t = type(value)
    if t in _NATIVE:
        return value
    if t is dict:
        if _native_values(value.values()):
            return value  # all native (a YCSB record): only encoded, never changed, so no copy
        return {k: v if type(v) in _NATIVE else to_store(v) for k, v in value.items()}
    if t is list:
        return [to_store(v) for v in value]
    if t is decimal.Decimal:
        return _Ext(EXT_DECIMAL, str(value).encode())
    if t is dt.datetime:
        return _Ext(EXT_DATETIME, value.isoformat().encode())
    if t is uuid.UUID:
        return _Ext(EXT_UUID, value.bytes)
    if t is dt.timedelta:
        return _Ext(EXT_DURATION, DURATION.pack(value.days, value.seconds, value.microseconds))
    if t is set or t is frozenset:
        return _Ext(EXT_SET, _ENC.encode([to_store(v) for v in value]))
    if t is Vector:
        return _vector_ext(value)
    if t is bytearray:
        return _Ext(EXT_BYTES, bytes(value))
    if t is Number:
        return _Ext(EXT_NUMBER, _ENC.encode(value.value))
    if t is tuple:
        return _Ext(EXT_TUPLE, _ENC.encode([to_store(v) for v in value]))
    bases: tuple[type[Any], ...] = (bool, str, int, float, dict, list)
    for base in bases:  # subclasses: store as the base type
        if isinstance(value, base):
            return to_store(base(value))
    raise TypeError(f"a {t.__name__} cannot be stored")


def _ext_hook(code: int, data: memoryview) -> Any:  # noqa: PLR0911 - type or option dispatch, one case each
    raw = bytes(data)
    if code == EXT_DECIMAL:
        return decimal.Decimal(raw.decode())
    if code == EXT_DATETIME:
        return dt.datetime.fromisoformat(raw.decode())
    if code == EXT_UUID:
        return uuid.UUID(bytes=raw)
    if code == EXT_DURATION:
        days, secs, micros = DURATION.unpack(raw)
        return dt.timedelta(days=days, seconds=secs, microseconds=micros)
    if code == EXT_SET:
        return set(_DEC.decode(raw))
    if code == EXT_VECTOR:
        return Vector(array("d", raw))
    if code == EXT_VECTOR32:
        return Vector(array("f", raw))
    if code == EXT_BYTES:
        return bytearray(raw)
    if code == EXT_NUMBER:
        return Number(_DEC.decode(raw))
    if code == EXT_TUPLE:
        return tuple(_DEC.decode(raw))
    raise ValueError(f"unknown document ext code {code}")


class LazyVector:
    """A stored vector left undecoded (:func:`unpack_record` with ``lazy_vectors``): making
    a vector's Python floats costs more than decoding the rest of a typical record, and a
    projection often drops it. :func:`materialise` turns what is kept into vectors."""

    __slots__ = ("code", "raw")

    def __init__(self, code: int, raw: bytes) -> None:
        self.code = code
        self.raw = raw


def _lazy_ext_hook(code: int, data: memoryview) -> Any:
    if code == EXT_VECTOR or code == EXT_VECTOR32:  # noqa: PLR1714 - ints, compiled
        return LazyVector(code, bytes(data))
    return _ext_hook(code, data)


def materialise(value: Any) -> Any:
    """``value`` with every :class:`LazyVector` in it decoded (dicts and lists walked)."""
    t = type(value)
    if t is LazyVector:
        return _ext_hook(value.code, memoryview(value.raw))
    if t is dict:
        return {k: materialise(v) for k, v in value.items()}
    if t is list:
        return [materialise(v) for v in value]
    return value


_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(ext_hook=_ext_hook)
_LAZY_DEC = msgspec.msgpack.Decoder(ext_hook=_lazy_ext_hook)
_SCRATCH = threading.local()
SCRATCH_BYTES = 4096
SCRATCH_KEEP_MAX = 1 << 20


def encode_exact(encoder: msgspec.msgpack.Encoder | msgspec.json.Encoder, obj: Any) -> bytes:
    """``encoder.encode(obj)``, encoded into this thread's scratch buffer and copied out at
    its exact size. ``encode`` grows its output by repeated reallocation; in a process whose
    caches still grow (a server's read cache keeps every reply body) that touched fresh
    heap several times per call: a 1.4 KB typed YCSB record as JSON, results kept, took
    4.0-4.4 us that way against 3.4 us through the reused buffer (msgspec 0.23.0). Not
    used for stored records: there it measured no faster (the apply loop of 200,000
    YCSB updates: 4.9 us either way, minor faults 0.22 -> 0.20 per write)."""
    scratch = _SCRATCH.__dict__
    buf = scratch.get("buf")
    if buf is None:
        buf = scratch["buf"] = bytearray(SCRATCH_BYTES)
    encoder.encode_into(obj, buf)
    out = bytes(buf)
    if len(buf) > SCRATCH_KEEP_MAX:
        del scratch["buf"]  # a one-off huge value: not kept for the thread's lifetime
    return out

#: Stored record layout: ``[RECORD_VERSION, fields, ttl_seconds | nil, ttl_update_on_access]``.
RECORD_VERSION = 1


def pack_record(fields: dict[str, Any], ttl: float | None = None, touch: bool = False) -> bytes:
    """Encode a record's fields (without ``id``) and its TTL settings."""
    return _ENC.encode([RECORD_VERSION, to_store(fields), ttl, touch])


def unpack_record(data: bytes, *, lazy_vectors: bool = False,
                  ) -> tuple[dict[str, Any], float | None, bool]:
    """Decode what :func:`pack_record` wrote: ``(fields, ttl_seconds, touch)``;
    ``lazy_vectors``: vectors as :class:`LazyVector` (see :func:`materialise`)."""
    version, fields, ttl, touch = (_LAZY_DEC if lazy_vectors else _DEC).decode(data)
    _check_version(version)
    return fields, ttl, touch


def _check_version(version: int) -> None:
    if version != RECORD_VERSION:
        from tuffdb.errors import VersionMismatchError  # noqa: PLC0415 - cold path

        raise VersionMismatchError(f"document record version {version}; upgrade tuffdb")


_SELECTED: dict[tuple[str, ...], msgspec.msgpack.Decoder[Any]] = {}
SELECTED_DECODERS_MAX = 256  # distinct projections kept (a request names its own)


def unpack_selected(data: bytes, names: tuple[str, ...],
                    ) -> tuple[dict[str, Any], float | None, bool]:
    """:func:`unpack_record` keeping only the top-level fields ``names`` (distinct): the
    others are skipped by the decoder, never made into Python objects. A search that
    projects one field of a record holding a text body and a vector decodes it 3-4x
    faster this way than decoding it all (lazily) and projecting."""
    dec = _SELECTED.get(names)
    if dec is None:
        if len(_SELECTED) >= SELECTED_DECODERS_MAX:
            _SELECTED.clear()
        attrs = [f"f{i}" for i in range(len(names))]
        shape = msgspec.defstruct("Selected", [(a, Any, msgspec.UNSET) for a in attrs],
                                  rename=dict(zip(attrs, names, strict=True)))
        layout: Any = tuple.__class_getitem__((int, shape, Any, Any))  # a runtime type
        dec = _SELECTED[names] = msgspec.msgpack.Decoder(layout, ext_hook=_ext_hook)
    version, picked, ttl, touch = dec.decode(data)
    _check_version(version)
    unset = msgspec.UNSET
    fields = {n: v for n, v in zip(names, msgspec.structs.astuple(picked), strict=True)
              if v is not unset}
    return fields, ttl, touch


def pack(value: Any) -> bytes:
    """Encode any typed value (metadata, KV values)."""
    return _ENC.encode(to_store(value))


def pack_native(value: Any) -> bytes:
    """Encode a value made of MessagePack-native objects only (lists of bytes, numbers,
    None: a write intent's ops), as :func:`pack` would, without its per-item type walk."""
    return _ENC.encode(value)


def unpack(data: bytes) -> Any:
    """Decode what :func:`pack` wrote."""
    return _DEC.decode(data)
