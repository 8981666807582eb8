"""BM25 ranking over a :class:`TextIndex`, with stemming and fuzzy expansion of query terms.

Score of a record = sum over searched fields f of ``weight(f) * sum over query terms q of
max over variants v of q: factor(v) * idf_f(v) * tf (K1 + 1) / (tf + K1 (1 - B + B dl/avgdl))``
with ``idf_f(v) = ln(1 + (N_f - n_f(v) + 0.5) / (n_f(v) + 0.5))`` (Lucene's BM25 idf,
never negative). Variants of a query term: the term itself (factor 1), other terms
with the same stem (``STEM_FACTOR``), terms within the fuzzy edit budget
(``1 / (1 + distance)``). Taking the best variant per term and field keeps "run" from
counting a record twice for holding both "runs" and "running".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tuffdb.documents.fulltext.analyzer import (
    edit_distance,
    fuzzy_budget,
    stemmer_for,
    stop_words,
    tokens,
)
# imported at run time, not only for type checking: the compiled build (mypyc) resolves a
# dataclass's field annotations when the module loads (TextHits.index)
from tuffdb.documents.fulltext.postings import TextIndex

K1 = 1.2
B = 0.75
STEM_FACTOR = 0.9  # a stemmed variant ranks just below the word itself


@dataclass(slots=True)
class TextQuery:
    text: str
    language: str = "english"
    case_sensitive: bool = False
    fuzzy: bool = False
    max_edit_distance: int = 2
    stemming: bool = True
    fields: list[str] | None = None
    weights: dict[str, float] = field(default_factory=dict)

    def query_terms(self) -> list[str]:
        """Query tokens (case kept), stop words removed, duplicates dropped, in order."""
        stop = stop_words(self.language)
        seen: dict[str, None] = {}
        for tok in tokens(self.text):
            if tok.lower() not in stop:
                seen.setdefault(tok if self.case_sensitive else tok.lower(), None)
        return list(seen)


def variants(index: TextIndex, term: str, q: TextQuery) -> dict[str, float]:
    """Indexed terms that count as ``term`` (lowercase), with their factors."""
    out = {term: 1.0}
    if q.stemming:
        for t in index.with_stem(q.language, stemmer_for(q.language)(term)):
            out.setdefault(t, STEM_FACTOR)
    if q.fuzzy:
        budget = fuzzy_budget(term, q.max_edit_distance)
        if budget:
            for t in index.fuzzy_candidates(term, budget):
                if t not in out:
                    d = edit_distance(term, t, budget)
                    if d <= budget:
                        out[t] = 1.0 / (1 + d)
    return out


def _case_ok(raw: str, query: str) -> bool:
    """Case-sensitive match: the shared lowercase prefix must agree in case too."""
    if raw == query:
        return True
    rl, ql = raw.lower(), query.lower()
    k = 0
    while k < min(len(rl), len(ql)) and rl[k] == ql[k]:
        k += 1
    return raw[:k] == query[:k] and k > 0


def searched_fields(index: TextIndex, q: TextQuery) -> list[str]:
    names = index.field_names()
    if not q.fields:
        return names
    want = q.fields
    return [f for f in names if any(f == w or f.startswith(w + ".") for w in want)]


def _weight(q: TextQuery, field_name: str) -> float:
    w = q.weights.get(field_name)
    if w is None and "." in field_name:
        w = q.weights.get(field_name.split(".", 1)[0])
    return 1.0 if w is None else float(w)


@dataclass(slots=True)
class TextHits:
    """BM25 scores by slot (0 = no match) and, per field, which slots matched there."""

    index: TextIndex
    scores: np.ndarray
    fields: list[tuple[str, np.ndarray]]

    def slots(self) -> np.ndarray:
        return np.flatnonzero(self.scores > 0)

    def matched(self, slot: int) -> set[str]:
        return {name for name, mask in self.fields if mask[slot]}

    def as_dict(self) -> dict[str, tuple[float, set[str]]]:
        """``{record id: (score, matched fields)}`` (for small results and tests)."""
        ids = self.index.ids
        return {str(ids[i]): (float(self.scores[i]), self.matched(int(i))) for i in self.slots()}


def _case_tfs(index: TextIndex, fname: str, term: str, qraw: str,
              slots: np.ndarray) -> np.ndarray:
    return np.fromiter(
        (sum(1 for tok in index.raw_tokens(int(i), fname)
             if tok.lower() == term and _case_ok(tok, qraw)) for i in slots),
        dtype=np.float32, count=slots.size)


def bm25(index: TextIndex, q: TextQuery, allowed: np.ndarray | None = None) -> TextHits:
    """Scores of every record for ``q``; ``allowed``: a bool mask by slot (filters)."""
    cap = index.capacity
    expanded = [(t, variants(index, t.lower(), q)) for t in q.query_terms()]
    total = np.zeros(cap, dtype=np.float64)
    per_field = []
    for fname in searched_fields(index, q):
        n_docs = index.doc_count(fname)
        norm = K1 * (1.0 - B + B * index._lengths(fname)[:cap] / (index.avg_length(fname) or 1.0))  # noqa: SLF001 - our own arrays
        weight = _weight(q, fname)
        fmask = np.zeros(cap, dtype=bool)
        for qraw, variant_map in expanded:
            best: np.ndarray | None = np.zeros(cap) if len(variant_map) > 1 else None
            for term, factor in variant_map.items():
                slots, tfs = index.arrays(fname, term)
                if slots.size == 0:
                    continue
                idf = math.log(1.0 + (n_docs - slots.size + 0.5) / (slots.size + 0.5))
                if allowed is not None:
                    keep = allowed[slots]
                    slots, tfs = slots[keep], tfs[keep]
                if q.case_sensitive:
                    tfs = _case_tfs(index, fname, term, qraw, slots)
                    slots, tfs = slots[tfs > 0], tfs[tfs > 0]
                score = factor * idf * tfs * (K1 + 1.0) / (tfs + norm[slots])
                if best is None:
                    total[slots] += weight * score
                    fmask[slots] = True
                else:
                    best[slots] = np.maximum(best[slots], score)
            if best is not None:
                total += weight * best
                fmask |= best > 0
        per_field.append((fname, fmask))
    return TextHits(index, total, per_field)
