"""Collection schemas: field types, required, unique, default, enums, min/max, regex, index.

Wire form (ekoDB ``Schema``)::

    {"fields": {"age": {"field_type": "Integer", "required": true, "min": 0,
                        "index": {"type": "btree"}}},
     "version": 1, "created_at": "...", "last_modified": "...", "bypass_ripple": false}

Rules, checked on every write before anything is written (a violation raises
:class:`tuffdb.errors.IntegrityError` naming the field, and writes nothing):

* ``field_type`` (any case): the value must have that type; these conversions are made
  first: Integer -> Float or Number, Float -> Number, String/Integer/Float -> Decimal,
  String -> DateTime or UUID, Array -> Set, Array of numbers -> Vector. Null is allowed
  unless the field is required.
* ``required``: present and not null (after ``default`` is applied on insert).
* ``enums``: the value equals one of them. ``min``/``max``: bounds on numbers, on the
  length of strings, arrays, sets and vectors.
* ``regex``: Python ``re.search`` on strings.
* ``unique``: enforced by the collection with a hash index.
* ``index``: ``{"type": "hash"}`` or ``{"type": "btree"}`` builds a secondary index;
  ``text``/``vector`` are stored and echoed (used by the search issue).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from tuffdb.documents import values, wire
from tuffdb.errors import IntegrityError, ProtocolError

INDEX_TYPES = ("hash", "btree", "text", "vector")


@dataclass
class FieldSpec:
    field_type: str | None = None
    required: bool = False
    unique: bool = False
    default: Any = None
    enums: list[Any] | None = None
    min: Any = None
    max: Any = None
    regex: str | None = None
    index: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field_type": self.field_type or "Any", "required": self.required,
                               "unique": self.unique}
        for name in ("default", "enums", "min", "max", "regex", "index"):
            v = getattr(self, name)
            if v is not None:
                out[name] = wire.plain(v) if name in ("default", "min", "max", "enums") else v
        return out


@dataclass
class Schema:
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    version: int = 1
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    last_modified: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    primary_key_alias: str = "id"

    def to_wire(self) -> dict[str, Any]:
        return {
            "fields": {k: f.to_wire() for k, f in self.fields.items()},
            "version": self.version,
            "created_at": values.format_datetime(self.created_at),
            "last_modified": values.format_datetime(self.last_modified),
            "bypass_ripple": False,
            "primary_key_alias": self.primary_key_alias,
        }

    def indexed_fields(self) -> dict[str, str]:
        """``{field: "hash" | "ordered"}`` for the indexes this schema asks for."""
        out = {}
        for name, f in self.fields.items():
            kind = (f.index or {}).get("type")
            if kind in ("hash", "btree"):
                out[name] = "hash" if kind == "hash" else "ordered"
            elif f.unique:
                out[name] = "hash"
        return out

    def apply(self, record: dict[str, Any], *, insert: bool) -> dict[str, Any]:
        """Return the record with defaults (on insert) and type conversions applied.

        :raises IntegrityError: naming the first violated rule.
        """
        out = dict(record)
        for name, spec in self.fields.items():
            if insert and out.get(name) is None and spec.default is not None:
                out[name] = spec.default
            if name not in out or out[name] is None:
                if spec.required:
                    raise IntegrityError(f"field '{name}' is required", condition=name)
                continue
            out[name] = _check_field(name, spec, out[name])
        return out


def _check_field(name: str, spec: FieldSpec, value: Any) -> Any:
    if spec.field_type and spec.field_type != "Any":
        value = _convert(name, spec.field_type, value)
    if spec.enums is not None:
        keys = {values.order_key(e) for e in spec.enums}
        if values.order_key(value) not in keys:
            raise IntegrityError(f"field '{name}' must be one of {wire.plain(spec.enums)}", name)
    measure = len(value) if isinstance(value, (str, list, tuple, set, frozenset)) else value
    for which, bound in (("min", spec.min), ("max", spec.max)):
        if bound is None:
            continue
        try:
            good = measure >= bound if which == "min" else measure <= bound
        except TypeError:
            good = False
        if not good:
            raise IntegrityError(f"field '{name}' violates {which} {bound}", condition=name)
    if spec.regex is not None and isinstance(value, str) and not re.search(spec.regex, value):
        raise IntegrityError(f"field '{name}' does not match /{spec.regex}/", condition=name)
    return value


def _convert(name: str, want: str, value: Any) -> Any:  # noqa: C901, PLR0911 - one case per type
    have = values.type_name(value)
    if have == want:
        return value
    try:
        if want == "Float" and have == "Integer":
            return float(value)
        if want == "Number" and have in ("Integer", "Float"):
            return values.Number(value)
        if want == "Decimal" and have in ("String", "Integer", "Float"):
            d = Decimal(str(value))
            if d.is_finite():
                return d
        if want == "DateTime" and have == "String":
            parsed = values.parse_datetime(value)
            if parsed is not None:
                return parsed
        if want == "UUID" and have == "String":
            return uuid.UUID(value)
        if want == "Set" and have == "Array":
            return set(value)
        if want == "Vector" and have == "Array" and all(values.rank_of(x) == values.R_NUM for x in value):  # noqa: E501
            return values.Vector(value)
    except (ValueError, TypeError, InvalidOperation):
        pass
    raise IntegrityError(f"field '{name}' must be {want}, got {have}", condition=name)


def field_from_wire(name: str, spec: Any) -> FieldSpec:
    if not isinstance(spec, dict):
        raise ProtocolError(f"schema field '{name}' must be an object")
    ftype = spec.get("field_type")
    if ftype is not None:
        canon = values.canonical_type(ftype)
        if canon is None and str(ftype).lower() != "any":
            raise ProtocolError(f"schema field '{name}': unknown field_type {ftype!r}")
        ftype = canon or "Any"
    index = spec.get("index")
    if index is not None:
        if not isinstance(index, dict) or str(index.get("type", "")).lower() not in INDEX_TYPES:
            raise ProtocolError(f"schema field '{name}': index type must be one of {INDEX_TYPES}")
        index = {**index, "type": str(index["type"]).lower()}
    regex = spec.get("regex")
    if regex is not None:
        try:
            re.compile(regex)
        except (re.error, TypeError) as exc:
            raise ProtocolError(f"schema field '{name}': bad regex: {exc}") from None
    enums = spec.get("enums")
    return FieldSpec(
        field_type=ftype,
        required=bool(spec.get("required", False)),
        unique=bool(spec.get("unique", False)),
        default=wire.from_wire(spec.get("default")),
        enums=None if enums is None else [wire.from_wire(e) for e in enums],
        min=wire.from_wire(spec.get("min")),
        max=wire.from_wire(spec.get("max")),
        regex=regex,
        index=index,
    )


def from_wire(body: Any) -> Schema:
    """Parse a wire schema (server timestamps replace the client's).

    :raises ProtocolError: on an unknown type, index type, or a bad regex.
    """
    if body is None:
        return Schema()
    if not isinstance(body, dict) or not isinstance(body.get("fields", {}), dict):
        raise ProtocolError("a schema is an object with 'fields': {name: FieldTypeSchema}")
    fields = {str(k): field_from_wire(str(k), v) for k, v in body.get("fields", {}).items()}
    return Schema(fields=fields, primary_key_alias=str(body.get("primary_key_alias") or "id"))


def update_constraints(schema: Schema, constraints: Any) -> Schema:
    """Merge ``{"name": {"required": false, ...}}`` into the schema (partial per field)."""
    if not isinstance(constraints, dict):
        raise ProtocolError("constraints must be an object {field: {rule: value}}")
    fields = dict(schema.fields)
    for name, partial in constraints.items():
        base = fields.get(name, FieldSpec()).to_wire()
        if not isinstance(partial, dict):
            raise ProtocolError(f"constraints for '{name}' must be an object")
        fields[name] = field_from_wire(name, {**base, **partial})
    return Schema(fields, schema.version + 1, schema.created_at, dt.datetime.now(dt.UTC),
                  schema.primary_key_alias)
