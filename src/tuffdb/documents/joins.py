"""Joins: ``{"collections": [...], "local_field", "foreign_field", "as_field"}``.

For each record, every collection named is searched for records whose
``foreign_field`` equals the record's ``local_field`` (``foreign_field: "id"`` is a direct
get; other fields use an index when there is one). The matches, from all named
collections in the order given, become a list under ``as_field``. A list of join specs
applies each in turn. A missing local field joins nothing (an empty list).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.documents.query import MISSING, Cond, get_path
from tuffdb.documents.values import order_key, variants
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from tuffdb.documents.database import Database


def join_spec(raw: Any) -> tuple[list[str], str, str, str]:
    """``(collections, local_field, foreign_field, as_field)`` of one join spec.

    :raises ProtocolError: when it is malformed.
    """
    if not isinstance(raw, dict):
        raise ProtocolError("join must be an object {collections, local_field, foreign_field, as_field}")  # noqa: E501
    colls = raw.get("collections", raw.get("collection"))
    if isinstance(colls, str):
        colls = [colls]
    names = [raw.get("local_field"), raw.get("foreign_field"), raw.get("as_field")]
    if not isinstance(colls, list) or not colls or not all(isinstance(n, str) and n for n in names):
        raise ProtocolError("join needs collections, local_field, foreign_field and as_field")
    return [str(c) for c in colls], *names  # type: ignore[return-value]


def apply_join(db: Database, records: list[dict[str, Any]], join: Any) -> list[dict[str, Any]]:
    for raw in join if isinstance(join, list) else [join]:
        colls, local, foreign, as_field = join_spec(raw)
        out = []
        for record in records:
            value = get_path(record, local)
            joined: list[dict[str, Any]] = []
            if value is not MISSING and value is not None:
                for name in colls:
                    coll = db.collection(name)
                    if foreign == "id":
                        hit = coll.load(value) if isinstance(value, str) else None
                        joined.extend([hit] if hit is not None else [])
                    else:
                        keys = tuple(order_key(w) for w in variants(value))
                        joined.extend(coll.matches(Cond(foreign, "Eq", value, keys))[0])
            out.append({**record, as_field: joined})
        records = out
    return records
