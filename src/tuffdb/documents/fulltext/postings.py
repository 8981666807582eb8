"""In-memory inverted index of one collection: per-field postings and length statistics.

Every indexed record gets a dense integer *slot* (reused after a delete), so scoring runs
as numpy over arrays indexed by slot (scoring.py). Layout::

    slot_of[id] -> slot; ids[slot] -> id (None when free)
    postings[field][term] -> {slot: term frequency}   (dicts: O(1) upkeep on every write)
    lengths[field]        -> float32 array by slot: number of terms of the field (0: none)
    docs[id]              -> {field: Counter of raw-case tokens} (for removal, case checks)
    by_stem[stem]         -> terms with that stem (grows only; stale terms are harmless)
    by_length[n]          -> terms of n characters, for fuzzy matching (grows only)
    by_deletion[s]        -> terms that give s by deleting <= 2 characters (built on the
                             first fuzzy query, then kept current; grows only)

``arrays(field, term)`` gives the postings as two numpy arrays (slots, frequencies),
built lazily and dropped whenever that term's postings change.

The index is not persisted: it is rebuilt from the records by one prefix scan on first use
after open, then maintained by the commit listener, so it can never disagree with the
stored records after a crash (docs/design/search.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from tuffdb.documents.fulltext.analyzer import deletions, stemmer_for, stop_words, tokens

_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
FUZZY_INDEX_DEPTH = 2  # deletion-neighbourhood depth; larger edit budgets walk the vocabulary


def text_fields(record: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(field path, text)`` for every string in a record (lists and nested maps walked)."""
    out: list[tuple[str, str]] = []
    for k, v in record.items():
        if not prefix and k in ("id", "ttl"):
            continue
        name = prefix + k
        if isinstance(v, str):
            out.append((name, v))
        elif isinstance(v, (list, tuple)):
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
        self.slot_of: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.free: list[int] = []
        self.postings: dict[str, dict[str, dict[int, int]]] = {}
        self.lengths: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}  # records holding the field
        self.totals: dict[str, int] = {}
        self.docs: dict[str, dict[str, Counter[str]]] = {}
        self.by_stem: dict[str, set[str]] = {}
        self.by_length: dict[int, set[str]] = {}
        self._arrays: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self.by_deletion: dict[str, set[str]] | None = None
        self.terms: set[str] = set()  # every term ever indexed (grows only)

    @property
    def capacity(self) -> int:
        return len(self.ids)

    def language(self, field: str) -> str:
        if self.fields is not None and field in self.fields:
            return self.fields[field]
        return self.default_language

    def _extract(self, record: dict[str, Any]) -> dict[str, list[str]]:
        per_field: dict[str, list[str]] = {}
        for field, text in text_fields(record):
            if self.fields is not None and field not in self.fields:
                continue
            stop = stop_words(self.language(field))
            raw = [t for t in tokens(text) if t.lower() not in stop]
            if raw:
                per_field.setdefault(field, []).extend(raw)
        return per_field

    def _new_slot(self, rid: str) -> int:
        if self.free:
            slot = self.free.pop()
            self.ids[slot] = rid
        else:
            slot = len(self.ids)
            self.ids.append(rid)
        self.slot_of[rid] = slot
        return slot

    def _lengths(self, field: str) -> np.ndarray:
        arr = self.lengths.get(field)
        if arr is None or arr.size < len(self.ids):
            grown = np.zeros(max(16, 2 * len(self.ids)), dtype=np.float32)
            if arr is not None:
                grown[: arr.size] = arr
            self.lengths[field] = arr = grown
        return arr

    def add(self, rid: str, record: dict[str, Any]) -> None:
        """Index (or re-index) record ``rid``."""
        if rid in self.docs:
            self.remove(rid)
        per_field = self._extract(record)
        if not per_field:
            return
        slot = self._new_slot(rid)
        self.docs[rid] = doc = {}
        # Local aliases: this loop runs once per term of every record written.
        arrays, known, postings = self._arrays, self.terms, self.postings
        for field, raw in per_field.items():
            doc[field] = Counter(raw)
            lower = Counter(map(str.lower, raw))
            fp = postings.get(field)
            if fp is None:
                postings[field] = fp = {}
            for term, n in lower.items():
                plist = fp.get(term)
                if plist is None:
                    fp[term] = {slot: n}
                    if term not in known:
                        self._new_term(term, field)
                else:
                    plist[slot] = n
                if arrays:
                    arrays.pop((field, term), None)
            self._lengths(field)[slot] = len(raw)
            self.counts[field] = self.counts.get(field, 0) + 1
            self.totals[field] = self.totals.get(field, 0) + len(raw)

    def _new_term(self, term: str, field: str) -> None:
        self.terms.add(term)
        self.by_stem.setdefault(stemmer_for(self.language(field))(term), set()).add(term)
        self.by_length.setdefault(len(term), set()).add(term)
        if self.by_deletion is not None:
            self._add_deletions(term)

    def remove(self, rid: str) -> None:
        per_field = self.docs.pop(rid, None)
        if per_field is None:
            return
        slot = self.slot_of.pop(rid)
        for field, raw in per_field.items():
            fp = self.postings[field]
            for term in {t.lower() for t in raw}:
                plist = fp.get(term)
                if plist is not None:
                    plist.pop(slot, None)
                    self._arrays.pop((field, term), None)
                    if not plist:
                        del fp[term]
            lengths = self.lengths[field]
            self.totals[field] -= int(lengths[slot])
            self.counts[field] -= 1
            lengths[slot] = 0
        self.ids[slot] = None
        self.free.append(slot)

    def _add_deletions(self, term: str) -> None:
        assert self.by_deletion is not None
        for s in deletions(term, FUZZY_INDEX_DEPTH):
            self.by_deletion.setdefault(s, set()).add(term)

    def fuzzy_candidates(self, term: str, budget: int) -> set[str]:
        """Indexed terms that may lie within ``budget`` edits of ``term`` (a superset)."""
        if budget > FUZZY_INDEX_DEPTH:
            return {t for n in range(len(term) - budget, len(term) + budget + 1)
                    for t in self.by_length.get(n, ())}
        if self.by_deletion is None:
            self.by_deletion = {}
            for same_length in self.by_length.values():
                for t in same_length:
                    self._add_deletions(t)
        by_deletion = self.by_deletion
        out: set[str] = set()
        for s in deletions(term, budget):
            out |= by_deletion.get(s, set())
        return out

    def arrays(self, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The postings of ``term`` in ``field`` as (slots, frequencies) arrays."""
        key = (field, term)
        got = self._arrays.get(key)
        if got is None:
            plist = self.postings.get(field, {}).get(term)
            if not plist:
                return _EMPTY
            got = (np.fromiter(plist.keys(), dtype=np.int64, count=len(plist)),
                   np.fromiter(plist.values(), dtype=np.float32, count=len(plist)))
            self._arrays[key] = got
        return got

    def field_names(self) -> list[str]:
        return sorted(self.postings)

    def doc_count(self, field: str) -> int:
        return self.counts.get(field, 0)

    def avg_length(self, field: str) -> float:
        n = self.doc_count(field)
        return self.totals.get(field, 0) / n if n else 0.0

    def check(self) -> list[str]:
        """Self-check: postings, lengths, slots and docs agree."""
        problems = []
        for field, fp in self.postings.items():
            for term, plist in fp.items():
                for slot, n in plist.items():
                    rid = self.ids[slot]
                    raw = self.docs.get(rid or "", {}).get(field, Counter())
                    if sum(c for t, c in raw.items() if t.lower() == term) != n:
                        problems.append(f"text index: {field}/{term}/{rid} count {n} is stale")
        for field, lengths in self.lengths.items():
            if int(lengths.sum()) != self.totals.get(field):
                problems.append(f"text index: length total of {field} is stale")
        for rid, slot in self.slot_of.items():
            if self.ids[slot] != rid:
                problems.append(f"text index: slot {slot} of {rid} holds {self.ids[slot]}")
        return problems
