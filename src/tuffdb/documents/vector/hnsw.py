"""Approximate nearest neighbours with the ``hnswlib`` API (HNSW graphs, C++).

The project pins ``chroma-hnswlib==0.7.6`` (the hnswlib API shipped as wheels); the same
code and tests also pass on ``hnswlib==0.8.0``.

Record ids map to integer labels for the life of the index: an update re-adds the same
label (hnswlib replaces the vector and relinks it), a delete marks the label deleted
(searches skip it), and a re-insert unmarks it. Capacity doubles with ``resize_index``.
``ef_search`` is per request; since hnswlib keeps ef as index state, a query sets it and
searches under one lock. With ``allowed`` ids the search passes hnswlib a filter; when
the filtered graph walk cannot fill k results it falls back to exact scoring of the
allowed vectors (never fewer results than exist).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import hnswlib  # type: ignore[import-untyped]
import numpy as np

from tuffdb.documents.vector import as_vector, check_metric
from tuffdb.documents.vector.flat import top_k

if TYPE_CHECKING:
    from collections.abc import Collection

_SPACE = {"cosine": "cosine", "euclidean": "l2", "dotproduct": "ip"}
DEFAULT_EF_SEARCH = 64


class HnswIndex:
    algorithm = "hnsw"

    def __init__(self, metric: str, dimension: int, *, m: int = 16,  # noqa: PLR0913 - hnsw knobs
                 ef_construction: int = 200, ef_search: int | None = None,
                 capacity: int = 1024) -> None:
        self.metric = check_metric(metric)
        self.dimension = dimension
        self.ef_search = ef_search or DEFAULT_EF_SEARCH
        self.index = hnswlib.Index(space=_SPACE[self.metric], dim=dimension)
        self.index.init_index(max_elements=capacity, M=m, ef_construction=ef_construction,
                              random_seed=42)
        self.labels: dict[str, int] = {}
        self.ids: list[str] = []  # label -> id
        self.deleted: set[int] = set()
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.labels) - len(self.deleted)

    def add(self, rid: str, value: object) -> None:
        v = as_vector(value, self.dimension)
        with self.lock:
            label = self.labels.get(rid)
            if label is None:
                label = len(self.ids)
                if label >= self.index.get_max_elements():
                    self.index.resize_index(2 * self.index.get_max_elements())
                self.ids.append(rid)
                self.labels[rid] = label
            elif label in self.deleted:
                self.index.unmark_deleted(label)
                self.deleted.discard(label)
            self.index.add_items(v[None, :], np.array([label]), num_threads=1)

    def add_many(self, items: list[tuple[str, object]]) -> None:
        """Bulk load of new ids (the rebuild path): one multi-threaded add_items call."""
        fresh = [(rid, v) for rid, v in items if rid not in self.labels]
        for rid, v in items:
            if rid in self.labels:
                self.add(rid, v)
        if not fresh:
            return
        data = np.stack([as_vector(v, self.dimension) for _, v in fresh])
        with self.lock:
            start = len(self.ids)
            need = start + len(fresh)
            if need > self.index.get_max_elements():
                self.index.resize_index(max(need, 2 * self.index.get_max_elements()))
            for rid, _ in fresh:
                self.labels[rid] = len(self.ids)
                self.ids.append(rid)
            self.index.add_items(data, np.arange(start, need), num_threads=2)

    def remove(self, rid: str) -> None:
        with self.lock:
            label = self.labels.get(rid)
            if label is not None and label not in self.deleted:
                self.index.mark_deleted(label)
                self.deleted.add(label)

    def _score(self, distances: np.ndarray) -> np.ndarray:
        if self.metric == "euclidean":
            return np.asarray(1.0 / (1.0 + np.sqrt(np.maximum(distances, 0.0))))
        return np.asarray(1.0 - distances)  # cosine: 1 - cos; ip: 1 - dot

    def search(self, query: object, k: int, *, allowed: Collection[str] | None = None,
               ef_search: int | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first (approximate)."""
        q = as_vector(query, self.dimension, "query vector")
        with self.lock:
            live = len(self)
            labels_ok = None
            if allowed is not None:
                labels_ok = {self.labels[r] for r in allowed
                             if r in self.labels and self.labels[r] not in self.deleted}
                live = len(labels_ok)
            k = min(k, live)
            if k <= 0:
                return []
            self.index.set_ef(max(ef_search or self.ef_search, k))
            try:
                if labels_ok is None:
                    labels, dist = self.index.knn_query(q, k=k, num_threads=1)
                else:
                    ok = labels_ok
                    labels, dist = self.index.knn_query(q, k=k, num_threads=1,
                                                        filter=lambda label: label in ok)
            except RuntimeError:  # the filtered walk found fewer than k: score exactly
                return self._exact(q, sorted(labels_ok or ()), k)
            scores = self._score(dist[0])
            return [(self.ids[int(lb)], float(s)) for lb, s in zip(labels[0], scores, strict=True)]

    def _exact(self, q: np.ndarray, labels: list[int], k: int) -> list[tuple[str, float]]:
        data = np.asarray(self.index.get_items(labels), dtype=np.float32)
        if self.metric == "cosine":
            norms = np.linalg.norm(data, axis=1) * (float(np.linalg.norm(q)) or 1.0)
            s = (data @ q) / np.where(norms > 0, norms, 1.0)
        elif self.metric == "dotproduct":
            s = data @ q
        else:
            s = 1.0 / (1.0 + np.linalg.norm(data - q, axis=1))
        return [(self.ids[labels[i]], float(s[i])) for i in top_k(s, k)]
