"""In-memory inverted index of one collection: per-field postings and length statistics.

Layout (all dicts, built for O(1) maintenance on every write)::

    postings[field][term] -> {record id: term frequency}
    lengths[field][id]    -> number of terms of that field in that record
    docs[id]              -> {field: Counter of raw-case tokens}  (for removal and case checks)
    by_stem[stem]         -> set of terms with that stem (grows only; stale terms are harmless)
    by_length[n]          -> set of terms of n characters (for fuzzy matching; grows only)

The index is not persisted: it is rebuilt from the records by one prefix scan on first use
after open, then maintained by the commit listener, so it can never disagree with the
stored records after a crash (docs/design/search.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tuffdb.documents.fulltext.analyzer import stemmer_for, stop_words, tokens


def text_fields(record: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(field path, text)`` for every string in a record (lists and nested maps walked)."""
    out: list[tuple[str, str]] = []
    for k, v in record.items():
        if not prefix and k in ("id", "ttl"):
            continue
        name = prefix + k
        if isinstance(v, str):
            out.append((name, v))
        elif isinstance(v, (list, tuple)) and not isinstance(v, (bytes, bytearray)):
            out.extend((name, x) for x in v if isinstance(x, str))
        elif isinstance(v, dict):
            out.extend(text_fields(v, name + "."))
    return out


class TextIndex:
    """Postings for the text of a collection's records.

    ``fields`` maps a field to its language; None indexes every string field in
    ``default_language``.
    """

    def __init__(self, fields: dict[str, str] | None = None,
                 default_language: str = "english") -> None:
        self.fields = fields
        self.default_language = default_language
        self.postings: dict[str, dict[str, dict[str, int]]] = {}
        self.lengths: dict[str, dict[str, int]] = {}
        self.totals: dict[str, int] = {}
        self.docs: dict[str, dict[str, Counter[str]]] = {}
        self.by_stem: dict[str, set[str]] = {}
        self.by_length: dict[int, set[str]] = {}

    def language(self, field: str) -> str:
        if self.fields is not None and field in self.fields:
            return self.fields[field]
        return self.default_language

    def _extract(self, record: dict[str, Any]) -> dict[str, Counter[str]]:
        per_field: dict[str, Counter[str]] = {}
        for field, text in text_fields(record):
            if self.fields is not None and field not in self.fields:
                continue
            stop = stop_words(self.language(field))
            raw = [t for t in tokens(text) if t.lower() not in stop]
            if raw:
                per_field.setdefault(field, Counter()).update(raw)
        return per_field

    def add(self, rid: str, record: dict[str, Any]) -> None:
        """Index (or re-index) record ``rid``."""
        if rid in self.docs:
            self.remove(rid)
        per_field = self._extract(record)
        if not per_field:
            return
        self.docs[rid] = per_field
        for field, raw in per_field.items():
            lower: Counter[str] = Counter()
            for tok, n in raw.items():
                lower[tok.lower()] += n
            fp = self.postings.setdefault(field, {})
            stem = stemmer_for(self.language(field))
            for term, n in lower.items():
                fp.setdefault(term, {})[rid] = n
                self.by_stem.setdefault(stem(term), set()).add(term)
                self.by_length.setdefault(len(term), set()).add(term)
            length = sum(lower.values())
            self.lengths.setdefault(field, {})[rid] = length
            self.totals[field] = self.totals.get(field, 0) + length

    def remove(self, rid: str) -> None:
        per_field = self.docs.pop(rid, None)
        if per_field is None:
            return
        for field, raw in per_field.items():
            fp = self.postings[field]
            for term in {t.lower() for t in raw}:
                plist = fp.get(term)
                if plist is not None:
                    plist.pop(rid, None)
                    if not plist:
                        del fp[term]
            self.totals[field] -= self.lengths[field].pop(rid)

    def field_names(self) -> list[str]:
        return sorted(self.postings)

    def doc_count(self, field: str) -> int:
        return len(self.lengths.get(field, ()))

    def avg_length(self, field: str) -> float:
        n = self.doc_count(field)
        return self.totals.get(field, 0) / n if n else 0.0

    def check(self) -> list[str]:
        """Self-check: postings, lengths and docs agree."""
        problems = []
        for field, fp in self.postings.items():
            for term, plist in fp.items():
                for rid, n in plist.items():
                    raw = self.docs.get(rid, {}).get(field, Counter())
                    if sum(c for t, c in raw.items() if t.lower() == term) != n:
                        problems.append(f"text index: {field}/{term}/{rid} count {n} is stale")
        for field, lens in self.lengths.items():
            if sum(lens.values()) != self.totals.get(field):
                problems.append(f"text index: length total of {field} is stale")
        return problems
