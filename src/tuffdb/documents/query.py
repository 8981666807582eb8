"""The filter language of the ekoDB wire, compiled to predicates.

A filter is ``{"type": "Condition", "content": {"field", "operator", "value"}}`` or
``{"type": "Logical", "content": {"operator": "And"|"Or"|"Not", "expressions": [...]}}``,
nested freely; ``None`` matches everything. From Python, ``where("age") >= 18`` builds
the same dicts (combine with ``&``, ``|``, ``~``).

Semantics (shared by the planner, so index plans equal full scans):

* values compare by :func:`tuffdb.documents.values.order_key`; values of different ranks
  are never equal and never ordered (``Gt 5`` does not match ``"6"``); a string filter
  value also matches the DateTime, UUID or number it parses as (Decimals travel as
  strings, so ``"36"`` matches 36);
* a missing field reads as null (``Eq null`` matches it); range operators never match
  null, on either side;
* ``Contains`` is a substring test on strings and a membership test on Array/Set/Vector;
  ``StartsWith``/``EndsWith`` apply to strings only; all three are case-sensitive;
* ``Exists true`` matches when the field is present (even if null);
* ``In``/``NotIn`` take an array; ``NotIn`` and ``Ne`` are the negations of ``In``/``Eq``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuffdb.documents.values import R_NULL, order_key, variants
from tuffdb.documents.wire import from_wire
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable

_ALIASES = {
    "eq": "Eq", "equal": "Eq", "equals": "Eq", "==": "Eq",
    "ne": "Ne", "notequal": "Ne", "notequals": "Ne", "!=": "Ne",
    "gt": "Gt", "greaterthan": "Gt", ">": "Gt",
    "gte": "Gte", "greaterthanorequal": "Gte", "greaterthanorequals": "Gte", ">=": "Gte",
    "lt": "Lt", "lessthan": "Lt", "<": "Lt",
    "lte": "Lte", "lessthanorequal": "Lte", "lessthanorequals": "Lte", "<=": "Lte",
    "in": "In", "notin": "NotIn", "contains": "Contains", "startswith": "StartsWith",
    "endswith": "EndsWith", "exists": "Exists",
}
OPERATORS = ("Eq", "Ne", "Gt", "Gte", "Lt", "Lte", "In", "NotIn", "Contains", "StartsWith",
             "EndsWith", "Exists")
RANGE_OPS = ("Gt", "Gte", "Lt", "Lte")
MISSING = object()


@dataclass(frozen=True, slots=True)
class Cond:
    field: str
    op: str
    value: Any  # typed value (a list for In/NotIn)
    keys: tuple[tuple[Any, ...], ...]  # order keys of the value's variants (In: of every item)


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # "And" | "Or" | "Not"
    children: tuple[Node, ...]


Node = Cond | Logic | None


def canonical_operator(name: Any) -> str:
    op = _ALIASES.get(name.lower()) if isinstance(name, str) else None
    if op is None:
        raise ProtocolError(f"unknown operator {name!r}; use one of {', '.join(OPERATORS)}")
    return op


def parse(spec: Any) -> Node:  # noqa: C901 - type or option dispatch, one case each
    """Compile a filter (wire dict, :class:`Filter`, or None) into a node tree.

    :raises ProtocolError: on an unknown type or operator or a malformed expression.
    """
    if spec is None or spec == {}:
        return None
    if isinstance(spec, (Cond, Logic)):
        return spec
    if isinstance(spec, Filter):
        spec = spec.spec
    if not isinstance(spec, dict):
        raise ProtocolError("a filter must be an object with 'type' and 'content'")
    kind = str(spec.get("type", "")).lower()
    content = spec.get("content", spec)
    if not isinstance(content, dict):
        raise ProtocolError("filter 'content' must be an object")
    if kind in ("condition", "expression"):
        return _condition(content)
    if kind == "logical":
        op = str(content.get("operator", ""))
        op = {"and": "And", "or": "Or", "not": "Not"}.get(op.lower(), op)
        exprs = content.get("expressions", content.get("expression"))
        if isinstance(exprs, dict):
            exprs = [exprs]
        if op not in ("And", "Or", "Not") or not isinstance(exprs, list):
            raise ProtocolError("Logical needs operator And|Or|Not and a list of expressions")
        if op == "Not" and len(exprs) != 1:
            raise ProtocolError("Not takes exactly one expression")
        children = tuple(parse(e) or _ALWAYS for e in exprs)
        return Logic(op, children)
    raise ProtocolError(f"unknown filter type {spec.get('type')!r}; use Condition or Logical")


_ALWAYS = Logic("And", ())


def referenced_fields(spec: Any) -> set[str]:
    """Every field a filter tests (its Conditions' fields, at any depth).

    :raises ProtocolError: as :func:`parse`.
    """
    out: set[str] = set()
    stack = [parse(spec)]
    while stack:
        node = stack.pop()
        if isinstance(node, Cond):
            out.add(node.field)
        elif isinstance(node, Logic):
            stack.extend(node.children)
    return out


def _condition(content: dict[str, Any]) -> Cond:
    field = content.get("field")
    if not isinstance(field, str) or not field:
        raise ProtocolError("a Condition needs a non-empty string 'field'")
    op = canonical_operator(content.get("operator"))
    raw = content.get("value")
    value = raw if _is_typed(raw) else from_wire(raw)
    if op in ("In", "NotIn"):
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ProtocolError(f"{op} takes an array value")
        keys = tuple(order_key(w) for item in value for w in variants(item))
        return Cond(field, op, list(value), keys)
    if op == "Exists":
        return Cond(field, op, bool(value), ())
    return Cond(field, op, value, tuple(order_key(w) for w in variants(value)))


def _is_typed(value: Any) -> bool:
    """Python callers pass typed values already; only wire-shaped input needs decoding."""
    return not isinstance(value, (dict, list))


def get_path(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (``a.b.0``), or :data:`MISSING`."""
    if path in record:
        return record[path]
    cur: Any = record
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part, MISSING)
        elif isinstance(cur, (list, tuple)) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return MISSING
        if cur is MISSING:
            return MISSING
    return cur


def compile_node(node: Node) -> Callable[[dict[str, Any]], bool]:
    """A predicate over records (``id`` included as a field)."""
    if node is None:
        return lambda _r: True
    if isinstance(node, Logic):
        subs = [compile_node(c) for c in node.children]
        if node.op == "And":
            return lambda r: all(s(r) for s in subs)
        if node.op == "Or":
            return lambda r: any(s(r) for s in subs)
        return lambda r: not subs[0](r)
    return _compile_cond(node)


def _compile_cond(c: Cond) -> Callable[[dict[str, Any]], bool]:  # noqa: C901, PLR0911 - one case per op
    field, op, keys = c.field, c.op, c.keys
    if op == "Exists":
        return lambda r: (get_path(r, field) is not MISSING) == c.value

    def key_of(r: dict[str, Any]) -> tuple[Any, ...]:
        v = get_path(r, field)
        return order_key(None if v is MISSING else v)

    if op in ("Eq", "In"):
        keyset = set(keys)
        return lambda r: key_of(r) in keyset
    if op in ("Ne", "NotIn"):
        keyset = set(keys)
        return lambda r: key_of(r) not in keyset
    if op in RANGE_OPS:
        return lambda r: matches_range(key_of(r), op, keys)
    needle = c.value
    if op == "Contains":
        needle_keys = set(keys)

        def contains(r: dict[str, Any]) -> bool:
            v = get_path(r, field)
            if type(v) is str and type(needle) is str:
                return needle in v
            if isinstance(v, (list, tuple, set, frozenset)):
                return any(order_key(x) in needle_keys for x in v)
            return False

        return contains
    if type(needle) is not str:
        return lambda _r: False
    if op == "StartsWith":
        return lambda r: type(v := get_path(r, field)) is str and v.startswith(needle)
    return lambda r: type(v := get_path(r, field)) is str and v.endswith(needle)


def matches_range(k: tuple[Any, ...], op: str, keys: tuple[tuple[Any, ...], ...]) -> bool:
    """Whether order key ``k`` satisfies ``op`` against any same-rank variant key."""
    for q in keys:
        if q[0] != k[0] or q[0] == R_NULL:  # null is never greater or less than anything
            continue
        try:
            if (op == "Gt" and k > q) or (op == "Gte" and k >= q) or (op == "Lt" and k < q) or (
                op == "Lte" and k <= q
            ):
                return True
        except TypeError:  # mixed naive/aware or NaN-like edge: not comparable, no match
            continue
    return False


class Filter:
    """A filter built in Python: ``where("age") > 5``; ``&``, ``|`` and ``~`` combine."""

    __slots__ = ("spec",)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def __and__(self, other: Filter) -> Filter:
        return Filter(_logical("And", [self.spec, other.spec]))

    def __or__(self, other: Filter) -> Filter:
        return Filter(_logical("Or", [self.spec, other.spec]))

    def __invert__(self) -> Filter:
        return Filter(_logical("Not", [self.spec]))

    def __repr__(self) -> str:
        return f"Filter({self.spec!r})"


def _logical(op: str, exprs: list[Any]) -> dict[str, Any]:
    return {"type": "Logical", "content": {"operator": op, "expressions": exprs}}


class where:  # noqa: N801 - reads as a function
    """A field reference whose comparisons build :class:`Filter` objects."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field

    def _c(self, op: str, value: Any) -> Filter:
        return Filter({"type": "Condition", "content": {"field": self.field, "operator": op, "value": value}})  # noqa: E501

    def __eq__(self, value: object) -> Filter:  # type: ignore[override]
        return self._c("Eq", value)

    def __ne__(self, value: object) -> Filter:  # type: ignore[override]
        return self._c("Ne", value)

    def __gt__(self, value: Any) -> Filter:
        return self._c("Gt", value)

    def __ge__(self, value: Any) -> Filter:
        return self._c("Gte", value)

    def __lt__(self, value: Any) -> Filter:
        return self._c("Lt", value)

    def __le__(self, value: Any) -> Filter:
        return self._c("Lte", value)

    __hash__ = None  # type: ignore[assignment]

    def one_of(self, values: list[Any]) -> Filter:
        return self._c("In", values)

    def not_in(self, values: list[Any]) -> Filter:
        return self._c("NotIn", values)

    def contains(self, value: Any) -> Filter:
        return self._c("Contains", value)

    def startswith(self, value: str) -> Filter:
        return self._c("StartsWith", value)

    def endswith(self, value: str) -> Filter:
        return self._c("EndsWith", value)

    def exists(self, flag: bool = True) -> Filter:
        return self._c("Exists", flag)
