"""Query planning: which ids to fetch for a filter, and whether an index gives the order.

A plan never decides what matches: it yields *candidate* ids (a superset of the matches)
and the collection re-checks the whole filter on each fetched record. So a plan is
correct whenever its candidate set contains every match, which is what the property
tests check against a full scan.

* ``id Eq/In`` -> ``id_lookup`` (direct gets);
* ``Eq``/``In`` on a hash or ordered index -> ``index_eq``;
* ``Gt``/``Gte``/``Lt``/``Lte`` on an ordered index -> ``index_range`` (one window per
  rank of the value's variants, so ``"2026-01-01"`` also scans the DateTime window);
* ``And`` intersects the candidate sets of its indexable children; ``Or`` unions them when
  every child is indexable; ``Not`` and the other operators are never indexable;
* no usable filter, and the first sort field has an ordered index -> ``index_sort``: walk
  the index in sort order and stop once ``skip + limit`` records matched;
* otherwise ``full_scan`` over the collection's key prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuffdb.documents.indexes import Index, OrderedIndex
from tuffdb.documents.query import Cond, Logic, Node
from tuffdb.documents.values import R_NULL, R_STR

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


@dataclass
class Plan:
    kind: str  # id_lookup | index_eq | index_range | index_and | index_or | index_sort | full_scan
    indexes: list[str] = field(default_factory=list)  # "field (kind)" of each index used
    ids: list[str] | None = None  # candidates in id order; None = scan or walk
    walk: Iterator[str] | None = None  # index_sort: ids in sort order
    sort_done: bool = False  # the walk already yields the requested order

    def explain(self) -> dict[str, Any]:
        out: dict[str, Any] = {"plan": self.kind, "indexes": list(self.indexes)}
        if self.ids is not None:
            out["candidates"] = len(self.ids)
        out["sort_by_index"] = self.sort_done
        return out


def plan(node: Node, indexes: dict[str, Index], sort: list[tuple[str, bool]]) -> Plan:
    used: list[str] = []
    ids = _candidates(node, indexes, used)
    if ids is not None:
        kinds = {u.split(" ", 1)[0] for u in used}
        if "id_lookup" in kinds and len(used) == 1:
            kind = "id_lookup"
        elif isinstance(node, Logic) and node.op in ("And", "Or") and len(used) > 1:
            kind = "index_and" if node.op == "And" else "index_or"
        else:
            kind = "index_range" if any("range" in u for u in used) else "index_eq"
        return Plan(kind, [u.split(" ", 1)[1] for u in used], sorted(ids))
    if len(sort) == 1:
        fname, ascending = sort[0]
        idx = indexes.get(fname)
        if isinstance(idx, OrderedIndex):
            return Plan("index_sort", [f"{fname} (ordered)"], walk=idx.walk(ascending),
                        sort_done=True)
    return Plan("full_scan")


def _candidates(node: Node, indexes: dict[str, Index], used: list[str]) -> set[str] | None:  # noqa: PLR0911 - type or option dispatch, one case each
    if node is None:
        return None
    if isinstance(node, Logic):
        if node.op == "Not" or not node.children:
            return None
        subs = [_candidates(c, indexes, used) for c in node.children]
        if node.op == "And":
            known = [s for s in subs if s is not None]
            if not known:
                return None
            out = known[0]
            for s in known[1:]:
                out = out & s
            return out
        if any(s is None for s in subs):
            return None
        return set().union(*subs)  # type: ignore[arg-type]
    return _cond_candidates(node, indexes, used)


def _cond_candidates(c: Cond, indexes: dict[str, Index], used: list[str]) -> set[str] | None:
    if c.field == "id" and c.op in ("Eq", "In"):
        used.append("id_lookup id (primary)")
        return {k[1] for k in c.keys if k[0] == R_STR}
    idx = indexes.get(c.field)
    if idx is None:
        return None
    if c.op in ("Eq", "In"):
        used.append(f"eq {c.field} ({idx.kind})")
        return set(idx.lookup(c.keys))
    if c.op in ("Gt", "Gte", "Lt", "Lte") and isinstance(idx, OrderedIndex):
        used.append(f"range {c.field} ({idx.kind})")
        return set(_range_ids(idx, c.op, c.keys))
    return None


def _range_ids(idx: OrderedIndex, op: str, keys: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    for q in keys:
        rank = q[0]
        if rank == R_NULL:
            continue  # nothing is greater or less than null within its rank
        floor, ceiling = (rank,), (rank + 1,)
        if op == "Gt":
            yield from idx.range(q, False, ceiling, False)
        elif op == "Gte":
            yield from idx.range(q, True, ceiling, False)
        elif op == "Lt":
            yield from idx.range(floor, True, q, False)
        else:
            yield from idx.range(floor, True, q, True)
