"""Typed values: the 16 ekoDB types, their Python forms and their orderings.

Python form of each type (what ``Collection.get`` returns, and what ``insert`` takes):

=========  ==========================  =========  ==========================
String     ``str``                     UUID       ``uuid.UUID``
Integer    ``int`` (signed 64-bit)     Duration   ``datetime.timedelta``
Float      ``float``                   Array      ``list``
Boolean    ``bool``                    Set        ``set`` / ``frozenset``
Number     :class:`Number`             Vector     :class:`Vector`
Decimal    ``decimal.Decimal``         Object     ``dict`` (str keys)
DateTime   ``datetime.datetime``       Binary     ``bytes``
Null       ``None``                    Bytes      ``bytearray``
=========  ==========================  =========  ==========================

The storage codec is in :mod:`tuffdb.documents.codec`, the ekoDB wire forms in
:mod:`tuffdb.documents.wire`. This module owns the one total order every comparison,
sort and index uses (:func:`order_key`), so a query plan and a full scan agree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import uuid
from array import array
from dataclasses import dataclass
from typing import Any, Self

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

TYPE_NAMES = (
    "String", "Integer", "Float", "Boolean", "Number", "Decimal", "DateTime", "UUID",
    "Duration", "Array", "Set", "Vector", "Object", "Binary", "Bytes", "Null",
)
_BY_LOWER = {name.lower(): name for name in TYPE_NAMES}


def canonical_type(name: str) -> str | None:
    """The PascalCase type name for ``name`` in any case, or None if it names no type."""
    return _BY_LOWER.get(name.lower()) if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class Number:
    """ekoDB's untyped ``Number``: an int or float that keeps its type name on a round trip."""

    value: int | float


_FLOAT = frozenset({float})


class Vector(tuple[float, ...]):
    """A dense float vector (ekoDB ``Vector``); immutable, compares like a tuple."""

    __slots__ = ()

    def __new__(cls, items: Any = ()) -> Self:
        if type(items) is array and items.typecode in "df":  # decoded from storage
            return super().__new__(cls, items)
        if type(items) is list and set(map(type, items)) <= _FLOAT:  # checked at C speed
            return super().__new__(cls, items)
        return super().__new__(cls, (float(x) for x in items))

    def __repr__(self) -> str:
        return f"Vector({list(self)!r})"


def type_name(value: Any) -> str:
    """The ekoDB type name of a Python value.

    :raises TypeError: when the value has no ekoDB type.
    """
    t = type(value)
    name = _TYPE_OF.get(t)
    if name is not None:
        if name == "Integer" and not INT64_MIN <= value <= INT64_MAX:
            raise TypeError(f"integer {value} does not fit in 64 bits; store it as a Decimal")
        return name
    for base, base_name in _TYPE_OF.items():  # subclasses (IntEnum, OrderedDict, ...)
        if base is not bool and isinstance(value, base):
            return base_name
    raise TypeError(f"a {t.__name__} cannot be stored; use one of the 16 document value types")


_TYPE_OF: dict[type, str] = {
    bool: "Boolean",
    str: "String",
    int: "Integer",
    float: "Float",
    type(None): "Null",
    Number: "Number",
    decimal.Decimal: "Decimal",
    dt.datetime: "DateTime",
    uuid.UUID: "UUID",
    dt.timedelta: "Duration",
    Vector: "Vector",
    list: "Array",
    tuple: "Array",
    set: "Set",
    frozenset: "Set",
    dict: "Object",
    bytes: "Binary",
    bytearray: "Bytes",
}


# Exact types that are always storable and hold nothing: check() need not visit them.
_LEAVES = frozenset((str, float, bool, type(None), bytes))


def check(value: Any, path: str = "") -> None:
    """Raise TypeError (naming the field path) if anything in ``value`` is not storable."""
    name = type_name(value)
    if name == "Object":
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"object keys must be strings, got {k!r} at {path or 'top'}")
            if type(v) not in _LEAVES:
                check(v, f"{path}.{k}" if path else k)
    elif name in ("Array", "Set"):
        for i, v in enumerate(value):
            check(v, f"{path}[{i}]")


# --- the one total order ------------------------------------------------------------
# Ranks: values of different ranks never compare equal, and order by rank.
R_NULL, R_BOOL, R_NUM, R_STR, R_TIME, R_UUID, R_DUR, R_BIN, R_ARR, R_SET, R_OBJ = range(11)
_UTC = dt.UTC


def order_key(value: Any) -> tuple[Any, ...]:  # noqa: C901, PLR0911 - type or option dispatch, one case each
    """A hashable key whose ``==`` and ``<`` define equality and ordering of values.

    Numbers of every type (int, float, Decimal, Number) share one rank, so ``1 == 1.0``;
    booleans are not numbers. Naive datetimes are taken as UTC.
    """
    t = type(value)
    if t is str:
        return (R_STR, value)
    if t is bool:
        return (R_BOOL, value)
    if t is int or t is float or t is decimal.Decimal:
        return (R_NUM, value)
    if value is None:
        return (R_NULL,)
    if t is Number:
        return (R_NUM, value.value)
    if t is dt.datetime:
        return (R_TIME, value if value.tzinfo else value.replace(tzinfo=_UTC))
    if t is uuid.UUID:
        return (R_UUID, value.bytes)
    if t is dt.timedelta:
        return (R_DUR, value)
    if t is bytes or t is bytearray:
        return (R_BIN, bytes(value))
    if t is dict:
        return (R_OBJ, tuple(sorted((k, order_key(v)) for k, v in value.items())))
    if t is set or t is frozenset:
        return (R_SET, tuple(sorted(order_key(v) for v in value)))
    if isinstance(value, (list, tuple)):
        return (R_ARR, tuple(order_key(v) for v in value))
    return order_key(_normalise_subclass(value))


def _normalise_subclass(value: Any) -> Any:
    bases: tuple[type[Any], ...] = (bool, str, int, float, dict, bytes)
    for base in bases:
        if isinstance(value, base):
            return base(value)
    raise TypeError(f"a {type(value).__name__} has no ordering here")


def rank_of(value: Any) -> int:
    """The rank part of :func:`order_key`."""
    return int(order_key(value)[0])


def variants(value: Any) -> list[Any]:
    """The value plus what a string could mean (DateTime, UUID, Decimal).

    Wire filters carry plain JSON, so ``"2026-01-01T00:00:00Z"`` must be able to match a
    DateTime field. The evaluator and the planner both use these variants, so an index
    plan returns exactly what a full scan returns.
    """
    out = [value]
    if type(value) is str and 0 < len(value) <= 64:
        parsed = parse_datetime(value)
        if parsed is not None:
            out.append(parsed)
        with contextlib.suppress(ValueError):
            out.append(uuid.UUID(value))
        try:
            d = decimal.Decimal(value)
        except decimal.InvalidOperation:
            pass
        else:
            if d.is_finite():
                out.append(d)
    return out


def parse_datetime(text: str) -> dt.datetime | None:
    """Parse RFC 3339 (``Z`` or offset; fractions beyond microseconds truncated), else None."""
    if len(text) < 10 or not text[:4].isdigit() or text[4:5] != "-":
        return None
    s = text.strip()
    if "." in s:  # cut nanoseconds to the microseconds Python keeps
        head, _, tail = s.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        if digits > 6:
            s = f"{head}.{tail[:6]}{tail[digits:]}"
    try:
        return dt.datetime.fromisoformat(s)
    except ValueError:
        return None


def format_datetime(value: dt.datetime) -> str:
    """RFC 3339 text; naive datetimes are written as UTC with ``Z``."""
    if value.tzinfo is None or value.utcoffset() == dt.timedelta(0):
        return value.replace(tzinfo=None).isoformat() + "Z"
    return value.isoformat()
