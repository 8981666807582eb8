"""Search benchmark (issue 6): text queries/s and vector queries/s at recall >= 0.95.

    python bench/search.py                      # full: 100,000 documents, both data kinds, 3 reps
    python bench/search.py --data clustered --reps 1      # one data kind (one cell)
    python bench/search.py --docs 2000 --queries 50 --reps 1    # smoke test (seconds)

Embedded, one process, one thread issuing queries (closed loop; latency not corrected
for coordinated omission). Per data kind and repetition, on a fresh data directory:

1. **Load**: ``--docs`` records ``{"title", "body", "tag", "emb"}``: title 4 and body 40
   words drawn from a Zipf(1.1) vocabulary of 20,000 pseudo-words, ``emb`` a ``--dim``-d
   vector (``--data``, below). The collection's schema puts an hnsw index (``--hnsw-m``,
   ``--ef-construction``, cosine) on ``emb``. Records go in with ``insert_many`` in
   batches of 1,000; the commit listener keeps the text and hnsw indexes current, so
   every insert also indexes. Timed as ``ingest`` (only the ``insert_many`` calls; the
   documents are generated outside the timed window); ``ingest_docs_per_s``.
2. **Index build**: close and reopen; the first search builds the in-memory text and
   vector indexes from the records (the restart path: one scan, hnsw bulk-loaded with
   two threads); timed as ``index_build``.
3. **Text**: ``--queries`` queries of 1-3 vocabulary words (weighted like the corpus),
   ``limit 10``; also with ``fuzzy=True`` (a tenth of the queries). Queries/s and
   latency percentiles (percentiles need >= 1,000 samples).
4. **Vector**: exact (flat) top-10 for every query vector is the ground truth; hnsw is
   run through ``collection.search`` for each ``ef_search`` in EF_SWEEP (the sweep stops
   once recall@10 reaches STOP_RECALL) and the fastest setting with recall@10 >= 0.95
   is reported, or ``null`` when no setting reached it. The paths differ: flat is timed
   on the index alone, hnsw through ``collection.search`` (which also loads and projects
   the 10 records); at the reported ef, hnsw is also timed on the index alone
   (``index_only_qps``) for a like-for-like comparison with flat.

Vector data (``--data``; ``both`` runs ``random`` then ``clustered``, each loaded afresh):

- ``random``: every coordinate i.i.d. N(0, 1), documents and queries alike. No
  low-dimensional structure: the worst case for any graph index (the nearest neighbours
  of a query are barely nearer than the rest), so recall needs a very large ef.
- ``clustered``: CENTROIDS centroids drawn N(0, 1) in ``--dim`` dimensions; each document
  and each query is a uniformly chosen centroid plus N(0, CLUSTER_NOISE^2) noise per
  coordinate. Closer to real embeddings, which are clustered.

Output: ``docs/benchmarks/search/<run-id>.json`` and ``latest.json`` (every rep, the
environment, the command; machine paths replaced by ``<repo>``, ``<dir>``, ``~``);
``--out`` changes the directory.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, T201, S311
from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    REPO,
    bench_dir,
    environment,
    latency_summary,
    run_tool,
    spread,
    utc_now,
    write_json,
)

sys.path.insert(0, str(REPO / "src"))
from tuffdb.documents import Database, Vector
from tuffdb.documents.search_index import state_for
from tuffdb.documents.vector.flat import FlatIndex

EF_SWEEP = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
STOP_RECALL = 0.995
VOCAB_SIZE = 20_000
TARGET_RECALL = 0.95
BATCH = 1000
CENTROIDS = 1000
CLUSTER_NOISE = 0.5
DATA_KINDS = ("random", "clustered")


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def zipf_cum_weights(n: int, s: float = 1.1) -> list[float]:
    """Cumulative Zipf weights (``random.choices`` would re-add plain weights per call)."""
    return list(itertools.accumulate(1.0 / (i + 1) ** s for i in range(n)))


def vectors(kind: str, n: int, q: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` document vectors and ``q`` query vectors of the ``kind`` (module docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        docs, queries = rng.standard_normal((n, dim)), rng.standard_normal((q, dim))
    else:
        centroids = rng.standard_normal((CENTROIDS, dim))
        docs = centroids[rng.integers(0, CENTROIDS, n)]
        docs += CLUSTER_NOISE * rng.standard_normal((n, dim))
        queries = centroids[rng.integers(0, CENTROIDS, q)]
        queries += CLUSTER_NOISE * rng.standard_normal((q, dim))
    return docs.astype(np.float32), queries.astype(np.float32)


def load(  # noqa: PLR0913, PLR0917 - the run's inputs
    db: Database,
    args: argparse.Namespace,
    vecs: np.ndarray,
    vocab: list[str],
    cum: list[float],
    rng: random.Random,
) -> float:
    """Create and fill the collection; the seconds spent inside ``insert_many``."""
    db.create_collection(
        "docs",
        {
            "fields": {
                "emb": {
                    "field_type": "Vector",
                    "index": {
                        "type": "vector",
                        "algorithm": "hnsw",
                        "metric": "cosine",
                        "m": args.hnsw_m,
                        "ef_construction": args.ef_construction,
                    },
                }
            }
        },
    )
    coll = db.collection("docs")
    spent = 0.0
    for start in range(0, len(vecs), BATCH):
        batch = []
        for i in range(start, min(start + BATCH, len(vecs))):
            words = rng.choices(vocab, cum_weights=cum, k=44)
            batch.append(
                {
                    "id": f"d{i:07d}",
                    "title": " ".join(words[:4]),
                    "body": " ".join(words[4:]),
                    "tag": f"t{i % 10}",
                    "emb": Vector(vecs[i].tolist()),
                }
            )
        t = time.perf_counter()
        coll.insert_many(batch)
        spent += time.perf_counter() - t
    return spent


def timed(fn: Any, items: list[Any]) -> tuple[float, list[int], list[Any]]:
    lat, out = [], []
    start = time.perf_counter()
    for item in items:
        t = time.perf_counter_ns()
        out.append(fn(item))
        lat.append(time.perf_counter_ns() - t)
    return len(items) / (time.perf_counter() - start), lat, out


def recall(truth: list[set[str]], got: list[set[str]]) -> float:
    return sum(len(a & b) for a, b in zip(truth, got, strict=True)) / (10 * len(truth))


def one_rep(args: argparse.Namespace, kind: str, rep: int) -> dict[str, Any]:
    seed = args.seed + rep
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    cum = zipf_cum_weights(len(vocab))
    vecs, qv = vectors(kind, args.docs, args.queries, args.dim, seed)
    with bench_dir(args.dir, "search") as d:
        db = Database.open(d / "db", durability="none")
        ingest_s = load(db, args, vecs, vocab, cum, rng)
        db.close()  # reopen: the first search rebuilds the indexes, as after a restart
        db = Database.open(d / "db", durability="none")
        coll = db.collection("docs")
        t = time.perf_counter()
        state = state_for(coll)
        build_s = time.perf_counter() - t
        qrng = random.Random(seed + 1)
        queries = [
            " ".join(qrng.choices(vocab, cum_weights=cum, k=qrng.randint(1, 3)))
            for _ in range(args.queries)
        ]
        text_qps, text_lat, _ = timed(lambda q: coll.search(q, limit=10), queries)
        coll.search(queries[0], limit=10, fuzzy=True)  # untimed: builds the fuzzy index
        fuzzy_qps, fuzzy_lat, _ = timed(
            lambda q: coll.search(q, limit=10, fuzzy=True), queries[: max(1, args.queries // 10)]
        )
        flat = FlatIndex("cosine", args.dim)
        for i, v in enumerate(vecs):
            flat.add(f"d{i:07d}", v)
        flat_qps, flat_lat, truth = timed(lambda v: {r for r, _ in flat.search(v, 10)}, list(qv))
        sweep = []
        for ef in EF_SWEEP:
            qps, lat, got = timed(
                lambda v, ef=ef: {
                    r["record"]["id"]
                    for r in coll.search(
                        "",
                        vector=v.tolist(),
                        vector_field="emb",
                        vector_k=10,
                        ef_search=ef,
                        select_fields=["tag"],
                    )["results"]
                },
                list(qv),
            )
            sweep.append(
                {
                    "ef_search": ef,
                    "recall_at_10": recall(truth, got),
                    "qps": qps,
                    "latency": latency_summary(lat),
                }
            )
            if sweep[-1]["recall_at_10"] >= STOP_RECALL:
                break
        best = next((dict(s) for s in sweep if s["recall_at_10"] >= TARGET_RECALL), None)
        if best is not None:  # the same ef on the hnsw index alone, as flat is timed
            index = state.vectors["emb", "cosine"].index
            assert index is not None
            best["index_only_qps"], _, got = timed(
                lambda v: {r for r, _ in index.search(v, 10, ef_search=best["ef_search"])}, list(qv)
            )
            best["index_only_recall_at_10"] = recall(truth, got)
        db.close()
    return {
        "rep": rep,
        "data": kind,
        "docs": args.docs,
        "dim": args.dim,
        "hnsw": {"m": args.hnsw_m, "ef_construction": args.ef_construction},
        "ingest_s": ingest_s,
        "ingest_docs_per_s": args.docs / ingest_s,
        "index_build_s": build_s,
        "text": {"qps": text_qps, "latency": latency_summary(text_lat)},
        "text_fuzzy": {"qps": fuzzy_qps, "latency": latency_summary(fuzzy_lat)},
        "vector_flat": {"qps": flat_qps, "latency": latency_summary(flat_lat)},
        "vector_hnsw_sweep": sweep,
        "vector_hnsw_at_target": best,
    }


def summarise(reps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in dict.fromkeys(r["data"] for r in reps):
        rs = [r for r in reps if r["data"] == kind]
        best = [r["vector_hnsw_at_target"] for r in rs]
        out[kind] = {
            "ingest_docs_per_s": spread([r["ingest_docs_per_s"] for r in rs]),
            "index_build_s": spread([r["index_build_s"] for r in rs]),
            "text_qps": spread([r["text"]["qps"] for r in rs]),
            "text_fuzzy_qps": spread([r["text_fuzzy"]["qps"] for r in rs]),
            "vector_flat_qps": spread([r["vector_flat"]["qps"] for r in rs]),
            "vector_hnsw_qps_at_recall_0.95": spread([b["qps"] if b else None for b in best]),
            "vector_hnsw_ef_at_recall_0.95": [b["ef_search"] if b else None for b in best],
        }
    return out


# python bench/search.py plot [RESULT.json]: the results table again.
TOOLS = {"plot": "_plot_search"}


def main(argv: list[str] | None = None) -> int:
    if run_tool("search.py", sys.argv[1:] if argv is None else argv, TOOLS):
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--data", choices=[*DATA_KINDS, "both"], default="both")
    p.add_argument("--hnsw-m", type=int, default=32)
    p.add_argument("--ef-construction", type=int, default=200)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "search"))
    args = p.parse_args(argv)
    env = environment(args.dir, ["hnswlib", "chroma-hnswlib"])
    env["mode"] = "embedded, one thread issuing queries, closed loop"
    kinds = DATA_KINDS if args.data == "both" else (args.data,)
    reps = [one_rep(args, kind, r) for kind in kinds for r in range(args.reps)]
    run_id = utc_now().replace(":", "").replace("-", "")
    result = {
        "run_id": run_id,
        "environment": env,
        "settings": {
            "ef_sweep": EF_SWEEP,
            "stop_recall": STOP_RECALL,
            "target_recall": TARGET_RECALL,
            "centroids": CENTROIDS,
            "cluster_noise": CLUSTER_NOISE,
            "batch": BATCH,
            **vars(args),
        },
        "summary": summarise(reps),
        "reps": reps,
    }
    out = Path(args.out)
    paths = [(args.dir, "<dir>"), (args.out, "<out>")]
    write_json(out / f"{run_id}.json", result, paths)
    write_json(out / "latest.json", result, paths)
    for r in reps:
        best = r["vector_hnsw_at_target"]
        print(
            f"{r['data']} rep {r['rep']}: docs {r['docs']} ingest {r['ingest_s']:.1f}s "
            f"({r['ingest_docs_per_s']:.0f} docs/s) build {r['index_build_s']:.1f}s | text "
            f"{r['text']['qps']:.0f} q/s | fuzzy {r['text_fuzzy']['qps']:.0f} q/s | flat "
            f"{r['vector_flat']['qps']:.0f} q/s | hnsw m {r['hnsw']['m']} "
            + (
                f"{best['qps']:.0f} q/s at ef {best['ef_search']} (recall "
                f"{best['recall_at_10']:.3f}; index alone {best['index_only_qps']:.0f} q/s)"
                if best
                else "never reached recall 0.95"
            )
        )
        print(
            "  sweep: "
            + ", ".join(
                f"ef {s['ef_search']} {s['recall_at_10']:.3f} {s['qps']:.0f} q/s"
                for s in r["vector_hnsw_sweep"]
            )
        )
    print(f"wrote {out / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
