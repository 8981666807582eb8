"""Vector indexes: exact (flat.py, numpy) and approximate (hnsw.py, hnswlib).

Scores are similarities, higher is better, the same for both algorithms:
``cosine`` -> cosine similarity in [-1, 1]; ``dotproduct`` -> the dot product;
``euclidean`` -> ``1 / (1 + distance)`` in (0, 1].
"""

from __future__ import annotations

import contextlib
import math
from itertools import chain
from typing import Any

import numpy as np

from tuffdb.documents.values import Vector
from tuffdb.errors import IntegrityError, ProtocolError

METRICS = ("cosine", "euclidean", "dotproduct")
ALGORITHMS = ("flat", "hnsw", "ivf")


def as_vector(value: Any, dimension: int | None, what: str = "vector") -> np.ndarray:
    """``value`` (a list/tuple of numbers) as a float32 array of ``dimension`` entries.

    :raises IntegrityError: on a dimension mismatch or a non-numeric entry.
    """
    try:
        arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise IntegrityError(f"{what} must be a list of numbers", condition="vector") from None
    if arr.ndim != 1 or arr.size == 0:
        raise IntegrityError(f"{what} must be a non-empty list of numbers", condition="vector")
    if dimension is not None and arr.size != dimension:
        raise IntegrityError(
            f"{what} has {arr.size} dimensions; this index holds {dimension}", condition="vector"
        )
    # a finite sum of squares means every entry is finite (NaN and infinity carry into
    # it); one dot product, the full check only when it is not (or overflowed)
    if not math.isfinite(float(arr @ arr)) and not np.isfinite(arr).all():
        raise IntegrityError(f"{what} holds NaN or infinity", condition="vector")
    return arr


def as_vectors(values: list[Any], dimension: int, what: str = "vector") -> np.ndarray:
    """Equal-length lists of numbers as one float32 matrix (one conversion per batch).

    :raises IntegrityError: on a dimension mismatch, a non-numeric, NaN or infinite entry.
    """
    arr: np.ndarray | None = None
    if values and set(map(len, values)) == {dimension}:
        with contextlib.suppress(TypeError, ValueError):  # (then asarray says what is wrong)
            # one flat pass over the numbers: twice as fast as asarray's nested walk
            arr = np.fromiter(chain.from_iterable(values), dtype=np.float32,
                              count=len(values) * dimension).reshape(len(values), dimension)
    if arr is None:
        try:
            arr = np.asarray(values, dtype=np.float32)
        except (TypeError, ValueError):  # ragged or non-numeric: say which one, as as_vector
            for v in values:
                as_vector(v, dimension, what)
            raise IntegrityError(f"{what} must be lists of numbers", condition="vector") from None
    if arr.ndim != 2 or arr.shape[1] != dimension:
        raise IntegrityError(f"{what} has {arr.shape[-1]} dimensions; this index holds "
                             f"{dimension}", condition="vector")
    if not np.isfinite(arr).all():
        raise IntegrityError(f"{what} holds NaN or infinity", condition="vector")
    return arr


_PLAIN_NUMBERS = frozenset({int, float})


def is_vector(value: Any) -> bool:
    """A non-empty list/tuple of numbers (ints or floats, not bools)."""
    if type(value) is Vector:  # floats only, by construction
        return len(value) > 0
    if not isinstance(value, (list, tuple)) or not value:
        return False
    if set(map(type, value)) <= _PLAIN_NUMBERS:  # the common case, checked at C speed
        return True
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def check_metric(metric: str) -> str:
    m = str(metric).lower()
    if m not in METRICS:
        raise ProtocolError(f"unknown vector metric {metric!r}; use one of {', '.join(METRICS)}")
    return m
