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

import numpy as np

from tuffdb.documents import codec
from tuffdb.documents.fulltext.scoring import TextQuery, bm25
from tuffdb.documents.query import referenced_fields
from tuffdb.documents.search_index import SearchState, state_for
from tuffdb.documents.shape import project
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from tuffdb.documents.collection import Collection

DEFAULT_LIMIT = 100
DEFAULT_VECTOR_K = 10
EXACT_BOOST = 2.0  # boost_exact: factor for a field holding the whole query verbatim
OPTIONS = frozenset((
    "language", "case_sensitive", "fuzzy", "max_edit_distance", "min_score", "fields",
    "weights", "enable_stemming", "boost_exact", "limit", "select_fields", "exclude_fields",
    "filters", "vector", "vector_field", "vector_metric", "vector_k", "vector_threshold",
    "ef_search", "text_weight", "vector_weight", "bypass_ripple", "bypass_cache",
    "vector_recall", "explain"))


def field_names(value: Any) -> list[str] | None:
    """A ``fields``-style option (comma string or list) as a list; None when absent."""
    if value is None or value in ("", []):
        return None
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise ProtocolError("fields must be a comma-separated string or a list of names")


def field_weights(value: Any) -> dict[str, float]:
    """A ``weights`` option (``'title:2.0,body:1.0'`` or an object) as a dict."""
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


def _top_level(select: list[str] | None) -> tuple[str, ...] | None:
    """The distinct stored fields a ``select`` of top-level names keeps (None: not one)."""
    if not select or "." in "".join(select):
        return None
    return tuple(dict.fromkeys(n for n in select if n != "id"))


def _load_projected(coll: Collection, rid: str, data: bytes | None, select: list[str] | None,
                    exclude: list[str] | None, names: tuple[str, ...] | None = None,
                    ) -> dict[str, Any] | None:
    """Record ``rid``, whose stored bytes are ``data``, projected; None if gone or expired.
    ``names``: ``_top_level(select)``, then only those fields are decoded; else with a
    projection, vectors are decoded only if kept (most of the decoding time of a record
    holding one)."""
    if data is None:
        return None
    if names is not None:
        fields, ttl, _ = codec.unpack_selected(data, names)
        if ttl is None:  # else the full decode below applies expiry and touch
            return project({"id": rid, **fields}, None, exclude)
    elif select or exclude:
        fields, ttl, _ = codec.unpack_record(data, lazy_vectors=True)
        if ttl is None:  # else the full decode below applies expiry and touch
            result: dict[str, Any] | None = codec.materialise(
                project({"id": rid, **fields}, select, exclude))
            return result
    rec = coll.decode_stored(rid, data)[0]
    return None if rec is None else project(rec, select, exclude)


def search(coll: Collection, query: str = "", **options: Any) -> dict[str, Any]:  # noqa: C901 - one pass over the request's options
    """Search ``coll``; see the module docstring and docs/design/search.md.

    :raises ProtocolError: on a malformed option (unknown metric, bad fields/weights).
    :raises IntegrityError: when the query vector's dimension differs from the index's.
    """
    started = time.perf_counter()
    o = {k: v for k, v in options.items() if v is not None}
    unknown = o.keys() - OPTIONS
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
                   fields=field_names(o.get("fields")),
                   weights=field_weights(o.get("weights")))
    limit = int(o.get("limit", DEFAULT_LIMIT))
    vector = o.get("vector")
    allowed = None
    if o.get("filters"):
        allowed = {r["id"] for r in coll.matches(o["filters"])[0]}
    boost = bool(o.get("boost_exact")) and bool(query.strip())
    explain: dict[str, Any] | None = {} if o.get("explain") else None
    with coll.db.lock:  # index structures change under writers; scoring is in-memory
        state = state_for(coll)
        top, total = _rank(coll, state, query, vector, tq, o, allowed, limit, boost, explain)
    records: dict[str, dict[str, Any]] = {}
    if boost:
        boosted = []
        for score, rid, fields in top:
            rec = coll.load(rid)
            if rec is None:
                continue
            records[rid] = rec
            factor = _exact_boost(rec, fields, query.strip(), tq.case_sensitive)
            boosted.append((score * factor, rid, fields))
        top = sorted(boosted, key=lambda t: (-t[0], t[1]))
    select = field_names(o.get("select_fields"))
    exclude = field_names(o.get("exclude_fields"))
    names = _top_level(select)
    results: list[dict[str, Any]] = []
    # the first ``limit`` records in one engine call; any after them (when some expired
    # since they were indexed) one by one
    loaded = coll.stored_many([rid for _, rid, _ in top[:limit] if rid not in records])
    used = 0
    for score, rid, fields in top:
        if len(results) >= limit:
            break
        rec = records.get(rid)
        got: dict[str, Any] | None
        if rec is not None:
            got = project(rec, select, exclude)
        else:
            data = loaded[used] if used < len(loaded) else coll.stored(rid)
            used += 1
            got = _load_projected(coll, rid, data, select, exclude, names)
        if got is None:  # expired since it was indexed
            total -= 1
            continue
        results.append({"record": got, "score": score, "matched_fields": sorted(fields)})
    elapsed = int((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {"results": results, "total": total, "execution_time_ms": elapsed}
    if explain is not None:
        out["explain"] = {"vector": explain or None, "text": bool(query.strip()),
                          "filtered": allowed is not None}
    return out


def stats(coll: Collection, *, settle: float | None = None) -> dict[str, Any]:
    """``collection.search_stats()``: the text index's size and each vector index's state."""
    state = state_for(coll)
    engines = [(f, m, slot.index) for (f, m), slot in state.vectors.items()]
    if settle is not None:
        for _, _, engine in engines:
            if engine is not None:
                engine.settle(settle)
    text = state.text
    return {"text": {"records": len(text), "terms": len(text.vocabulary),
                     "fields": {f: text.doc_count(f) for f in text.field_names()}},
            "vectors": [{"field": f, "metric": m, **(e.stats() if e is not None else {})}
                        for f, m, e in engines]}


def _rank(coll: Collection, state: SearchState, query: str, vector: Any, tq: TextQuery,  # noqa: C901, PLR0912, PLR0913, PLR0915, PLR0917 - one pass over the request's options
          o: dict[str, Any], allowed: set[str] | None, limit: int,
          everything: bool, explain: dict[str, Any] | None,
          ) -> tuple[list[tuple[float, str, set[str]]], int]:
    """The best ``(score, id, matched fields)`` (all of them if ``everything``) and the
    number of matches; runs under the database lock (slots are only stable there).
    """
    index = state.text
    hits = None
    if query.strip():
        mask = None
        if allowed is not None:
            mask = np.zeros(index.capacity, dtype=bool)
            slots = [index.slot_of[r] for r in allowed if r in index.slot_of]
            mask[np.asarray(slots, dtype=np.int64)] = True
        hits = bm25(index, tq, mask)
    vec_hits: dict[str, float] = {}
    vfield, metric = None, "cosine"
    if vector is not None:
        vfield = o.get("vector_field") or state.default_vector_field(coll)
        slot = state.vector_slot(coll, vfield, o.get("vector_metric"))
        metric = slot.metric
        if slot.index is not None:
            ef = o.get("ef_search")
            vec_hits = dict(slot.index.search(vector, int(o.get("vector_k", DEFAULT_VECTOR_K)),
                                              allowed=allowed, ef_search=int(ef) if ef else None,
                                              recall=o.get("vector_recall"), explain=explain))
        threshold = o.get("vector_threshold")
        if threshold is not None:
            vec_hits = {r: v for r, v in vec_hits.items() if v >= float(threshold)}
    vset = {vfield} if vfield else set()
    min_score = o.get("min_score")
    if hits is None:  # vector only: the hits as they are, no arrays by slot
        floor = -np.inf if min_score is None else float(min_score)
        top = [(v, rid, vset) for rid, v in vec_hits.items() if v >= floor]
        top.sort(key=lambda t: (-t[0], t[1]))
        return top, len(top)
    extra: list[tuple[float, str, set[str]]] = []
    vec_slots: set[int] = set()
    if vector is None:
        dense = hits.scores
    else:  # hybrid: text normalised by its best score, vector similarity as is
        tw, vw = float(o.get("text_weight", 0.5)), float(o.get("vector_weight", 0.5))
        top_text = float(hits.scores.max(initial=0.0)) or 1.0
        vec_norm = 1.0
        if metric == "dotproduct":
            vec_norm = max((abs(v) for v in vec_hits.values()), default=0.0) or 1.0
        dense = tw * hits.scores / top_text
        for rid, v in vec_hits.items():
            s = index.slot_of.get(rid)
            if s is None:
                extra.append((vw * v / vec_norm, rid, vset))
            else:
                dense[s] += vw * v / vec_norm
                vec_slots.add(s)
    present = hits.scores > 0
    if vec_slots:
        present[np.fromiter(vec_slots, dtype=np.int64)] = True
    if min_score is not None:
        present &= dense >= float(min_score)
        extra = [t for t in extra if t[0] >= float(min_score)]
    cand = np.flatnonzero(present)
    total = int(cand.size) + len(extra)
    want = limit + 16  # a few spare for records that expired since they were indexed
    if not everything and cand.size > want:
        kth = np.partition(dense[cand], cand.size - want)[cand.size - want]
        cand = cand[dense[cand] >= kth]  # ties at the cut all stay, so the order is exact
    ids = index.ids
    top = [(float(dense[i]), str(ids[i]),
            (hits.matched(int(i)) if hits is not None else set())
            | (vset if int(i) in vec_slots else set())) for i in cand]
    top.extend(extra)
    top.sort(key=lambda t: (-t[0], t[1]))
    return top, total


def searched_fields(coll: Collection, options: dict[str, Any],
                    query: str) -> tuple[set[str], list[str] | None]:
    """What a search with ``options`` reads, for a caller that may read only some fields:
    ``(fields it names or matches on, the text fields it would search by default)``;
    the second is None when the request names its text fields (or has no text query)."""
    named = field_names(options.get("fields"))
    used = {*(named or ()), *field_weights(options.get("weights"))}
    if options.get("filters"):
        used |= referenced_fields(options["filters"])
    state = state_for(coll)
    if options.get("vector") is not None:
        used.add(options.get("vector_field") or state.default_vector_field(coll))
    default = None if named or not query.strip() else list(state.text.field_names())
    return used, default
