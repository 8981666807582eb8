"""Vector search keeps its recall promise: recall@10 >= the target (0.95 by default) on
hard (Gaussian) and clustered vectors, exact search below the full-scan threshold (and
explain says so), filtered searches that return k results whenever k are allowed, and a
per-request ``vector_recall``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from tuffdb.documents import Database, Vector
from tuffdb.documents.search_index import state_for
from tuffdb.documents.vector.engine import Calibration
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

QUERIES = 100


def make(kind: str, n: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` vectors and QUERIES queries: i.i.d. Gaussian, or 1,000 Gaussian centroids + noise."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        return (rng.standard_normal((n, dim)).astype(np.float32),
                rng.standard_normal((QUERIES, dim)).astype(np.float32))
    centroids = rng.standard_normal((1000, dim))
    data = centroids[rng.integers(0, 1000, n)] + 0.5 * rng.standard_normal((n, dim))
    queries = centroids[rng.integers(0, 1000, QUERIES)] + 0.5 * rng.standard_normal((QUERIES, dim))
    return data.astype(np.float32), queries.astype(np.float32)


def truth(data: np.ndarray, queries: np.ndarray, k: int = 10) -> list[set[int]]:
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    scores = queries @ unit.T
    return [set(np.argpartition(-row, k)[:k].tolist()) for row in scores]


def load(db: Database, data: np.ndarray, index: dict[str, Any]) -> Any:
    spec = {"type": "vector", "algorithm": "hnsw", "metric": "cosine", **index}
    db.create_collection("emb", {"fields": {"v": {"field_type": "Vector", "index": spec}}})
    emb = db.collection("emb")
    for start in range(0, len(data), 5000):
        emb.insert_many([{"id": f"{i}", "v": Vector(data[i].tolist())}
                         for i in range(start, min(start + 5000, len(data)))])
    return emb


def measure(emb: Any, queries: np.ndarray, want: list[set[int]], **options: Any) -> tuple[float, set[str]]:
    recall, _, methods = measure_with_error(emb, queries, want, **options)
    return recall, methods


def measure_with_error(emb: Any, queries: np.ndarray, want: list[set[int]],
                       **options: Any) -> tuple[float, float, set[str]]:
    """recall@10 over ``queries``, the standard error of that estimate (the spread of the
    per-query recalls), and the methods the engine used."""
    shares, methods = [], set()
    for q, w in zip(queries, want, strict=True):
        out = emb.search("", vector=q.tolist(), vector_k=10, explain=True, **options)
        assert len(out["results"]) == 10
        shares.append(len(w & {int(r["record"]["id"]) for r in out["results"]}) / 10)
        methods.add(out["explain"]["vector"]["method"])
    return float(np.mean(shares)), float(np.std(shares, ddof=1) / np.sqrt(len(shares))), methods


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database.open(tmp_path / "docs", durability="none")
    yield d
    d.close()


def check_default_recall(db: Database, kind: str, n: int, dim: int, index: dict[str, Any]) -> None:
    data, queries = make(kind, n, dim, seed=dim + n)
    emb = load(db, data, index)
    want = truth(data, queries)
    stats = emb.search_stats(settle=300)["vectors"][0]
    assert stats["graph"]["pending"] == 0
    cal = stats["calibration"]
    assert cal is not None and cal["vectors"] >= n / (1 + 0.2) - stats["graph"]["holdout"]
    recall, methods = measure(emb, queries, want)
    assert recall >= 0.95, (recall, methods, cal["curve"])
    # whatever the engine chose, the calibrated graph alone also keeps the promise
    # (unless no ef reached it and the engine searches exactly): the ef its rule picks.
    # Where the engine would search exactly, that ef sits where recall climbs slowly with
    # ef, and these 100 queries measure it to about +-0.006 (one standard error): the
    # graph must not be below the target by more than two of them (a CI run measured
    # 0.945 once, an ef the calibration had put at 0.96 or more by 3 of its own).
    assert len(cal["stderr"]) == len(cal["curve"])
    pick = Calibration(**cal).ef_for(0.95, 10)
    if pick:
        graph_recall, se, methods = measure_with_error(emb, queries, want, ef_search=pick[0])
        assert methods == {"hnsw"}
        assert graph_recall >= 0.95 - 2 * se, (graph_recall, se, pick, cal["curve"])


@pytest.mark.parametrize(("kind", "dim"), [("gaussian", 64), ("gaussian", 128), ("clustered", 128)])
def test_default_recall_at_20000_vectors_with_the_graph_in_use(db: Database, kind: str,
                                                                  dim: int) -> None:
    # 20,000 vectors are within the full-scan threshold, so threshold 0 forces the graph
    check_default_recall(db, kind, 20_000, dim, {"full_scan_threshold_kb": 0})


@pytest.mark.once
@pytest.mark.parametrize(("kind", "dim"), [("gaussian", 64), ("gaussian", 128), ("clustered", 128)])
def test_default_recall_at_100000_vectors(db: Database, kind: str, dim: int) -> None:
    # ef_construction 64 keeps the build lean; the calibration has to make up for it
    check_default_recall(db, kind, 100_000, dim, {"ef_construction": 64})


def test_exact_below_the_full_scan_threshold_and_explain_says_so(db: Database) -> None:
    data, queries = make("gaussian", 2000, 64, seed=1)
    emb = load(db, data, {})
    out = emb.search("", vector=queries[0].tolist(), vector_k=10, explain=True, ef_search=32)
    plan = out["explain"]["vector"]
    assert plan["method"] == "exact"
    assert "full-scan threshold" in plan["reason"]
    assert plan["expected_recall"] == 1.0
    assert {int(r["record"]["id"]) for r in out["results"]} == truth(data, queries[:1])[0]
    stats = emb.search_stats(settle=60)["vectors"][0]
    assert stats["graph"] is None and stats["full_scan_threshold_kb"] == 10_000


def test_filtered_vector_search_returns_k_whenever_k_match(db: Database) -> None:
    data, queries = make("gaussian", 6000, 32, seed=3)
    spec = {"type": "vector", "algorithm": "hnsw", "metric": "cosine", "full_scan_threshold_kb": 0}
    db.create_collection("emb", {"fields": {"v": {"field_type": "Vector", "index": spec}}})
    emb = db.collection("emb")
    emb.insert_many([{"id": f"{i}", "g": i % 100, "v": Vector(data[i].tolist())}
                     for i in range(len(data))])
    emb.search_stats(settle=60)
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    for share in (1, 3, 40, 100):  # percent of the records the filter keeps
        where = {"type": "Condition", "content": {"field": "g", "operator": "Lt", "value": share}}
        allowed = np.flatnonzero(np.arange(len(data)) % 100 < share)
        hits = 0
        for q in queries[:20]:
            out = emb.search("", vector=q.tolist(), vector_k=10, filters=where, explain=True)
            got = [int(r["record"]["id"]) for r in out["results"]]
            assert len(got) == 10 and all(i % 100 < share for i in got)
            best = allowed[np.argsort(-(unit[allowed] @ q))[:10]]
            hits += len(set(best.tolist()) & set(got))
        assert hits / 200 >= 0.95, (share, hits)
    few = {"type": "Condition", "content": {"field": "id", "operator": "In",
                                            "value": ["5", "17", "4000"]}}
    out = emb.search("", vector=queries[0].tolist(), vector_k=10, filters=few)
    assert sorted(int(r["record"]["id"]) for r in out["results"]) == [5, 17, 4000]


def test_per_request_recall_and_explicit_ef(db: Database) -> None:
    data, queries = make("clustered", 8000, 32, seed=5)
    emb = load(db, data, {"full_scan_threshold_kb": 0})
    cal = emb.search_stats(settle=60)["vectors"][0]["calibration"]
    assert [ef for ef, _, _ in cal["curve"]] == sorted(ef for ef, _, _ in cal["curve"])
    q = queries[0].tolist()
    low = emb.search("", vector=q, vector_recall=0.5, explain=True)["explain"]["vector"]
    high = emb.search("", vector=q, vector_recall=0.99, explain=True)["explain"]["vector"]
    assert low["recall_target"] == 0.5 and high["recall_target"] == 0.99
    if low["method"] == high["method"] == "hnsw":
        assert low["ef"] <= high["ef"]
        assert low["expected_recall"] >= 0.51
    exact = emb.search("", vector=q, vector_recall=1.0, explain=True)["explain"]["vector"]
    assert exact["method"] == "exact" or exact["expected_recall"] >= 1.0
    given = emb.search("", vector=q, ef_search=20, explain=True)["explain"]["vector"]
    assert (given["method"], given["ef"]) == ("hnsw", 20)
    for bad in (1.5, [0.9]):  # a list too (plans are cached by the request's values)
        with pytest.raises(ProtocolError, match="vector_recall"):
            emb.search("", vector=q, vector_recall=bad)


def test_updates_and_deletes_are_seen_at_once_while_the_graph_catches_up(db: Database) -> None:
    data, _ = make("gaussian", 4000, 16, seed=9)
    emb = load(db, data, {"full_scan_threshold_kb": 0})
    target = np.ones(16, dtype=np.float32)
    emb.update("7", {"v": Vector(target.tolist())})  # maybe before the graph holds "7"
    first = emb.search("", vector=target.tolist(), vector_k=1)["results"][0]
    assert first["record"]["id"] == "7" and first["score"] == pytest.approx(1.0, abs=1e-5)
    emb.delete("7")
    after = emb.search("", vector=target.tolist(), vector_k=5)["results"]
    assert "7" not in {r["record"]["id"] for r in after}
    emb.search_stats(settle=60)
    emb.insert({"id": "7", "v": Vector(target.tolist())})
    again = emb.search("", vector=target.tolist(), vector_k=1, ef_search=16)["results"]
    assert again[0]["record"]["id"] == "7"
    stats = emb.search_stats(settle=60)["vectors"][0]
    assert stats["vectors"] == 4000
    assert stats["graph"]["vectors"] + stats["graph"]["holdout"] == 4000


def test_the_holdout_joins_the_graph_and_the_next_one_comes_from_queued_writes(
        db: Database) -> None:
    data, _ = make("gaussian", 5000, 16, seed=11)
    emb = load(db, data[:4000], {"full_scan_threshold_kb": 0})
    first = emb.search_stats(settle=60)["vectors"][0]
    engine = state_for(emb).vectors["v", "cosine"].index
    # calibrated on 200 vectors the graph had not seen, which then joined it
    assert first["calibration"]["sample"] == 200 and first["graph"]["holdout"] == 0
    assert first["graph"]["vectors"] == 4000 and not engine.holdout
    for rid in [str(i) for i in range(150)]:
        emb.delete(rid)
    emb.insert_many([{"id": f"{i}", "v": Vector(data[i].tolist())} for i in range(4000, 5000)])
    stats = emb.search_stats(settle=60)["vectors"][0]
    graph, cal = stats["graph"], stats["calibration"]
    assert stats["vectors"] == 4850
    assert cal["at"] > first["calibration"]["at"] and cal["sample"] == 200  # recalibrated
    assert cal["vectors"] == 4650  # measured before its 200 queries (new writes) joined
    assert graph["holdout"] == 0 and graph["vectors"] == 4850 and graph["pending"] == 0
    q = data[4500].tolist()
    assert emb.search("", vector=q, vector_k=1, ef_search=32)["results"][0]["record"]["id"] == "4500"


def test_deletes_alone_keep_the_calibration_and_the_graph_in_use(db: Database) -> None:
    data, queries = make("gaussian", 4000, 16, seed=12)
    emb = load(db, data, {"full_scan_threshold_kb": 0})
    before = emb.search_stats(settle=60)["vectors"][0]["calibration"]
    q = queries[0].tolist()
    planned = emb.search("", vector=q, vector_k=10, explain=True)["explain"]["vector"]
    for rid in [str(i) for i in range(0, 4000, 4)]:  # a quarter: past the recalibration point
        emb.delete(rid)
    stats = emb.search_stats(settle=60)["vectors"][0]
    assert stats["vectors"] == 3000 and stats["graph"]["holdout"] == 0
    assert stats["calibration"]["curve"] == before["curve"]  # no unseen queries to measure
    out = emb.search("", vector=q, vector_k=10, explain=True)
    plan = out["explain"]["vector"]
    assert plan["method"] == planned["method"] and plan["reason"] == planned["reason"], plan
    assert len(out["results"]) == 10 and all(int(r["record"]["id"]) % 4 for r in out["results"])


def test_a_trickle_of_writes_gathers_the_next_holdout_and_recalibrates(db: Database) -> None:
    data, _ = make("gaussian", 4900, 16, seed=13)
    emb = load(db, data[:4000], {"full_scan_threshold_kb": 0})
    first = emb.search_stats(settle=60)["vectors"][0]["calibration"]
    # 900 writes in 30 small batches, the builder running meanwhile: past the
    # recalibration point (20% of the 3,800 calibrated) only with the held-out ones counted
    for start in range(4000, 4900, 30):
        emb.insert_many([{"id": f"{i}", "v": Vector(data[i].tolist())}
                         for i in range(start, start + 30)])
    stats = emb.search_stats(settle=60)["vectors"][0]
    cal, graph = stats["calibration"], stats["graph"]
    assert cal["at"] > first["at"] and cal["sample"] >= 100  # measured on unseen writes
    assert graph["vectors"] + graph["holdout"] == 4900 and graph["pending"] == 0
