"""In-memory inverted index of one collection: per-field postings and length statistics.

Every indexed record gets a dense integer *slot*, so scoring runs as numpy over arrays
indexed by slot (scoring.py). Layout::

    slot_of[id] -> slot; ids[slot] -> id (None: dead); alive[slot] -> bool
    postings[field][term] -> [(slots int32, term frequencies float32), ...]  (chunks)
    lengths[field]        -> float32 array by slot: number of terms of the field (0: none)
    vocabulary            -> every term ever indexed, in first-seen order (grows only)

**Writes come in batches** (:meth:`add_many`, one call per commit): the batch's tokens of
a field become one array of term numbers, ``np.unique`` over ``term << 32 | slot``
gives every (term, slot, frequency) at once, and each term of the batch gets one chunk
appended: the Python work per commit is one step per distinct term, not per token.
A query merges a term's chunks into one (and keeps the merge).

**Deletes and updates never touch postings**: the record's slot dies (``alive`` false,
its lengths zeroed, the field statistics adjusted at once) and an update takes a fresh
slot. Queries drop dead slots from the postings they read (and keep the filtered
arrays); once dead slots outnumber live ones, :meth:`compact` renumbers the slots.
Slots are never reused before that, so a posting can never point at the wrong record.

**Query-side maps are built lazily** and brought up to date from the vocabulary's
first-seen order when a query needs them: terms by stem (per query language), by
length and by deletion neighbourhood (fuzzy). The write path does no stemming.

The index is not persisted: it is rebuilt from the records by one prefix scan on first use
after open, then maintained by the commit listener, so it can never disagree with the
stored records after a crash (docs/design/search.md).
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from tuffdb.documents.fulltext.analyzer import deletions, stemmer_for, stop_words, tokens

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_EMPTY = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))
FUZZY_INDEX_DEPTH = 2  # deletion-neighbourhood depth; larger edit budgets walk the vocabulary
COMPACT_MIN_DEAD = 1024  # compact once dead slots pass this and outnumber the live ones
_SLOT_BITS = 32
Chunk = tuple[np.ndarray, np.ndarray]


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
            kinds = set(map(type, v))  # at C speed: a vector's 128 floats cost one pass
            if str in kinds:
                out.extend((name, x) for x in v if isinstance(x, str))
        elif isinstance(v, dict):
            out.extend(text_fields(v, name + "."))
    return out


class _Lazy:
    """A term map brought up to date from the vocabulary's first-seen order on use."""

    __slots__ = ("done", "map")

    def __init__(self) -> None:
        self.map: dict[Any, set[str]] = {}
        self.done = 0


class TextIndex:
    """Postings for the text of a collection's records.

    ``fields`` maps a field to its language; None indexes every string field in
    ``default_language``. ``loader(id)`` returns a record (case-sensitive queries read
    the raw tokens back from it).
    """

    def __init__(self, fields: dict[str, str] | None = None,
                 default_language: str = "english",
                 loader: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        self.fields = fields
        self.default_language = default_language
        self.loader = loader
        self.slot_of: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.alive = np.zeros(16, dtype=bool)
        self.dead = 0
        self.postings: dict[str, dict[str, list[Chunk]]] = {}
        self.lengths: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}  # live records holding the field
        self.totals: dict[str, int] = {}
        self.vocabulary: dict[str, int] = {}
        self.term_list: list[str] = []
        self._stems: dict[str, _Lazy] = {}
        self._by_length = _Lazy()
        self._by_deletion: _Lazy | None = None

    @property
    def capacity(self) -> int:
        return len(self.ids)

    def __len__(self) -> int:
        return len(self.slot_of)

    def language(self, field: str) -> str:
        if self.fields is not None and field in self.fields:
            return self.fields[field]
        return self.default_language

    def extract(self, record: dict[str, Any]) -> list[tuple[str, list[str]]]:
        """``(field, raw-case tokens without stop words)`` per indexed text of ``record``."""
        out = []
        for field, text in text_fields(record):
            if self.fields is not None and field not in self.fields:
                continue
            stop = stop_words(self.language(field))
            raw = [t for t in tokens(text) if t.lower() not in stop]
            if raw:
                out.append((field, raw))
        return out

    def _grow(self, need: int) -> None:
        if need <= self.alive.size:
            return
        size = max(need, 2 * self.alive.size)
        self.alive = np.concatenate([self.alive, np.zeros(size - self.alive.size, dtype=bool)])
        for field, arr in self.lengths.items():
            grown = np.zeros(size, dtype=np.float32)
            grown[: arr.size] = arr
            self.lengths[field] = grown

    def _lengths(self, field: str) -> np.ndarray:
        arr = self.lengths.get(field)
        if arr is None:
            self.lengths[field] = arr = np.zeros(self.alive.size, dtype=np.float32)
        return arr

    def add_many(self, items: Iterable[tuple[str, dict[str, Any]]]) -> None:  # noqa: C901 - one batch, field by field
        """Index (or re-index) a batch of ``(id, record)``; a later entry for an id wins."""
        batch = {rid: record for rid, record in items}
        for rid in batch:
            if rid in self.slot_of:
                self.remove(rid)
        lowered: dict[str, tuple[list[int], list[list[str]]]] = {}
        stop_of: dict[str, frozenset[str]] = {}
        for rid, record in batch.items():
            slot = -1
            for field, text in text_fields(record):
                stop = stop_of.get(field)
                if stop is None:
                    if self.fields is not None and field not in self.fields:
                        continue
                    stop = stop_of[field] = stop_words(self.language(field))
                terms = [t for t in map(str.lower, tokens(text)) if t not in stop]
                if not terms:
                    continue
                if slot < 0:
                    slot = len(self.ids)
                    self.ids.append(rid)
                    self.slot_of[rid] = slot
                entry = lowered.get(field)
                if entry is None:
                    lowered[field] = entry = ([], [])
                entry[0].append(slot)
                entry[1].append(terms)
        self._grow(len(self.ids))
        if not lowered:
            return
        first_new = min(s for sl, _ in lowered.values() for s in sl)
        self.alive[first_new:len(self.ids)] = True
        vocab, term_list = self.vocabulary, self.term_list
        for field, (slots, docs) in lowered.items():
            flat = list(chain.from_iterable(docs))
            for t in dict.fromkeys(flat):
                if t not in vocab:
                    vocab[t] = len(term_list)
                    term_list.append(t)
            sizes = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
            slot_arr = np.asarray(slots, dtype=np.int64)
            lengths = self._lengths(field)
            np.add.at(lengths, slot_arr, sizes)
            self.counts[field] = self.counts.get(field, 0) + len(set(slots))
            self.totals[field] = self.totals.get(field, 0) + int(sizes.sum())
            numbers = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
            keys, tfs = np.unique((numbers << _SLOT_BITS) | np.repeat(slot_arr, sizes),
                                  return_counts=True)
            term_of = keys >> _SLOT_BITS
            post_slots = (keys & ((1 << _SLOT_BITS) - 1)).astype(np.int32)
            post_tfs = tfs.astype(np.float32)
            starts = np.flatnonzero(np.diff(term_of)) + 1
            bounds = [0, *starts.tolist(), keys.size]
            fp = self.postings.get(field)
            if fp is None:
                self.postings[field] = fp = {}
            for i, number in enumerate(term_of[bounds[:-1]].tolist()):
                a, b = bounds[i], bounds[i + 1]
                chunk = (post_slots[a:b], post_tfs[a:b])
                term = term_list[number]
                chunks = fp.get(term)
                if chunks is None:
                    fp[term] = [chunk]
                else:
                    chunks.append(chunk)

    def remove(self, rid: str) -> None:
        slot = self.slot_of.pop(rid, None)
        if slot is None:
            return
        self.ids[slot] = None
        self.alive[slot] = False
        self.dead += 1
        for field, lengths in self.lengths.items():
            n = int(lengths[slot])
            if n:
                self.totals[field] -= n
                self.counts[field] -= 1
                lengths[slot] = 0
        if self.dead > COMPACT_MIN_DEAD and self.dead > len(self.slot_of):
            self.compact()

    def compact(self) -> None:
        """Renumber the live slots densely and drop every posting of a dead slot."""
        cap = len(self.ids)
        live = np.flatnonzero(self.alive[:cap])
        remap = np.full(max(cap, 1), -1, dtype=np.int32)
        remap[live] = np.arange(live.size, dtype=np.int32)
        for fp in self.postings.values():
            for term in list(fp):
                slots, tfs = _merged(fp[term])
                keep = self.alive[slots]
                if keep.any():
                    fp[term] = [(remap[slots[keep]], tfs[keep])]
                else:
                    del fp[term]
        size = max(16, 2 * live.size)
        for field, lengths in self.lengths.items():
            fresh = np.zeros(size, dtype=np.float32)
            fresh[: live.size] = lengths[live]
            self.lengths[field] = fresh
        self.ids = [self.ids[i] for i in live.tolist()]
        self.slot_of = {str(rid): i for i, rid in enumerate(self.ids)}
        self.alive = np.zeros(size, dtype=bool)
        self.alive[: live.size] = True
        self.dead = 0

    def arrays(self, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The live postings of ``term`` in ``field`` as (slots, frequencies) arrays."""
        fp = self.postings.get(field)
        chunks = fp.get(term) if fp is not None else None
        if not chunks:
            return _EMPTY
        slots, tfs = _merged(chunks)
        if self.dead:
            keep = self.alive[slots]
            if not keep.all():
                slots, tfs = slots[keep], tfs[keep]
        if len(chunks) > 1 or slots.size != chunks[0][0].size:
            chunks[:] = [(slots, tfs)]
        return slots, tfs

    def raw_tokens(self, slot: int, field: str) -> list[str]:
        """The raw-case tokens of ``field`` of the record in ``slot`` (read back)."""
        rid = self.ids[slot]
        record = self.loader(rid) if self.loader is not None and rid is not None else None
        if record is None:
            return []
        return [t for f, raw in self.extract(record) if f == field for t in raw]

    def _catch_up(self, lazy: _Lazy, key: Callable[[str], Any]) -> dict[Any, set[str]]:
        terms = self.term_list
        if lazy.done < len(terms):
            m = lazy.map
            for t in terms[lazy.done:]:
                m.setdefault(key(t), set()).add(t)
            lazy.done = len(terms)
        return lazy.map

    def with_stem(self, language: str, stem: str) -> set[str]:
        """Indexed terms whose stem in ``language`` is ``stem``."""
        lazy = self._stems.get(language)
        if lazy is None:
            lazy = self._stems[language] = _Lazy()
        return self._catch_up(lazy, stemmer_for(language)).get(stem, set())

    def fuzzy_candidates(self, term: str, budget: int) -> set[str]:
        """Indexed terms that may lie within ``budget`` edits of ``term`` (a superset)."""
        if budget > FUZZY_INDEX_DEPTH:
            by_length = self._catch_up(self._by_length, len)
            return {t for n in range(len(term) - budget, len(term) + budget + 1)
                    for t in by_length.get(n, ())}
        if self._by_deletion is None:
            self._by_deletion = _Lazy()
        lazy = self._by_deletion
        if lazy.done < len(self.term_list):
            m = lazy.map
            for t in self.term_list[lazy.done:]:
                for s in deletions(t, FUZZY_INDEX_DEPTH):
                    m.setdefault(s, set()).add(t)
            lazy.done = len(self.term_list)
        out: set[str] = set()
        for s in deletions(term, budget):
            out |= lazy.map.get(s, set())
        return out

    def field_names(self) -> list[str]:
        return sorted(self.postings)

    def doc_count(self, field: str) -> int:
        return self.counts.get(field, 0)

    def avg_length(self, field: str) -> float:
        n = self.doc_count(field)
        return self.totals.get(field, 0) / n if n else 0.0

    def check(self) -> list[str]:
        """Self-check: postings, lengths, statistics and slots agree."""
        problems = []
        cap = len(self.ids)
        for field, fp in self.postings.items():
            live_sum = 0
            for term, chunks in fp.items():
                slots, tfs = _merged(chunks)
                if slots.size and (int(slots.max()) >= cap or float(tfs.min()) <= 0):
                    problems.append(f"text index: {field}/{term} has a bad posting")
                    continue
                live_sum += int(tfs[self.alive[slots]].sum())
            if live_sum != self.totals.get(field, 0):
                problems.append(f"text index: term total of {field} is stale")
        for field, lengths in self.lengths.items():
            if int(lengths.sum()) != self.totals.get(field, 0):
                problems.append(f"text index: length total of {field} is stale")
            if int((lengths > 0).sum()) != self.counts.get(field, 0):
                problems.append(f"text index: record count of {field} is stale")
        for rid, slot in self.slot_of.items():
            if self.ids[slot] != rid or not self.alive[slot]:
                problems.append(f"text index: slot {slot} of {rid} holds {self.ids[slot]}")
        if int(self.alive[:cap].sum()) != len(self.slot_of) or cap - len(self.slot_of) != self.dead:
            problems.append("text index: live slot count is stale")
        return problems


def _merged(chunks: list[Chunk]) -> Chunk:
    if len(chunks) == 1:
        return chunks[0]
    return (np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]))
