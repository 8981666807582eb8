"""ekoDB wire forms of typed values: ``{"type": T, "value": v}`` envelopes and plain JSON.

Reading (:func:`from_wire`): a map with exactly the keys ``type`` and ``value`` whose
type names one of the 16 types is an envelope, at any depth. Plain JSON is inferred:
strings stay String (even UUID-looking ones), float lists stay Array. A 16-byte
MessagePack bin is a UUID (that is how ekodb-client sends ``uuid.UUID``).

Writing (:func:`to_wire`): with typed values on, each top-level field is an envelope;
inside Objects and Arrays, JSON-native values are plain and the others are envelopes,
so every type survives a round trip through the wire.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import uuid
from typing import Any

from tuffdb.documents.values import (
    INT64_MAX,
    INT64_MIN,
    Number,
    Vector,
    canonical_type,
    format_datetime,
    parse_datetime,
    type_name,
)
from tuffdb.errors import ProtocolError

_JSON_NATIVE = frozenset((str, int, float, bool, type(None)))


def from_wire(value: Any) -> Any:  # noqa: PLR0911 - type or option dispatch, one case each
    """Decode a wire value (JSON or MessagePack, already parsed) into a typed value.

    :raises ProtocolError: when an envelope's value does not fit its type.
    """
    t = type(value)
    if t in _JSON_NATIVE:
        if t is int and not INT64_MIN <= value <= INT64_MAX:
            return decimal.Decimal(value)
        return value
    if t is dict:
        if len(value) == 2 and "type" in value and "value" in value:
            name = canonical_type(value["type"])
            if name is not None:
                return decode_envelope(name, value["value"])
        return {str(k): from_wire(v) for k, v in value.items()}
    if t is list:
        return [from_wire(v) for v in value]
    if t is bytes or t is bytearray or t is memoryview:
        raw = bytes(value)
        return uuid.UUID(bytes=raw) if len(raw) == 16 else raw
    try:  # already a typed value (Python callers)
        type_name(value)
    except TypeError:
        raise ProtocolError(f"unsupported wire value of type {t.__name__}") from None
    return value


def decode_envelope(name: str, v: Any) -> Any:  # noqa: C901, PLR0911, PLR0912 - one case per type
    """Decode the ``value`` of an envelope of type ``name``."""
    try:
        if name == "String":
            return _need(v, str, name)
        if name == "Integer":
            if type(v) is float and v.is_integer():
                v = int(v)
            v = _need(v, int, name)
            if not INT64_MIN <= v <= INT64_MAX:
                raise ProtocolError("Integer out of the 64-bit range")
            return v
        if name == "Float":
            return float(_need(v, (int, float), name))
        if name == "Boolean":
            return _need(v, bool, name)
        if name == "Number":
            return Number(_need(v, (int, float), name))
        if name == "Decimal":
            d = decimal.Decimal(str(_need(v, (str, int, float), name)))
            if not d.is_finite():
                raise ProtocolError("Decimal must be finite")
            return d
        if name == "DateTime":
            parsed = parse_datetime(_need(v, str, name))
            if parsed is None:
                raise ProtocolError(f"DateTime {v!r} is not RFC 3339")
            return parsed
        if name == "UUID":
            if isinstance(v, (bytes, bytearray)):
                return uuid.UUID(bytes=bytes(v))
            return uuid.UUID(_need(v, str, name))
        if name == "Duration":
            return _duration(v)
        if name in ("Array", "Set", "Vector"):
            items = _need(v, list, name)
            if name == "Vector":
                return Vector(_need(x, (int, float), name) for x in items)
            decoded = [from_wire(x) for x in items]
            return set(decoded) if name == "Set" else decoded
        if name == "Object":
            return {str(k): from_wire(x) for k, x in _need(v, dict, name).items()}
        if name in ("Binary", "Bytes"):
            raw = _bytes(v)
            return raw if name == "Binary" else bytearray(raw)
        if v is not None:
            raise ProtocolError("Null envelope must carry null")
    except (ValueError, TypeError, decimal.InvalidOperation, binascii.Error) as exc:
        raise ProtocolError(f"bad {name} value {v!r}: {exc}") from None
    return None


def _need(v: Any, types: type | tuple[type, ...], name: str) -> Any:
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(v, allowed) or (type(v) is bool and bool not in allowed):
        raise ProtocolError(f"{name} value has the wrong type ({type(v).__name__})")
    return v


def _duration(v: Any) -> dt.timedelta:
    if isinstance(v, dict):
        secs, nanos = v.get("secs", 0), v.get("nanos", 0)
        micros = _need(nanos, int, "Duration") // 1000
        return dt.timedelta(seconds=_need(secs, int, "Duration"), microseconds=micros)
    return dt.timedelta(seconds=_need(v, (int, float), "Duration"))


def _bytes(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return base64.b64decode(v.encode(), validate=True)
    if isinstance(v, list):
        return bytes(v)
    raise TypeError("binary must be base64 text, bin or an array of ints")


def plain(value: Any) -> Any:  # noqa: C901, PLR0911 - type or option dispatch, one case each
    """The value part of an envelope (JSON-able, or MessagePack-able)."""
    t = type(value)
    if t in _JSON_NATIVE:
        return value
    if t is dict:
        return {k: nested(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [nested(v) for v in value]
    if t is decimal.Decimal:
        return str(value)
    if t is dt.datetime:
        return format_datetime(value)
    if t is uuid.UUID:
        return str(value)
    if t is dt.timedelta:
        micros = value // dt.timedelta(microseconds=1)
        secs, rest = divmod(micros, 1_000_000)
        return {"secs": secs, "nanos": rest * 1000}
    if t is set or t is frozenset:
        from tuffdb.documents.values import order_key  # noqa: PLC0415

        return [nested(v) for v in sorted(value, key=order_key)]
    if t is Vector:
        return list(value)
    if t is bytes or t is bytearray:
        return base64.b64encode(value).decode()
    if t is Number:
        return value.value
    return plain(_base(value))


def _base(value: Any) -> Any:
    bases: tuple[type[Any], ...] = (bool, str, int, float, dict, list)
    for base in bases:
        if isinstance(value, base):
            return base(value)
    raise TypeError(f"a {type(value).__name__} has no wire form")


def nested(value: Any) -> Any:
    """A value inside an Object or Array: plain if JSON-native, else an envelope."""
    t = type(value)
    if t in _JSON_NATIVE or t is dict or t is list:
        return plain(value)
    return envelope(value)


def envelope(value: Any) -> dict[str, Any]:
    """``{"type": T, "value": v}`` for one value."""
    return {"type": type_name(value), "value": plain(value)}


# Scalar types whose envelope is ``{"type": name, "value": v}`` with v as is.
_SIMPLE_TYPE = {str: "String", float: "Float", bool: "Boolean", type(None): "Null"}


def record_to_wire(record: dict[str, Any], *, typed: bool = True) -> dict[str, Any]:
    """A stored record as the wire sends it: ``id`` and ``ttl`` plain, other fields typed."""
    out: dict[str, Any] = {}
    simple = _SIMPLE_TYPE.get
    for k, v in record.items():
        if k in ("id", "ttl") or not typed:
            out[k] = plain(v)
        elif (name := simple(type(v))) is not None:  # same as envelope(v), without the calls
            out[k] = {"type": name, "value": v}
        else:
            out[k] = envelope(v)
    return out


def record_from_wire(body: Any) -> dict[str, Any]:
    """A wire record (a map) as typed values.

    :raises ProtocolError: when the body is not a map or a value is malformed.
    """
    if not isinstance(body, dict):
        raise ProtocolError("a record must be a JSON object / MessagePack map")
    return {str(k): from_wire(v) for k, v in body.items()}
