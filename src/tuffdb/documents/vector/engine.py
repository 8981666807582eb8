"""One vector field's index: exact when that is cheaper, else an hnsw graph tuned to a recall.

Every live vector is kept in a :class:`FlatIndex` (exact search, numpy). A field declared
``hnsw`` also gets an hnswlib graph once its vectors pass ``FULL_SCAN_BYTES`` (Qdrant's
``full_scan_threshold``, 10,000 KB, as the anchor); below that a scan is as fast and exact.

**Writes** land in the flat index at once (so every search sees them) and are queued for
the graph; a builder thread adds the queue to the graph in chunks with hnswlib's bulk
``add_items`` on two threads (it releases the GIL). Until a vector is in the graph a
search scores it exactly, so a search never misses a committed vector. An update or a
delete marks the old graph label deleted at once; each version of a vector gets a fresh
label, and the graph is rebuilt from the flat rows once dead labels outnumber live ones.

**Calibration.** Once the queue is drained and the graph has changed by more than
``RECALIBRATE_FRACTION`` since the last calibration (or was never calibrated), the
builder takes ``SAMPLE`` held-out vectors as queries, finds their exact top ``CALIBRATION_K``
(themselves excluded) with the flat index, and walks an ``ef`` ladder recording recall@10
and the time per query, up to recall ``CURVE_STOP`` or until hnsw costs more than the
exact scan. A search with a recall target ``r`` then takes the smallest ef whose measured
recall is >= ``r`` plus ``Z_MARGIN`` standard errors of that measurement (the spread of
the sample's per-query recalls; at least ``MARGIN``), and searches exactly instead when no
ef reaches it or the exact scan measured cheaper. Until the first calibration, searches
are exact. The queries are a *holdout*: vectors kept out of the graph (scored exactly
meanwhile) until the calibration has used them, then added to it, so a search in steady
state scores nothing on the side. The first holdout is drawn from all vectors when the
graph is made; each later one from the builder's queue once the changes made and queued
reach the recalibration point (:meth:`_reserve`); a recalibration waits until at least
half of ``SAMPLE`` are held, so with deletes alone the curve stands.

**Filters** (``allowed`` ids) are applied during the search: an allowed set small enough
for a full scan (the same byte threshold) is scored exactly; otherwise hnswlib walks the
graph with a label filter at ``ef / selectivity`` (capped), or the allowed rows are
scored exactly when that is cheaper by the calibration's timings. A filtered walk that
finds fewer than k results falls back to exact scoring, so k results come back whenever
k vectors are allowed.

Nothing here is persisted: the state of a collection's search is rebuilt from its records
after a restart or crash (search_index.py), so it can never be stale.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import hnswlib  # type: ignore[import-untyped]
import numpy as np

from tuffdb.documents.vector import as_vector, as_vectors, check_metric
from tuffdb.documents.vector.flat import FlatIndex, top_k
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from collections.abc import Collection

_SPACE = {"cosine": "cosine", "euclidean": "l2", "dotproduct": "ip"}
DEFAULT_RECALL = 0.95
FULL_SCAN_BYTES = 10_000 * 1024  # Qdrant's default full_scan_threshold: 10,000 KB of vectors
CHUNK = 2048  # vectors per bulk add_items call of the builder
BUILD_THREADS = 2
WRITER_QUIET = 0.5  # seconds without a write before the builder uses BUILD_THREADS threads
SAMPLE = 200  # calibration queries (recall@10 is estimated from 2,000 neighbours)
CALIBRATION_K = 10
MARGIN = 0.01  # the measured recall must exceed the target by at least this much
Z_MARGIN = 3.0  # ... and by this many standard errors of the measurement
CURVE_STOP = 0.995
EF_LADDER = (10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
             3072, 4096)
MAX_FILTER_EF = 4096
RECALIBRATE_FRACTION = 0.2


@dataclass(slots=True)
class Calibration:
    """What the builder measured on the collection's own vectors (reported by stats)."""

    vectors: int  # graph size when measured
    sample: int
    k: int
    curve: list[tuple[int, float, float]]  # (ef, recall@k, seconds per query)
    exact_seconds: float  # one exact scan of all vectors, seconds per query
    seconds: float  # how long the calibration took
    at: float = field(default_factory=time.time)
    stderr: list[float] = field(default_factory=list)  # per curve point: of its recall

    def ef_for(self, recall: float, k: int) -> tuple[int, float, float] | None:
        """(ef, measured recall, seconds) for ``recall`` at ``k``, or None (no ef reaches it).

        A point counts only if its recall clears the target by ``Z_MARGIN`` standard errors
        (at least ``MARGIN``): 200 queries estimate recall to within about +-0.01 on hard
        data (i.i.d. Gaussian, 128 dimensions), and a bare ``MARGIN`` let the chosen ef
        land just under the target on other queries (0.948 in a CI run)."""
        for i, (ef, got, secs) in enumerate(self.curve):
            se = self.stderr[i] if i < len(self.stderr) else 0.0
            if got >= min(recall + max(MARGIN, Z_MARGIN * se), 1.0):
                scale = max(1.0, k / self.k)  # measured at k = 10; a larger k scales ef
                return max(k, math.ceil(ef * scale)), got, secs * scale
        return None


def _check_recall(value: Any) -> float:
    try:
        r = float(value)
    except (TypeError, ValueError):
        raise ProtocolError("vector_recall must be a number in (0, 1]") from None
    if not 0.0 < r <= 1.0:
        raise ProtocolError("vector_recall must be a number in (0, 1]")
    return r


def _rank_key(hit: tuple[str, float]) -> tuple[float, str]:
    return -hit[1], hit[0]


class VectorEngine:
    """Exact + hnsw search of one ``(field, metric)``; see the module docstring."""

    def __init__(self, metric: str, dimension: int, spec: dict[str, Any] | None = None) -> None:
        spec = spec or {}
        self.metric = check_metric(metric)
        self.dimension = dimension
        self.algorithm = "hnsw" if str(spec.get("algorithm", "flat")).lower() == "hnsw" else "flat"
        self.m = int(spec.get("m") or 16)
        self.ef_construction = int(spec.get("ef_construction") or 200)
        ef = spec.get("ef_search")
        self.ef_search: int | None = int(ef) if ef else None
        self.recall = _check_recall(spec.get("recall", DEFAULT_RECALL))
        threshold = spec.get("full_scan_threshold_kb")
        self.full_scan_bytes = FULL_SCAN_BYTES if threshold is None else int(threshold) * 1024
        self.flat = FlatIndex(self.metric, dimension)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.graph: Any = None
        self.graph_ef = 0  # the ef last set on the graph by a search (0: not known)
        self.label_rid: list[str | None] = []  # graph label -> id (None: a dead label)
        self.rid_label: dict[str, int] = {}  # ids whose current vector is in the graph
        self.pending: dict[str, int] = {}  # ids waiting for (or being added to) the graph
        self.holdout: set[str] = set()  # kept out of the graph: the calibration's queries
        self.outside = FlatIndex(self.metric, dimension)  # the holdout's vectors, scored exactly
        self.in_flight: set[int] = set()  # labels the builder is adding right now
        self.dead_labels = 0
        self.changes = 0  # graph changes since the last calibration
        self.calibration: Calibration | None = None
        self.builder: threading.Thread | None = None
        self.builds = 0
        self.last_write = 0.0
        self._plans: dict[tuple[Any, ...], dict[str, Any]] = {}  # unfiltered plans by state
        self.epoch = 0  # counts new graphs and calibrations (a plan's key)
        self.closed = False  # the database closed: the builder stops, none starts

    def __len__(self) -> int:
        return len(self.flat)

    # ------------------------------------------------------------------ writes
    def add(self, rid: str, value: object) -> None:
        self.add_many([(rid, value)])

    def add_many(self, items: list[tuple[str, object]], data: np.ndarray | None = None) -> None:
        """Add or replace a batch (a later entry for an id wins); checked first.

        ``data``: the items' vectors already checked and converted, one row per item.
        """
        batch = {rid: value for rid, value in items}
        if not batch:
            return
        if data is None or len(batch) != len(items):
            data = as_vectors(list(batch.values()), self.dimension)
        rids = list(batch)
        with self.lock:
            self.last_write = time.monotonic()
            self.flat.add_many(rids, data)
            if self.graph is not None and (self.rid_label.keys().isdisjoint(rids)
                                           and self.pending.keys().isdisjoint(rids)
                                           and self.holdout.isdisjoint(rids)):
                first = len(self.label_rid)  # all new (the usual batch): queued in one step
                self.label_rid.extend(rids)
                self.pending.update(zip(rids, range(first, first + len(rids)), strict=True))
            elif self.graph is not None:
                held = []
                for rid in rids:
                    self._retire(rid)
                    if rid in self.holdout:
                        held.append(rid)
                    else:
                        self.pending[rid] = self._new_label(rid)
                if held:
                    self.outside.add_many(held, self.flat.vectors(held))
            self._start_builder()

    def remove(self, rid: str) -> None:
        with self.lock:
            if rid not in self.flat.rows:
                return
            self.flat.remove(rid)
            if rid in self.holdout:
                self.holdout.discard(rid)
                self.outside.remove(rid)
            if self.graph is not None:
                self._retire(rid)
                self._start_builder()

    def _new_label(self, rid: str) -> int:
        self.label_rid.append(rid)
        return len(self.label_rid) - 1

    def _retire(self, rid: str) -> None:
        """Forget ``rid``'s graph label (marked deleted if in the graph); under the lock."""
        label = self.rid_label.pop(rid, None)
        if label is not None:
            self.graph.mark_deleted(label)
        else:
            label = self.pending.pop(rid, None)
            if label is None:
                return
            if label not in self.in_flight:  # never reached the graph: costs it nothing
                self.label_rid[label] = None
                return
        # (an in-flight label is marked deleted by the builder once its add returns)
        self.label_rid[label] = None
        self.dead_labels += 1
        self.changes += 1

    # ------------------------------------------------------------------ builder
    def _wants_graph(self) -> bool:
        return self.algorithm == "hnsw" and len(self.flat) * self.dimension * 4 > self.full_scan_bytes

    def _stale(self) -> bool:
        """Whether the builder should calibrate: never yet, or the graph has changed past
        the recalibration point and enough unseen vectors are held out to measure with
        (the held-out ones count as changes: they are writes the graph has not taken)."""
        c = self.calibration
        if self.graph is None:
            return False
        if c is None:
            return True
        return len(self.holdout) >= SAMPLE // 2 and (
            self.changes + len(self.holdout) > RECALIBRATE_FRACTION * max(c.vectors, 1))

    def _start_builder(self) -> None:
        """Start the builder thread if there is work and none runs; under the lock."""
        if self.closed:
            return
        if self.graph is None and self._wants_graph():
            self._new_graph()
        if self.builder is None and (self.pending or self._stale()):
            self.builder = threading.Thread(target=self._build, name="tuffdb-hnsw", daemon=True)
            self.builder.start()

    def _new_graph(self) -> None:
        """A fresh graph; every live vector queued for it (under the lock)."""
        g = hnswlib.Index(space=_SPACE[self.metric], dim=self.dimension)
        g.init_index(max_elements=max(1024, 2 * len(self.flat)), M=self.m,
                     ef_construction=self.ef_construction, random_seed=42)
        self.graph, self.label_rid, self.rid_label, self.dead_labels = g, [], {}, 0
        self.graph_ef = 0
        ids = self.flat.ids
        rng = np.random.default_rng(len(ids))
        picked: list[int] = (rng.choice(len(ids), SAMPLE, replace=False).tolist()
                             if len(ids) >= 2 * SAMPLE else [])
        self.holdout = {ids[i] for i in picked}
        self.outside = FlatIndex(self.metric, self.dimension)
        if picked:
            held = [ids[i] for i in picked]
            self.outside.add_many(held, self.flat.vectors(held))
        self.pending = {rid: self._new_label(rid) for rid in ids if rid not in self.holdout}
        self.calibration, self.changes = None, 0
        self.builds += 1
        self.epoch += 1

    def _build(self) -> None:
        try:
            while self._build_step():
                pass
        finally:
            with self.lock:
                self.builder = None
                self.idle.notify_all()

    def _build_step(self) -> bool:
        """One chunk of graph inserts or one calibration; False when there is nothing to do."""
        with self.lock:
            if self.closed:
                return False
            if self.graph is not None and self.dead_labels > max(CHUNK, len(self.flat)):
                self._new_graph()  # more dead labels than live vectors: start over
            if not self.pending:
                if not self._stale():
                    return False
                graph = self.graph
                chunk: list[tuple[str, int]] = []
            else:
                graph = self.graph
                self._reserve()
                chunk = list(itertools.islice(self.pending.items(), CHUNK))
                if not chunk:  # the reserve took the whole queue
                    return True
                self.in_flight = {label for _, label in chunk}
                data = self.flat.vectors([rid for rid, _ in chunk])
                need = chunk[-1][1] + 1
                if need > graph.get_max_elements():
                    graph.resize_index(max(need, 2 * graph.get_max_elements()))
        if not chunk:
            self._calibrate(graph)
            return True
        labels = np.fromiter((label for _, label in chunk), dtype=np.int64, count=len(chunk))
        # releases the GIL; one thread while writes are flowing, so the writer keeps a core
        busy = time.monotonic() - self.last_write < WRITER_QUIET
        graph.add_items(data, labels, num_threads=1 if busy else BUILD_THREADS)
        with self.lock:
            self.in_flight = set()
            if graph is not self.graph:
                return True  # rebuilt meanwhile; the new graph has its own queue
            for rid, label in chunk:
                if self.pending.get(rid) == label:
                    del self.pending[rid]
                    self.rid_label[rid] = label
                else:  # updated or deleted while it was being added
                    graph.mark_deleted(label)
                self.changes += 1
        return True

    def _reserve(self) -> None:
        """Hold out queued vectors for the next calibration (under the lock).

        Once the changes made and queued reach the recalibration point, vectors drawn at
        random from the queue stay out of the graph (scored exactly meanwhile) until
        :data:`SAMPLE` are held: the next calibration's queries, unseen by the graph."""
        c = self.calibration
        short = SAMPLE - len(self.holdout)
        if (c is None or short <= 0 or len(self.rid_label) + len(self.pending) < 2 * SAMPLE
                or self.changes + len(self.pending) + len(self.holdout)
                <= RECALIBRATE_FRACTION * max(c.vectors, 1)):
            return  # (a graph too small to calibrate draws none, as _new_graph)
        free = [rid for rid, label in self.pending.items() if label not in self.in_flight]
        if len(free) > short:
            rng = np.random.default_rng(len(self.label_rid))
            free = [free[i] for i in rng.choice(len(free), short, replace=False).tolist()]
        for rid in free:
            self.label_rid[self.pending.pop(rid)] = None  # never reached the graph
            self.holdout.add(rid)
        if free:
            self.outside.add_many(free, self.flat.vectors(free))

    def _release(self) -> None:
        """After a calibration: the holdout joins the graph (under the lock), so searches
        stop scoring it on the side; its inserts do not count as changes."""
        released = sorted(self.holdout)
        for rid in released:
            self.pending[rid] = self._new_label(rid)
        self.holdout = set()
        self.outside = FlatIndex(self.metric, self.dimension)
        self.changes -= len(released)

    def _calibrate(self, graph: Any) -> None:
        """Measure recall@10 per ef with the held-out vectors as queries (see the docstring)."""
        started = time.perf_counter()
        with self.lock:
            picked = sorted(self.holdout)
            members, changes = len(self.rid_label), self.changes
            cal = self.calibration
            if len(picked) < SAMPLE // 2 and cal is not None and cal.curve:
                # deletes took held-out vectors since _stale said yes: the curve stands
                # until writes bring enough unseen ones
                self.changes = 0
                return
            if len(picked) < SAMPLE // 2 or members <= CALIBRATION_K:
                self.calibration = Calibration(members, 0, CALIBRATION_K, [], 0.0, 0.0)
                self.epoch += 1
                self.changes = 0
                self._release()
                return
            queries = self.flat.vectors(picked)
        want: list[set[str]] = []
        exact = 0.0
        for q in queries:
            with self.lock:
                t = time.perf_counter()
                scores = self.flat.scores(q)
                exact += time.perf_counter() - t
                rows = self.flat.rows
                scores[[rows[r] for r in self.holdout if r in rows]] = -np.inf  # not in the graph
                want.append({self.flat.ids[i] for i in top_k(scores, CALIBRATION_K).tolist()})
        exact /= len(picked)
        curve: list[tuple[int, float, float]] = []
        stderr: list[float] = []
        sizes = np.array([len(w) for w in want], dtype=np.float64)
        for ef in EF_LADDER:
            with self.lock:
                graph.set_ef(ef)
                if graph is self.graph:
                    self.graph_ef = ef  # what a search finds set
                t = time.perf_counter()
                labels, _ = graph.knn_query(queries, k=CALIBRATION_K, num_threads=1)
                secs = (time.perf_counter() - t) / len(picked)
                names = self.label_rid
                found = [{names[lb] for lb in row.tolist()} for row in labels]
            per = np.array([len(w & f) for w, f in zip(want, found, strict=True)],
                           dtype=np.float64)
            recall = float(per.sum() / sizes.sum())
            curve.append((ef, recall, secs))
            # standard error of the recall: the per-query recalls' spread over the sample
            shares = per / np.maximum(sizes, 1.0)
            stderr.append(float(shares.std(ddof=1) / math.sqrt(len(shares)))
                          if len(shares) > 1 else 1.0)
            if recall >= CURVE_STOP or secs > 2 * exact:
                break
        with self.lock:
            self.epoch += 1
            self.calibration = Calibration(members, len(picked), CALIBRATION_K, curve, exact,
                                           time.perf_counter() - started, stderr=stderr)
            self.changes -= changes
            if graph is self.graph:
                self._release()

    def close(self, timeout: float = 60.0) -> None:
        """Stop the builder (the chunk it is adding finishes; no other starts) and wait
        for it: a process that closes its database and exits must not leave a thread
        inside hnswlib while the interpreter shuts down (that aborted the process)."""
        with self.lock:
            self.closed = True
            builder = self.builder
        if builder is not None and builder is not threading.current_thread():
            builder.join(timeout)

    def settle(self, timeout: float = 600.0) -> bool:
        """Wait until the graph holds every vector and its calibration is fresh."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.builder is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.idle.wait(left)
            return True

    # ------------------------------------------------------------------ search
    def plan(self, k: int, *, allowed: Collection[str] | None = None,  # noqa: C901, PLR0911 - one decision table
             ef_search: int | None = None, recall: float | None = None) -> dict[str, Any]:
        """How a search would run (under the lock); the ``explain`` of a vector search."""
        target = self.recall if recall is None else _check_recall(recall)
        n = len(self.flat)
        m = n if allowed is None else sum(1 for r in allowed if r in self.flat.rows)
        out: dict[str, Any] = {"algorithm": self.algorithm, "vectors": n, "candidates": m,
                               "recall_target": target, "pending": len(self.pending)}
        ef = ef_search or self.ef_search
        in_graph = len(self.rid_label)

        def exact(reason: str) -> dict[str, Any]:
            return {**out, "method": "exact", "reason": reason, "expected_recall": 1.0}

        if self.graph is None or in_graph == 0:
            if self.algorithm != "hnsw":
                return exact(f"{self.algorithm} index")
            return exact(f"{n} vectors of {self.dimension * 4} bytes are within the full-scan "
                         f"threshold of {self.full_scan_bytes // 1024} KB")
        if ef:
            return {**out, "method": "hnsw", "reason": "ef_search given", "ef": max(int(ef), k),
                    "expected_recall": None}
        if m * self.dimension * 4 <= self.full_scan_bytes:
            return exact(f"{m} allowed vectors are within the full-scan threshold")
        cal = self.calibration
        if cal is None or not cal.curve:
            return exact("the graph is not calibrated yet")
        pick = cal.ef_for(target, k)
        if pick is None:
            return exact(f"no calibrated ef reaches recall {target}")
        ef, got, secs = pick
        selectivity = m / max(n, 1)
        if allowed is not None:
            ef = math.ceil(ef / max(selectivity, 1e-9))
            secs /= max(selectivity, 1e-9)
            if ef > MAX_FILTER_EF:
                return exact(f"the filter keeps {m} of {n}: the walk would need ef {ef}")
        if secs >= cal.exact_seconds * selectivity:
            return exact(f"exact is cheaper ({cal.exact_seconds * selectivity * 1e3:.2f} ms "
                         f"vs {secs * 1e3:.2f} ms at ef {ef})")
        return {**out, "method": "hnsw", "reason": f"calibrated for recall {target}", "ef": ef,
                "expected_recall": got}

    def search(self, query: object, k: int, *, allowed: Collection[str] | None = None,
               ef_search: int | None = None, recall: object = None,
               explain: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first; ``explain`` gets the plan.
        ``recall``: the request's value as given, checked here (a number in (0, 1])."""
        q = as_vector(query, self.dimension, "query vector")
        target = None if recall is None else _check_recall(recall)
        with self.lock:
            if allowed is None:  # the plan depends only on the state and the request
                key = (k, ef_search, target, len(self.flat), len(self.rid_label),
                       len(self.pending), self.graph is None, self.epoch)
                plan = self._plans.get(key)
                if plan is None:
                    if len(self._plans) >= 64:
                        self._plans.clear()
                    plan = self._plans[key] = self.plan(k, ef_search=ef_search, recall=target)
            else:
                plan = self.plan(k, allowed=allowed, ef_search=ef_search, recall=target)
            if explain is not None:
                explain.update(plan)
            if k <= 0 or not len(self.flat):
                return []
            prepared = self.flat.prepared(q)
            if plan["method"] == "exact":
                return self.flat.top(prepared, k, allowed=allowed)
            return self._graph_search(q, prepared, k, plan["ef"], allowed)

    def _graph_search(self, q: np.ndarray, prepared: np.ndarray, k: int, ef: int,
                      allowed: Collection[str] | None) -> list[tuple[str, float]]:
        names = self.label_rid
        want = min(k, len(self.rid_label))
        ef = max(ef, want)
        if ef != self.graph_ef:  # (a call into hnswlib per search otherwise)
            self.graph.set_ef(ef)
            self.graph_ef = ef
        try:
            if allowed is None:
                labels, dist = self.graph.knn_query(q, k=want, num_threads=1)
            else:
                ok = allowed if isinstance(allowed, (set, frozenset, dict)) else set(allowed)
                labels, dist = self.graph.knn_query(
                    q, k=want, num_threads=1, filter=lambda lb: names[lb] in ok)
        except RuntimeError:  # the filtered walk found fewer than k: score exactly
            return self.flat.top(prepared, k, allowed=allowed)
        scores = self._scores(dist[0].tolist())  # best first, as hnswlib returns them
        ranked = [(rid, s) for rid, s in zip(map(names.__getitem__, labels[0].tolist()), scores,
                                             strict=True) if rid is not None]
        # not in the graph, scored exactly: the holdout (its own small matrix) and the queue;
        # only what beats the graph's k-th result can change the answer
        above = ranked[-1][1] if len(ranked) >= k else None  # the k-th score
        extra: list[tuple[str, float]] = []
        if self.holdout:
            extra += self.outside.top(prepared, k, above=above, allowed=None if allowed is None
                                      else [r for r in self.holdout if r in allowed])
        if self.pending:
            extra += self.flat.top(prepared, k, above=above, allowed=list(self.pending)
                                   if allowed is None else [r for r in self.pending if r in allowed])
        if extra:
            ranked = list({**dict(ranked), **dict(extra)}.items())
            ranked.sort(key=_rank_key)
        elif len(set(scores)) < len(scores):  # a tie: equal scores go by id
            ranked.sort(key=_rank_key)
        if len(ranked) < k and allowed is not None:
            return self.flat.top(prepared, k, allowed=allowed)
        return ranked[:k]

    def _scores(self, distances: list[float]) -> list[float]:
        """hnswlib's distances of one query as scores (a few of them: a plain loop)."""
        if self.metric == "euclidean":  # l2 is the squared distance
            return [1.0 / (1.0 + math.sqrt(max(d, 0.0))) for d in distances]
        return [1.0 - d for d in distances]  # cosine: 1 - cos; ip: 1 - dot

    def stats(self) -> dict[str, Any]:
        with self.lock:
            cal = self.calibration
            return {"algorithm": self.algorithm, "metric": self.metric,
                    "dimension": self.dimension, "vectors": len(self.flat),
                    "recall_target": self.recall, "full_scan_threshold_kb":
                    self.full_scan_bytes // 1024, "graph": None if self.graph is None else {
                        "m": self.m, "ef_construction": self.ef_construction,
                        "vectors": len(self.rid_label), "pending": len(self.pending),
                        "holdout": len(self.holdout),
                        "dead_labels": self.dead_labels, "builds": self.builds},
                    "calibration": None if cal is None else asdict(cal)}

