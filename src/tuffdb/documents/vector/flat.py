"""Exact nearest neighbours: every query scores every stored vector (numpy, float32).

Rows live in one growing matrix (capacity doubles); a delete moves the last row into the
hole, so the live rows are always ``matrix[:count]``. For ``cosine`` the rows are stored
normalised, so a query is one matrix-vector product for every metric.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from threadpoolctl import ThreadpoolController

from tuffdb.documents.vector import as_vector, check_metric

if TYPE_CHECKING:
    from collections.abc import Collection


def _normalised(v: np.ndarray) -> np.ndarray:
    sq = float(v @ v)
    if not math.isfinite(sq):  # entries past ~1.8e19 overflow float32's sum: scale first
        v = v / float(np.abs(v).max())
        sq = float(v @ v)
    n = math.sqrt(sq)
    return v / n if n > 0 else v


# Below this many matrix entries OpenBLAS runs gemv on the calling thread (here it
# threads from ~500,000: 4,000 x 128), so a plain ``m @ v`` needs no thread control; it
# is 2-3x faster than ``einsum``'s loop (200 x 128: 1.8 vs 4.4 us; 2,000 x 128: 12 vs 31).
BLAS_UNTHREADED_ENTRIES = 1 << 17
_BLAS_LOCK = threading.Lock()
_blas: list[Any] | None = None  # the BLAS libraries' thread controls, found on first use


def _matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``m @ v``: for small products BLAS's gemv on this thread; for large ones whichever
    of single-threaded gemv and ``einsum``'s loop was faster here on the first large
    product (:func:`_pick`). Which wins depends on the CPU and the BLAS build: gemv was
    20-30% faster than einsum at 100,000 x 128 on this project's host in one session, and
    einsum 1.4x faster than gemv on another CPU the host moved to (369 vs 514 scans/s).
    BLAS's own threads are held at one for a gemv call: they spin when the cores are
    shared and made a 10,000 x 128 product 7x slower on this host (docs/design/search.md).
    The setting is process-wide, so scans of this size take turns (``_BLAS_LOCK``) and
    restore it after; small products, which BLAS never threads, skip all that."""
    global _einsum  # noqa: PLW0603 - decided once per process
    if m.size < BLAS_UNTHREADED_ENTRIES:
        return np.asarray(m @ v)
    if _einsum is None:
        _einsum = _pick(m, v)
    if _einsum:
        result: np.ndarray = np.einsum("ij,j->i", m, v)
        return result
    return _gemv(m, v)


def _gemv(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    global _blas  # noqa: PLW0603 - found once per process
    with _BLAS_LOCK:
        if _blas is None:
            _blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        before = [c.get_num_threads() for c in _blas]
        for c in _blas:
            c.set_num_threads(1)
        try:
            return np.asarray(m @ v)
        finally:
            for c, n in zip(_blas, before, strict=True):
                c.set_num_threads(n)


_einsum: bool | None = None  # large products by einsum? decided on the first one

# FAISS's exhaustive inner-product kernel (``faiss.knn``: SIMD dot products and a heap,
# on the matrix as it is, no index built; the GIL released): 1.3-1.5x faster than
# gemv + top_k for an unfiltered scan of 100,000 x 128 here. Imported on the first
# large scan; without FAISS the numpy path serves (docs/design/search.md).
_faiss: Any = None
_faiss_tried = False


def _faiss_module() -> Any:
    global _faiss, _faiss_tried  # noqa: PLW0603 - found once per process
    if not _faiss_tried:
        with _BLAS_LOCK:
            if not _faiss_tried:
                faiss: Any = None
                with contextlib.suppress(ImportError):  # optional, and only for large scans
                    faiss = importlib.import_module("faiss")
                if faiss is not None:
                    faiss.omp_set_num_threads(1)  # one query: its threads would only spin
                _faiss = faiss
                _faiss_tried = True
    return _faiss
PICK_ROUNDS = 3


def _pick(m: np.ndarray, v: np.ndarray) -> bool:
    """Whether einsum beats single-threaded gemv on ``m @ v``: the best of
    :data:`PICK_ROUNDS` runs of each, alternating (a few scans, once per process; a busy
    moment can pick the slower one, never a wrong result: both compute the product)."""
    best = {True: math.inf, False: math.inf}
    for _ in range(PICK_ROUNDS):
        for einsum in (False, True):
            t = time.perf_counter()
            if einsum:
                np.einsum("ij,j->i", m, v)
            else:
                _gemv(m, v)
            best[einsum] = min(best[einsum], time.perf_counter() - t)
    return best[True] < best[False]


SAMPLE_STRIDE = 64  # top_k of a long array: the k-th best of every 64th score is a floor


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first."""
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    if scores.size >= 64 * SAMPLE_STRIDE and k * SAMPLE_STRIDE * 4 <= scores.size:
        # The k-th best of a sample is <= the k-th best of all, so every top-k score is
        # >= it: one comparison pass keeps a few hundred candidates for the partition
        # (4x faster than argpartition over 100,000 scores).
        sample = scores[::SAMPLE_STRIDE]
        floor = np.partition(sample, sample.size - k)[sample.size - k]
        cand = np.flatnonzero(scores >= floor)
        part = cand[np.argpartition(-scores[cand], k - 1)[:k]] if cand.size > k else cand
    else:
        part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class FlatIndex:
    """Exact search; O(n * dimension) per query."""

    algorithm = "flat"

    def __init__(self, metric: str, dimension: int) -> None:
        self.metric = check_metric(metric)
        self.dimension = dimension
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.matrix = np.zeros((16, dimension), dtype=np.float32)
        self.sq_norms = np.zeros(16, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, rid: str, value: object) -> None:
        self.add_many([rid], as_vector(value, self.dimension)[None, :])

    def add_many(self, rids: list[str], data: np.ndarray) -> None:
        """Add or replace a batch: ``data`` holds one checked float32 row per id."""
        if self.metric == "cosine":
            norms = np.linalg.norm(data, axis=1, keepdims=True)
            if not np.isfinite(norms).all():  # entries past ~1.8e19 overflow float32's sum
                norms = np.linalg.norm(data.astype(np.float64), axis=1, keepdims=True)
            data = data / np.where(norms > 0, norms, 1.0)
        first = len(self.ids)
        rows: np.ndarray | slice
        if self.rows.keys().isdisjoint(rids):  # all new (the usual batch): appended rows
            self.rows.update(zip(rids, range(first, first + len(rids)), strict=True))
            self.ids.extend(rids)
            rows = slice(first, len(self.ids))
        else:
            rows = np.empty(len(rids), dtype=np.int64)
            for i, rid in enumerate(rids):
                row = self.rows.get(rid)
                if row is None:
                    row = self.rows[rid] = len(self.ids)
                    self.ids.append(rid)
                rows[i] = row
        if len(self.ids) > self.matrix.shape[0]:
            size = max(len(self.ids), 2 * self.matrix.shape[0])
            self.matrix = np.resize(self.matrix, (size, self.dimension))
            self.sq_norms = np.resize(self.sq_norms, size)
        self.matrix[rows] = data  # ids are distinct (the caller keeps the last of each)
        self.sq_norms[rows] = np.einsum("ij,ij->i", data, data)

    def vectors(self, rids: list[str]) -> np.ndarray:
        """The stored rows of ``rids`` (normalised for cosine), copied."""
        return self.matrix[np.fromiter(map(self.rows.__getitem__, rids), dtype=np.int64,
                                       count=len(rids))]

    def remove(self, rid: str) -> None:
        row = self.rows.pop(rid, None)
        if row is None:
            return
        last = len(self.ids) - 1
        if row != last:
            moved = self.ids[last]
            self.matrix[row] = self.matrix[last]
            self.sq_norms[row] = self.sq_norms[last]
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()

    def prepared(self, query: np.ndarray) -> np.ndarray:
        """A checked query as :meth:`scores` takes it (normalised for cosine)."""
        return _normalised(query) if self.metric == "cosine" else query

    def scores(self, query: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Scores of every row (or of ``rows``) for a :meth:`prepared` query."""
        m = self.matrix[: len(self.ids)] if rows is None else self.matrix[rows]
        dots = _matvec(m, query)
        if self.metric != "euclidean":
            return dots
        sq = (self.sq_norms[: len(self.ids)] if rows is None else self.sq_norms[rows])
        dist = np.sqrt(np.maximum(sq - 2.0 * dots + float(query @ query), 0.0))
        return np.asarray(1.0 / (1.0 + dist))

    def top(self, query: np.ndarray, k: int, *, allowed: Collection[str] | None = None,
            above: float | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` for a :meth:`prepared` query, best first;
        ``allowed``: ids to consider; ``above``: only scores >= it (a cut to beat)."""
        if not self.ids or k <= 0:
            return []
        n = len(self.ids)
        if (allowed is None and above is None and self.metric != "euclidean" and k < n
                and n * self.dimension >= BLAS_UNTHREADED_ENTRIES):
            faiss = _faiss_module()
            if faiss is not None:
                dist, idx = faiss.knn(query[None, :], self.matrix[:n], k,
                                      metric=faiss.METRIC_INNER_PRODUCT)
                ids = self.ids
                return [(ids[i], d) for i, d in zip(idx[0].tolist(), dist[0].tolist(),
                                                    strict=True)]
        rows: np.ndarray | None = None
        if allowed is not None:
            rows = np.fromiter((self.rows[r] for r in allowed if r in self.rows), dtype=np.int64)
            if rows.size == 0:
                return []
        s = self.scores(query, rows)
        if above is not None:
            if float(s.max()) < above:  # the usual case for a small side matrix
                return []
            hits = np.flatnonzero(s >= above)
            picked = hits[top_k(s[hits], k)]
        else:
            picked = top_k(s, k)
        ids = self.ids
        if rows is not None:
            return [(ids[r], float(s[i])) for r, i in zip(rows[picked].tolist(), picked.tolist(),
                                                           strict=True)]
        return [(ids[i], float(s[i])) for i in picked.tolist()]

    def search(self, query: object, k: int, *,
               allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first (``allowed``: ids to consider)."""
        q = as_vector(query, self.dimension, "query vector")
        return self.top(self.prepared(q), k, allowed=allowed)
