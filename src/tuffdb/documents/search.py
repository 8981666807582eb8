"""``collection.search(...)``: full-text (BM25), vector (flat / hnsw) and hybrid search.

Options follow the ekoDB search request (docs/design/search.md has the full table).
The answer has the ekoDB shape::

    {"results": [{"record": {...}, "score": 1.5, "matched_fields": ["title"]}],
     "total": <matches before limit>, "execution_time_ms": <int>}

Order of work: ``filters`` (the query language) pick the records allowed to rank; text
and vector candidates are scored among them; hybrid fuses the two; ``min_score`` and
``vector_threshold`` cut; ties break by id; then ``limit``, then the records are loaded
(an expired record drops out) and projected.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tuffdb.documents.fulltext.scoring import TextQuery, bm25
from tuffdb.documents.search_index import state_for
from tuffdb.documents.shape import project
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from tuffdb.documents.collection import Collection

DEFAULT_LIMIT = 100
DEFAULT_VECTOR_K = 10
EXACT_BOOST = 2.0  # boost_exact: factor for a field holding the whole query verbatim


def _names(value: Any) -> list[str] | None:
    if value is None or value in ("", []):
        return None
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise ProtocolError("fields must be a comma-separated string or a list of names")


def _weights(value: Any) -> dict[str, float]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        out = {}
        for part in value.split(","):
            name, _, w = part.partition(":")
            if name.strip():
                out[name.strip()] = float(w or 1.0)
        return out
    if isinstance(value, dict):
        return {str(k): float(v) for k, v in value.items()}
    raise ProtocolError("weights must be 'title:2.0,body:1.0' or an object of numbers")


def _exact_boost(record: dict[str, Any], fields: set[str], phrase: str, case: bool) -> float:
    needle = phrase if case else phrase.lower()
    for name in fields:
        v: Any = record
        for part in name.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        texts = v if isinstance(v, list) else [v]
        for t in texts:
            if isinstance(t, str) and needle in (t if case else t.lower()):
                return EXACT_BOOST
    return 1.0


def search(coll: Collection, query: str = "", **options: Any) -> dict[str, Any]:  # noqa: C901, PLR0912, PLR0915 - one pass over the request's options
    """Search ``coll``; see the module docstring and docs/design/search.md.

    :raises ProtocolError: on a malformed option (unknown metric, bad fields/weights).
    :raises IntegrityError: when the query vector's dimension differs from the index's.
    """
    started = time.perf_counter()
    o = {k: v for k, v in options.items() if v is not None}
    known = {"language", "case_sensitive", "fuzzy", "max_edit_distance", "min_score", "fields",
             "weights", "enable_stemming", "boost_exact", "limit", "select_fields",
             "exclude_fields", "filters", "vector", "vector_field", "vector_metric", "vector_k",
             "vector_threshold", "ef_search", "text_weight", "vector_weight", "bypass_ripple",
             "bypass_cache"}
    unknown = set(o) - known
    if unknown:
        raise ProtocolError(f"unknown search options {sorted(unknown)}")
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise ProtocolError("query must be a string ('' for vector-only search)")
    tq = TextQuery(query, language=str(o.get("language", "english")).lower(),
                   case_sensitive=bool(o.get("case_sensitive", False)),
                   fuzzy=bool(o.get("fuzzy", False)),
                   max_edit_distance=int(o.get("max_edit_distance", 2)),
                   stemming=bool(o.get("enable_stemming", True)),
                   fields=_names(o.get("fields")), weights=_weights(o.get("weights")))
    limit = int(o.get("limit", DEFAULT_LIMIT))
    vector = o.get("vector")
    allowed = None
    if o.get("filters"):
        allowed = {r["id"] for r in coll.matches(o["filters"])[0]}
    text_hits: dict[str, tuple[float, set[str]]] = {}
    vec_hits: dict[str, float] = {}
    vfield = None
    with coll.db.lock:  # index structures change under writers; scoring is in-memory
        state = state_for(coll)
        if query.strip():
            text_hits = bm25(state.text, tq, allowed)
        if vector is not None:
            vfield = o.get("vector_field") or state.default_vector_field(coll)
            slot = state.vector_slot(coll, vfield, o.get("vector_metric"))
            if slot.index is not None:
                k = int(o.get("vector_k", DEFAULT_VECTOR_K))
                ef = o.get("ef_search")
                vec_hits = dict(slot.index.search(vector, k, allowed=allowed,
                                                  ef_search=int(ef) if ef else None))
            threshold = o.get("vector_threshold")
            if threshold is not None:
                vec_hits = {r: s for r, s in vec_hits.items() if s >= float(threshold)}
    records: dict[str, dict[str, Any]] = {}
    if o.get("boost_exact") and text_hits and query.strip():
        for rid, (s, fields) in list(text_hits.items()):
            rec = coll.load(rid)
            if rec is None:
                del text_hits[rid]
                continue
            records[rid] = rec
            text_hits[rid] = (s * _exact_boost(rec, fields, query.strip(), tq.case_sensitive),
                              fields)
    if (text_hits and vec_hits) or (vector is not None and query.strip()):
        tw = float(o.get("text_weight", 0.5))
        vw = float(o.get("vector_weight", 0.5))
        top_text = max((s for s, _ in text_hits.values()), default=0.0) or 1.0
        top_vec = max((abs(s) for s in vec_hits.values()), default=0.0) or 1.0
        vec_norm = top_vec if slot.metric == "dotproduct" else 1.0
        scored = []
        for rid in text_hits.keys() | vec_hits.keys():
            ts, tf = text_hits.get(rid, (0.0, set()))
            vs = vec_hits.get(rid)
            fields = set(tf) | ({vfield} if vs is not None and vfield else set())
            scored.append((tw * ts / top_text + vw * (vs or 0.0) / vec_norm, rid, fields))
    elif vec_hits:
        scored = [(s, rid, {vfield} if vfield else set()) for rid, s in vec_hits.items()]
    else:
        scored = [(s, rid, fields) for rid, (s, fields) in text_hits.items()]
    min_score = o.get("min_score")
    if min_score is not None:
        scored = [t for t in scored if t[0] >= float(min_score)]
    scored.sort(key=lambda t: (-t[0], t[1]))
    total = len(scored)
    select, exclude = _names(o.get("select_fields")), _names(o.get("exclude_fields"))
    results: list[dict[str, Any]] = []
    for score, rid, fields in scored:
        if len(results) >= limit:
            break
        rec = records.get(rid) or coll.load(rid)
        if rec is None:
            total -= 1
            continue
        results.append({"record": project(rec, select, exclude), "score": score,
                        "matched_fields": sorted(fields)})
    elapsed = int((time.perf_counter() - started) * 1000)
    return {"results": results, "total": total, "execution_time_ms": elapsed}
