"""In-memory inverted index of one collection: per-field postings and length statistics.

Every indexed record gets a dense integer *slot*, so scoring runs as numpy over arrays
indexed by slot (scoring.py). Layout::

    slot_of[id] -> slot; ids[slot] -> id (None: dead); alive[slot] -> bool
    postings[field]       -> [_Segment, ...]: term numbers ascending, each with its
                             slots (int32) and term frequencies (float32)
    lengths[field]        -> float32 array by slot: number of terms of the field (0: none)
    vocabulary            -> every term ever indexed -> its number, in first-seen order

**Writes come in batches** (:meth:`add_many`, one call per commit) and cost no Python
step per term or per token: per field, the batch's texts are tokenised in one pass
(``batch_terms``), mapped to term numbers by one dict pass (stop words and the gaps
between texts map to negative codes), and ``np.unique`` over ``term << 32 | slot`` gives
every (term, slot, frequency) at once: one new segment per field. Segments are merged by
batch count, ``FAN_IN`` of equal count at a time (a sort that only merges sorted runs),
so a field holds O(log n) segments and a posting is merged log_FAN_IN(batches) times.
A query looks a term up in each segment (binary search) and keeps the assembled arrays
until the next write.

**Deletes and updates never touch postings**: the record's slot dies (``alive`` false,
its lengths zeroed, the field statistics adjusted at once) and an update takes a fresh
slot. Queries drop dead slots from the postings they read, merges drop them for good;
once dead slots outnumber live ones, :meth:`compact` renumbers the slots.
Slots are never reused before that, so a posting can never point at the wrong record.

**Query-side maps are built lazily** and brought up to date from the vocabulary's
first-seen order when a query needs them: terms by stem (per query language), by
length and by deletion neighbourhood (fuzzy). The write path does no stemming.

The index is not persisted: it is rebuilt from the records by one prefix scan on first use
after open, then maintained by the commit listener, so it can never disagree with the
stored records after a crash (docs/design/search.md).
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from tuffdb.documents.fulltext.analyzer import (
    GAP,
    batch_terms,
    deletions,
    stemmer_for,
    stop_words,
    tokens,
)
from tuffdb.documents.values import Vector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_EMPTY = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))
FUZZY_INDEX_DEPTH = 2  # deletion-neighbourhood depth; larger edit budgets walk the vocabulary
COMPACT_MIN_DEAD = 1024  # compact once dead slots pass this and outnumber the live ones
_SLOT_BITS = 32
_SLOT_MASK = (1 << _SLOT_BITS) - 1
FAN_IN = 8  # a field's last 8 segments merge into one when they hold as many batches each
CACHE_TERMS = 4096  # (field, term) postings kept assembled between writes
# term numbers of what is not a term, in a batch's token stream
_STOP_CODE, _SEP_CODE, _NEW_CODE = -1, -2, -3
_SEP = GAP
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
        elif type(v) is Vector:  # floats only
            continue
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
        self.postings: dict[str, list[_Segment]] = {}
        self._cache: dict[tuple[str, int], Chunk] = {}  # assembled postings, until a write
        self._codes: dict[str, dict[str, int]] = {}  # per language: vocabulary + stop words
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

    def add_many(self, items: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Index (or re-index) a batch of ``(id, record)``; a later entry for an id wins."""
        batch = {rid: record for rid, record in items}
        for rid in [r for r in batch if r in self.slot_of]:
            self.remove(rid)
        rids = list(batch)
        by_field: dict[str, tuple[list[str], list[int]]] = {}
        skipped: set[str] = set()
        for n, record in enumerate(batch.values()):
            for name, text in text_fields(record):
                entry = by_field.get(name)
                if entry is None:
                    if name in skipped:
                        continue
                    if self.fields is not None and name not in self.fields:
                        skipped.add(name)
                        continue
                    by_field[name] = entry = ([], [])
                entry[0].append(text)
                entry[1].append(n)
        # per field: the batch's terms as numbers, and which text (of by_field) each is in
        parsed = []
        holds = np.zeros(len(rids), dtype=bool)  # records with a term in some field
        for name, (texts, owners) in by_field.items():
            numbers = self._numbers(texts, self.language(name))
            text_no = np.cumsum(numbers == _SEP_CODE)
            keep = numbers >= 0
            terms = numbers[keep]
            if not terms.size:
                continue
            tno = text_no[keep]
            sizes = np.bincount(tno, minlength=len(texts))
            owner = np.asarray(owners, dtype=np.int64)
            holds[owner[sizes > 0]] = True
            parsed.append((name, terms, tno, sizes, owner))
        if not parsed:
            return
        # a slot per record holding a term, in batch order
        recs = np.flatnonzero(holds)
        first = len(self.ids)
        fresh = [rids[i] for i in recs.tolist()]
        self.ids.extend(fresh)
        self.slot_of.update(zip(fresh, range(first, first + len(fresh)), strict=True))
        self._grow(len(self.ids))
        self.alive[first:len(self.ids)] = True
        rec_slot = np.full(len(rids), -1, dtype=np.int64)
        rec_slot[recs] = np.arange(first, first + recs.size, dtype=np.int64)
        self._cache.clear()
        for name, terms, tno, sizes, owner in parsed:
            text_slot = rec_slot[owner]
            filled = sizes > 0
            np.add.at(self._lengths(name), text_slot[filled], sizes[filled])
            self.counts[name] = self.counts.get(name, 0) + int(np.unique(text_slot[filled]).size)
            self.totals[name] = self.totals.get(name, 0) + int(sizes.sum())
            keys, tfs = np.unique((terms << _SLOT_BITS) | text_slot[tno], return_counts=True)
            segments = self.postings.get(name)
            if segments is None:
                self.postings[name] = segments = []
            segments.append(_segment(keys, tfs))
            # tiered by batch count: FAN_IN segments of as many batches each become one,
            # so a posting is merged log_FAN_IN(batches) times and a field holds at most
            # (FAN_IN - 1) segments per power of FAN_IN
            while (len(segments) >= FAN_IN
                   and len({seg.batches for seg in segments[-FAN_IN:]}) == 1):
                segments[-FAN_IN:] = [_merge(segments[-FAN_IN:], self.alive if self.dead else None)]

    def _numbers(self, texts: list[str], language: str) -> np.ndarray:
        """The lowercase tokens of ``texts`` as term numbers, in order: a stop word is
        ``_STOP_CODE``, the gap between two texts ``_SEP_CODE``; new terms are added to the
        vocabulary. One tokenising pass and one dict pass over the whole batch."""
        codes = self._codes.get(language)
        if codes is None:
            codes = self._codes[language] = dict.fromkeys(stop_words(language), _STOP_CODE)
            codes[_SEP] = _SEP_CODE
        toks = batch_terms(texts)
        numbers = np.fromiter(map(codes.get, toks, repeat(_NEW_CODE)), dtype=np.int64,
                              count=len(toks))
        new = np.flatnonzero(numbers == _NEW_CODE)
        if new.size:
            vocab, term_list = self.vocabulary, self.term_list
            fresh = [toks[i] for i in new.tolist()]
            for t in dict.fromkeys(fresh):
                number = vocab.get(t)
                if number is None:
                    number = vocab[t] = len(term_list)
                    term_list.append(t)
                codes[t] = number
            numbers[new] = np.fromiter(map(codes.__getitem__, fresh), dtype=np.int64,
                                       count=len(fresh))
        return numbers

    def remove(self, rid: str) -> None:
        slot = self.slot_of.pop(rid, None)
        if slot is None:
            return
        self.ids[slot] = None
        self.alive[slot] = False
        self.dead += 1
        self._cache.clear()
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
        remap = np.full(max(cap, 1), -1, dtype=np.int64)
        remap[live] = np.arange(live.size, dtype=np.int64)
        for field, segments in self.postings.items():
            self.postings[field] = [_merge(segments, self.alive, remap)] if segments else []
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
        self._cache.clear()

    def arrays(self, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The live postings of ``term`` in ``field`` as (slots, frequencies) arrays."""
        number = self.vocabulary.get(term)
        segments = self.postings.get(field)
        if number is None or not segments:
            return _EMPTY
        key = (field, number)
        got = self._cache.get(key)
        if got is not None:
            return got
        parts = [p for seg in segments if (p := seg.find(number)) is not None]
        if not parts:
            got = _EMPTY
        elif len(parts) == 1:
            got = parts[0]
        else:
            got = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        if self.dead and got[0].size:
            keep = self.alive[got[0]]
            if not keep.all():
                got = (got[0][keep], got[1][keep])
        if len(self._cache) >= CACHE_TERMS:
            self._cache.clear()
        self._cache[key] = got
        return got

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
        for field, segments in self.postings.items():
            live_sum = 0
            for seg in segments:
                if seg.size and (int(seg.slots.max()) >= cap or float(seg.tfs.min()) <= 0
                                 or bool((np.diff(seg.terms) <= 0).any())):
                    problems.append(f"text index: a segment of {field} has a bad posting")
                    continue
                live_sum += int(seg.tfs[self.alive[seg.slots]].sum())
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


class _Segment:
    """The postings of one field for a run of batches: term numbers ascending, each with
    its slots (ascending) and frequencies at ``starts[i]:starts[i + 1]``."""

    __slots__ = ("batches", "slots", "starts", "terms", "tfs")

    def __init__(self, terms: np.ndarray, starts: np.ndarray, slots: np.ndarray,
                 tfs: np.ndarray, batches: int = 1) -> None:
        self.terms, self.starts, self.slots, self.tfs = terms, starts, slots, tfs
        self.batches = batches  # how many add_many batches it holds (the merge policy)

    @property
    def size(self) -> int:
        return int(self.slots.size)

    def find(self, number: int) -> Chunk | None:
        i = int(self.terms.searchsorted(number))
        if i == self.terms.size or int(self.terms[i]) != number:
            return None
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        return self.slots[a:b], self.tfs[a:b]


def _segment(keys: np.ndarray, tfs: np.ndarray) -> _Segment:
    """A segment from ascending distinct ``term << 32 | slot`` keys and their frequencies."""
    term_of = keys >> _SLOT_BITS
    bounds = np.flatnonzero(np.diff(term_of)) + 1
    starts = np.concatenate(([0], bounds, [keys.size])).astype(np.int64)
    terms = term_of[starts[:-1]] if keys.size else term_of
    return _Segment(terms, starts, (keys & _SLOT_MASK).astype(np.int32), tfs.astype(np.float32))


def _merge(segments: list[_Segment], alive: np.ndarray | None,
           remap: np.ndarray | None = None) -> _Segment:
    """One segment of ``segments``' postings, dead slots (``alive`` false) dropped and
    slots renumbered by ``remap``. Each input is sorted, so the stable sort (timsort)
    only merges runs."""
    terms = np.concatenate([np.repeat(s.terms, np.diff(s.starts)) for s in segments])
    slots = np.concatenate([s.slots for s in segments]).astype(np.int64)
    tfs = np.concatenate([s.tfs for s in segments])
    if alive is not None:
        keep = alive[slots]
        terms, slots, tfs = terms[keep], slots[keep], tfs[keep]
    if remap is not None:
        slots = remap[slots]
    keys = (terms << _SLOT_BITS) | slots
    order = np.argsort(keys, kind="stable")
    merged = _segment(keys[order], tfs[order])
    merged.batches = sum(s.batches for s in segments)
    return merged
