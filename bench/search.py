"""Search benchmark (issue 6): text queries/s and vector queries/s at recall >= 0.95.

    python bench/search.py         # full: 100,000 documents, 3 reps (the lead runs it)
    python bench/search.py --docs 2000 --queries 50 --reps 1    # smoke test (seconds)

Embedded, one process, one thread issuing queries (closed loop; latency not corrected
for coordinated omission). Per repetition, on a fresh data directory:

1. **Load**: ``--docs`` records ``{"title", "body", "tag", "emb"}``: title 4 and body 40
   words drawn from a Zipf(1.1) vocabulary of 20,000 pseudo-words, ``emb`` a Gaussian
   ``--dim``-d vector (seed 42). The collection's schema puts an hnsw index (m 16,
   ef_construction 200, cosine) on ``emb``; timed as ``ingest``.
2. **Index build**: close and reopen; the first search builds the in-memory text and
   vector indexes from the records (the restart path); timed as ``index_build``.
3. **Text**: ``--queries`` queries of 1-3 vocabulary words (weighted like the corpus),
   ``limit 10``; also with ``fuzzy=True``. Queries/s and latency percentiles.
4. **Vector**: exact (flat) top-10 for every query vector is the ground truth; hnsw is
   run for each ``ef_search`` in EF_SWEEP and the fastest setting with recall@10 >= 0.95
   is reported (with the whole sweep), beside flat's own queries/s. Note the paths differ:
   flat is timed on the index alone, hnsw through ``collection.search`` (which also loads
   and projects the 10 records), so flat looks better than it is at small sizes.

Output: ``docs/benchmarks/search-raw/<run-id>.json`` and ``latest.json`` (every rep, the
environment, the command); ``--out`` changes the directory.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, T201, S311
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, bench_dir, environment, latency_summary, spread, utc_now, write_json

sys.path.insert(0, str(REPO / "src"))
from tuffdb.documents import Database, Vector
from tuffdb.documents.search_index import state_for
from tuffdb.documents.vector.flat import FlatIndex

EF_SWEEP = (16, 32, 64, 128, 256, 512, 1024)
VOCAB_SIZE = 20_000
TARGET_RECALL = 0.95


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


def load(db: Database, n: int, dim: int, seed: int) -> tuple[list[str], list[float], np.ndarray]:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    weights = zipf_weights(len(vocab))
    vecs = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    db.create_collection("docs", {"fields": {"emb": {"field_type": "Vector", "index": {
        "type": "vector", "algorithm": "hnsw", "metric": "cosine", "m": 16,
        "ef_construction": 200}}}})
    coll = db.collection("docs")
    batch = []
    for i in range(n):
        words = rng.choices(vocab, weights, k=44)
        batch.append({"id": f"d{i:07d}", "title": " ".join(words[:4]),
                      "body": " ".join(words[4:]), "tag": f"t{i % 10}",
                      "emb": Vector(vecs[i].tolist())})
        if len(batch) == 1000:
            coll.insert_many(batch)
            batch = []
    if batch:
        coll.insert_many(batch)
    return vocab, weights, vecs


def timed(fn: Any, items: list[Any]) -> tuple[float, list[int], list[Any]]:
    lat, out = [], []
    start = time.perf_counter()
    for item in items:
        t = time.perf_counter_ns()
        out.append(fn(item))
        lat.append(time.perf_counter_ns() - t)
    return len(items) / (time.perf_counter() - start), lat, out


def one_rep(args: argparse.Namespace, rep: int) -> dict[str, Any]:
    seed = args.seed + rep
    with bench_dir(args.dir, "search") as d:
        db = Database.open(d / "db", durability="none")
        t = time.perf_counter()
        vocab, weights, vecs = load(db, args.docs, args.dim, seed)
        ingest_s = time.perf_counter() - t
        db.close()  # reopen: the first search rebuilds the indexes, as after a restart
        db = Database.open(d / "db", durability="none")
        coll = db.collection("docs")
        t = time.perf_counter()
        state_for(coll)
        build_s = time.perf_counter() - t
        rng = random.Random(seed + 1)
        queries = [" ".join(rng.choices(vocab, weights, k=rng.randint(1, 3)))
                   for _ in range(args.queries)]
        text_qps, text_lat, _ = timed(lambda q: coll.search(q, limit=10), queries)
        coll.search(queries[0], limit=10, fuzzy=True)  # untimed: builds the fuzzy index
        fuzzy_qps, fuzzy_lat, _ = timed(lambda q: coll.search(q, limit=10, fuzzy=True),
                                        queries[: max(1, args.queries // 10)])
        qv = np.random.default_rng(seed + 2).standard_normal((args.queries, args.dim))
        qv = qv.astype(np.float32)
        flat = FlatIndex("cosine", args.dim)
        for i, v in enumerate(vecs):
            flat.add(f"d{i:07d}", v)
        flat_qps, flat_lat, truth = timed(lambda v: {r for r, _ in flat.search(v, 10)}, list(qv))
        sweep = []
        for ef in EF_SWEEP:
            qps, lat, got = timed(lambda v, ef=ef: {r["record"]["id"] for r in coll.search(
                "", vector=v.tolist(), vector_field="emb", vector_k=10, ef_search=ef,
                select_fields=["tag"])["results"]}, list(qv))
            recall = sum(len(a & b) for a, b in zip(truth, got, strict=True)) / (10 * len(qv))
            sweep.append({"ef_search": ef, "recall_at_10": recall, "qps": qps,
                          "latency": latency_summary(lat)})
        db.close()
    best = next((s for s in sweep if s["recall_at_10"] >= TARGET_RECALL), None)
    return {"rep": rep, "docs": args.docs, "dim": args.dim, "ingest_s": ingest_s,
            "index_build_s": build_s,
            "text": {"qps": text_qps, "latency": latency_summary(text_lat)},
            "text_fuzzy": {"qps": fuzzy_qps, "latency": latency_summary(fuzzy_lat)},
            "vector_flat": {"qps": flat_qps, "latency": latency_summary(flat_lat)},
            "vector_hnsw_sweep": sweep, "vector_hnsw_at_target": best}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "search-raw"))
    args = p.parse_args(argv)
    env = environment(args.dir, ["hnswlib"])
    env["mode"] = "embedded, one thread issuing queries, closed loop"
    reps = [one_rep(args, r) for r in range(args.reps)]
    summary = {
        "text_qps": spread([r["text"]["qps"] for r in reps]),
        "vector_flat_qps": spread([r["vector_flat"]["qps"] for r in reps]),
        "vector_hnsw_qps_at_recall_0.95": spread(
            [r["vector_hnsw_at_target"]["qps"] if r["vector_hnsw_at_target"] else None
             for r in reps]),
    }
    run_id = utc_now().replace(":", "").replace("-", "")
    result = {"run_id": run_id, "environment": env, "summary": summary, "reps": reps}
    out = Path(args.out)
    write_json(out / f"{run_id}.json", result)
    write_json(out / "latest.json", result)
    for r in reps:
        best = r["vector_hnsw_at_target"]
        print(f"rep {r['rep']}: docs {r['docs']} ingest {r['ingest_s']:.1f}s build "
              f"{r['index_build_s']:.1f}s | text {r['text']['qps']:.0f} q/s | flat "
              f"{r['vector_flat']['qps']:.0f} q/s | hnsw "
              + (f"{best['qps']:.0f} q/s at ef {best['ef_search']} (recall "
                 f"{best['recall_at_10']:.3f})" if best else "never reached recall 0.95"))
    print(f"wrote {out / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
