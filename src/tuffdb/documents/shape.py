"""Result shaping: sort lists, paging and projections (``select`` / ``exclude``).

Sort is stable and applied key by key from the last, so ties keep scan order (ids in
ascending order); a missing field sorts as null, which is first in ascending order.
``select`` keeps only the named fields (``id`` always stays); ``exclude`` drops fields;
an empty list means "no projection" (ekodb-client sends ``[]`` from ``find_all``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.documents.query import MISSING, get_path
from tuffdb.documents.values import order_key
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable

SortSpec = list[tuple[str, bool]]


def parse_sort(spec: Any) -> SortSpec:
    """Normalise a sort spec to ``[(field, ascending)]``.

    Accepts the wire list ``[{"field": f, "ascending": b}]``, a single such object (older
    docs), and from Python ``"age"``, ``"-age"``, ``("age", False)`` or a list of those.

    :raises ProtocolError: on anything else.
    """
    if spec is None or spec == []:
        return []
    if isinstance(spec, (dict, str, tuple)):
        spec = [spec]
    if not isinstance(spec, list):
        raise ProtocolError("sort must be a list of {field, ascending}")
    out: SortSpec = []
    for item in spec:
        if isinstance(item, str):
            out.append((item[1:], False) if item.startswith("-") else (item, True))
        elif isinstance(item, tuple) and len(item) == 2:
            out.append((str(item[0]), bool(item[1])))
        elif isinstance(item, dict) and isinstance(item.get("field"), str):
            asc = item.get("ascending", True)
            if not isinstance(asc, bool):
                raise ProtocolError("sort 'ascending' must be a boolean")
            out.append((item["field"], asc))
        else:
            raise ProtocolError(f"bad sort item {item!r}; use {{'field': f, 'ascending': b}}")
    return out


def sort_key(field: str) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    def key(record: dict[str, Any]) -> tuple[Any, ...]:
        v = get_path(record, field)
        return order_key(None if v is MISSING else v)

    return key


def sort_records(records: list[dict[str, Any]], sort: SortSpec) -> list[dict[str, Any]]:
    """Sort in place by a multi-key spec (stable), and return the list."""
    for field, ascending in reversed(sort):
        try:
            records.sort(key=sort_key(field), reverse=not ascending)
        except TypeError:  # incomparable values of one rank: fall back to their text
            text_key = _text_key(field)
            records.sort(key=text_key, reverse=not ascending)
    return records


def _text_key(field: str) -> Callable[[dict[str, Any]], str]:
    key = sort_key(field)
    return lambda r: repr(key(r))


def page(records: list[Any], skip: int | None, limit: int | None) -> list[Any]:
    skip = skip or 0
    if skip < 0 or (limit is not None and limit < 0):
        raise ProtocolError("skip and limit must not be negative")
    return records[skip:] if limit is None else records[skip : skip + limit]


def project(
    record: dict[str, Any], select: list[str] | None, exclude: list[str] | None
) -> dict[str, Any]:
    """Apply ``select`` then ``exclude`` (top-level names or dotted paths)."""
    if select:
        out: dict[str, Any] = {"id": record["id"]} if "id" in record else {}
        for name in select:
            if name in record:
                out[name] = record[name]
            elif "." in name:
                v = get_path(record, name)
                if v is not MISSING:
                    _set_path(out, name, v)
        record = out
    if exclude:
        record = dict(record)
        for name in exclude:
            if name != "id":
                _drop_path(record, name)
    return record


def _set_path(record: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    cur = record
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[last] = value


def _drop_path(record: dict[str, Any], path: str) -> None:
    if path in record:
        del record[path]
        return
    *parents, last = path.split(".")
    cur: Any = record
    for i, p in enumerate(parents):
        if not isinstance(cur, dict) or p not in cur:
            return
        if i == 0:  # copy-on-write so the caller's nested dicts are not changed
            cur[p] = dict(cur[p]) if isinstance(cur[p], dict) else cur[p]
        cur = cur[p]
    if isinstance(cur, dict):
        cur.pop(last, None)
