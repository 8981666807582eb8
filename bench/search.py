"""Search benchmark (issue 32): tuffdb side by side with SQLite FTS5, Tantivy, hnswlib, FAISS.

    python bench/search.py                          # 100,000 documents, random and clustered
    python bench/search.py --docs 1000000 --data clustered
    python bench/search.py --docs 2000 --queries 50 --no-server   # smoke (seconds)

One process, one thread issuing queries (closed loop), every system on the same corpus and
the same queries, in one run. Per data kind (``--data``), on a fresh data directory:

1. **Corpus**: ``--docs`` records ``{"title", "body", "tag", "emb"}``: title 4 and body 40
   words drawn from a Zipf(1.1) vocabulary of 20,000 pseudo-words; ``emb`` a ``--dim``-d
   vector, ``random`` (i.i.d. N(0, 1): the hard case) or ``clustered`` (1,000 Gaussian
   centroids + N(0, 0.5^2) noise). Queries: 2-3 vocabulary words (weighted like the
   corpus) and vectors of the same kind.
2. **Ingest** (batches of 1,000, a durable commit per batch): tuffdb ``insert_many``
   (``durability="always"``; schema: hnsw cosine index on ``emb``, defaults; the text index
   on every string field), SQLite FTS5 (WAL, ``synchronous=FULL``, one transaction per
   batch), Tantivy (``commit()`` per batch). tuffdb's records are searchable at commit;
   its graph is built behind by the builder thread: ``graph_ready_s`` is the time from the
   first insert until the graph holds every vector and is calibrated. hnswlib and FAISS
   (HNSW, M 16, ef_construction 200, two threads) build from the whole array at once.
3. **Text**: top 10 for every query, OR of the terms: tuffdb ``search(q, limit=10)``
   (BM25), FTS5 ``MATCH 'a OR b' ORDER BY rank LIMIT 10`` (bm25()), Tantivy
   ``parse_query`` on title and body, ``search(limit=10)``.
4. **Vector** (cosine, k 10): exact top 10 is the ground truth. tuffdb by default (recall
   target 0.95; the engine's chosen method is recorded), tuffdb exact
   (``vector_recall=1.0``), hnswlib and FAISS HNSW at the smallest ef of a sweep with
   recall@10 >= 0.95, FAISS flat and a bare numpy scan (``einsum``, as tuffdb's flat).
5. **Hybrid**: tuffdb ``search(q, vector=v)``; and the server path: ``tuffdb serve`` on
   the same data, ``POST /api/search/docs`` for text and vector queries (one connection).

Query figures: ``--reps`` timed passes over the queries, the median pass reported (q/s
with min and max); latency percentiles from the median pass (suppressed under 1,000
samples). Output in ``docs/benchmarks/search/`` (``--out``): the raw ``<run-id>.json`` and
``latest.json``, and drawn from the raw file alone, ``results.md`` and ``search.png``
(``python bench/search.py plot [RAW.json]`` draws them again). ``--profile DIR`` adds an
untimed, profiled pass of tuffdb's text and vector queries and profiles the ingest (whose
figure then includes the profiler's overhead: profile in a separate run).
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, T201, S311, S603, PLR0913, PLR0917, PLR0915, C901
from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import random
import socket
import sqlite3
import subprocess
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
from _plot_search import draw

sys.path.insert(0, str(REPO / "src"))
from tuffdb.documents import Database, Vector

VOCAB_SIZE = 20_000
BATCH = 1000
CENTROIDS = 1000
CLUSTER_NOISE = 0.5
TARGET = 0.95
EF_SWEEP = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
DATA_KINDS = ("random", "clustered")


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def vectors(kind: str, n: int, q: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return (rng.standard_normal((n, dim)).astype(np.float32),
                rng.standard_normal((q, dim)).astype(np.float32))
    centroids = rng.standard_normal((CENTROIDS, dim))
    docs = centroids[rng.integers(0, CENTROIDS, n)] + CLUSTER_NOISE * rng.standard_normal((n, dim))
    qs = centroids[rng.integers(0, CENTROIDS, q)] + CLUSTER_NOISE * rng.standard_normal((q, dim))
    return docs.astype(np.float32), qs.astype(np.float32)


def timed(fn: Any, items: list[Any], reps: int, cap: float | None = None) -> dict[str, Any]:
    """``reps`` passes over ``items``; see :func:`interleaved`."""
    return interleaved({"x": fn}, items, reps, cap)["x"]


def interleaved(fns: dict[str, Any], items: list[Any], reps: int,
                cap: float | None = None) -> dict[str, dict[str, Any]]:
    """``reps`` rounds, each one pass per system in turn (so a busy moment on the shared
    host hits every system alike); per system the median pass's q/s (with min and max),
    its latencies and outputs. ``cap``: a pass stops after that many seconds (slow peers);
    only the queries it ran count."""
    passes: dict[str, list[tuple[float, list[int], list[Any]]]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            lat, out = [], []
            start = time.perf_counter()
            for item in items:
                t = time.perf_counter_ns()
                out.append(fn(item))
                lat.append(time.perf_counter_ns() - t)
                if cap is not None and time.perf_counter() - start > cap:
                    break
            passes[name].append((len(out) / (time.perf_counter() - start), lat, out))
    result = {}
    for name, ps in passes.items():
        median = sorted(ps, key=lambda p: p[0])[len(ps) // 2]
        result[name] = {"qps": spread([p[0] for p in ps]), "queries": len(median[2]),
                        "latency": latency_summary(median[1]), "out": median[2]}
    return result


def recall(truth: list[set[Any]], got: list[Any]) -> float:
    return sum(len(a & set(b)) for a, b in zip(truth, got, strict=True)) / (10 * len(truth))


def strip(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k != "out"}


def ingest_tuffdb(path: Path, docs: list[dict[str, Any]], vecs: np.ndarray) -> dict[str, Any]:
    db = Database.open(path, durability="always")
    spec = {"type": "vector", "algorithm": "hnsw", "metric": "cosine"}
    db.create_collection("docs", {"fields": {"emb": {"field_type": "Vector", "index": spec}}})
    coll = db.collection("docs")
    coll.search("warm", limit=1)  # the search state exists, so every commit also indexes
    spent, start = 0.0, time.perf_counter()
    for lo in range(0, len(docs), BATCH):
        batch = [{**d, "emb": Vector(vecs[i].tolist())}
                 for i, d in enumerate(docs[lo:lo + BATCH], start=lo)]
        t = time.perf_counter()
        coll.insert_many(batch)
        spent += time.perf_counter() - t
    stats = coll.search_stats(settle=7200)
    ready = time.perf_counter() - start
    from tuffdb.documents.search_index import state_for  # noqa: PLC0415 - the engine itself

    engine = state_for(coll).vectors["emb", "cosine"].index
    return {"db": db, "coll": coll, "engine": engine, "ingest_docs_per_s": len(docs) / spent,
            "ingest_s": spent,
            "graph_ready_s": ready, "stats": stats}


def ingest_fts5(path: Path, docs: list[dict[str, Any]]) -> tuple[sqlite3.Connection, float]:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, title, body)")
    t = time.perf_counter()
    for lo in range(0, len(docs), BATCH):
        with con:
            con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                            [(d["id"], d["title"], d["body"]) for d in docs[lo:lo + BATCH]])
    return con, len(docs) / (time.perf_counter() - t)


def ingest_tantivy(path: Path, docs: list[dict[str, Any]]) -> tuple[Any, float]:
    import tantivy  # noqa: PLC0415 - a peer, only here

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("title")
    sb.add_text_field("body")
    path.mkdir()
    index = tantivy.Index(sb.build(), path=str(path))
    writer = index.writer(heap_size=128_000_000, num_threads=2)
    t = time.perf_counter()
    for lo in range(0, len(docs), BATCH):
        for d in docs[lo:lo + BATCH]:
            writer.add_document(tantivy.Document(id=d["id"], title=d["title"], body=d["body"]))
        writer.commit()
    rate = len(docs) / (time.perf_counter() - t)
    writer.wait_merging_threads()
    index.reload()
    return index, rate


def ef_at_target(search: Any, queries: np.ndarray, truth: list[set[int]],
                 set_ef: Any) -> dict[str, Any]:
    """The smallest ef of EF_SWEEP with recall@10 >= TARGET (one pass per ef), left set."""
    sweep = []
    for ef in EF_SWEEP:
        set_ef(ef)
        r = timed(search, list(queries), 1)
        sweep.append({"ef": ef, "recall": recall(truth, r["out"]), "qps": r["qps"]["median"]})
        if sweep[-1]["recall"] >= TARGET:
            return {"ef": ef, "sweep": sweep}
    return {"ef": None, "sweep": sweep}


@contextlib.contextmanager
def server(data_dir: Path) -> Any:
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cmd = [sys.executable, "-m", "tuffdb", "serve", "--data-dir", str(data_dir), "--http-port",
           str(ports[0]), "--admin-port", str(ports[1]), "--resp-port", "0", "--grpc-port", "0",
           "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    data_dir.mkdir(parents=True)
    log = (data_dir.parent / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError("tuffdb serve exited; see serve.log")
            with contextlib.suppress(OSError):
                c = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=600)
                c.request("GET", "/api/health")
                c.getresponse().read()
                break
            if time.monotonic() > deadline:
                raise RuntimeError("tuffdb serve did not answer within 120 s")
            time.sleep(0.2)
        key = (data_dir / "ekodb_admin_key").read_text().strip()
        c.request("POST", "/api/auth/token", json.dumps({"api_key": key}),
                  {"Content-Type": "application/json"})
        token = json.loads(c.getresponse().read())["token"]
        yield c, token
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def call(c: http.client.HTTPConnection, token: str, method: str, path: str,
         body: dict[str, Any]) -> Any:
    c.request(method, path, json.dumps(body),
              {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    reply = c.getresponse()
    data = reply.read()
    if reply.status != 200:
        raise RuntimeError(f"{method} {path}: {reply.status} {data[:200]!r}")
    return json.loads(data)


def post(c: http.client.HTTPConnection, token: str, body: dict[str, Any]) -> list[str]:
    out = call(c, token, "POST", "/api/search/docs", body)
    return [r["record"]["id"]["value"] if isinstance(r["record"]["id"], dict)
            else r["record"]["id"] for r in out["results"]]


@contextlib.contextmanager
def profiled(args: argparse.Namespace, name: str) -> Any:
    """pyinstrument around the block when ``--profile DIR`` is given (text report)."""
    if not args.profile:
        yield
        return
    from pyinstrument import Profiler  # noqa: PLC0415 - only when asked

    p = Profiler(interval=0.0005)
    p.start()
    try:
        yield
    finally:
        p.stop()
        out = Path(args.profile)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.txt").write_text(p.output_text(unicode=False, show_all=False))


def one_kind(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    import faiss  # noqa: PLC0415 - peers, only here
    import hnswlib  # type: ignore[import-untyped]  # noqa: PLC0415
    import tantivy  # noqa: PLC0415

    faiss.omp_set_num_threads(1)
    rng = random.Random(args.seed)
    vocab = vocabulary(rng)
    cum = list(itertools.accumulate(1.0 / (i + 1) ** 1.1 for i in range(len(vocab))))
    docs = []
    for i in range(args.docs):
        w = rng.choices(vocab, cum_weights=cum, k=44)
        docs.append({"id": f"d{i:07d}", "title": " ".join(w[:4]), "body": " ".join(w[4:]),
                     "tag": f"t{i % 10}"})
    texts = [" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(2, 3)))
             for _ in range(args.queries)]
    vecs, qv = vectors(kind, args.docs, args.queries, args.dim, args.seed)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    qunit = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    truth = [set(np.argpartition(-(unit @ q), 10)[:10].tolist()) for q in qunit]
    out: dict[str, Any] = {"data": kind, "docs": args.docs, "dim": args.dim}
    reps = args.reps
    with bench_dir(args.dir, "search") as d:
        # ---- ingest
        with profiled(args, f"{kind}-{args.docs}-ingest"):
            tf = ingest_tuffdb(d / "data" / "documents", docs, vecs)
        coll = tf["coll"]
        con, fts_rate = ingest_fts5(d / "fts.db", docs)
        tindex, tan_rate = ingest_tantivy(d / "tantivy", docs)
        t = time.perf_counter()
        h = hnswlib.Index(space="cosine", dim=args.dim)
        h.init_index(max_elements=args.docs, M=16, ef_construction=200, random_seed=42)
        h.add_items(vecs, np.arange(args.docs), num_threads=2)
        hnsw_build = time.perf_counter() - t
        faiss.omp_set_num_threads(2)
        t = time.perf_counter()
        fh = faiss.IndexHNSWFlat(args.dim, 16, faiss.METRIC_INNER_PRODUCT)
        fh.hnsw.efConstruction = 200
        fh.add(unit)
        faiss_build = time.perf_counter() - t
        faiss.omp_set_num_threads(1)
        out["ingest"] = {
            "tuffdb_docs_per_s": tf["ingest_docs_per_s"], "tuffdb_graph_ready_s": tf["graph_ready_s"],
            "fts5_docs_per_s": fts_rate, "tantivy_docs_per_s": tan_rate,
            "hnswlib_build_s": hnsw_build, "faiss_hnsw_build_s": faiss_build,
            "ratio_tuffdb_over_fts5": tf["ingest_docs_per_s"] / fts_rate}
        out["tuffdb_stats"] = tf["stats"]
        print(f"{kind}: ingest tuffdb {tf['ingest_docs_per_s']:.0f}/s (graph ready "
              f"{tf['graph_ready_s']:.0f}s) fts5 {fts_rate:.0f}/s tantivy {tan_rate:.0f}/s",
              flush=True)
        # ---- text
        searcher = tindex.searcher()
        text = interleaved({
            "tuffdb": lambda q: [r["record"]["id"] for r in coll.search(q, limit=10)["results"]],
            "fts5": lambda q: [r[0] for r in con.execute(
                "SELECT id FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10",
                (" OR ".join(q.split()),))],
            "tantivy": lambda q: [searcher.doc(a)["id"][0] for _, a in searcher.search(
                tindex.parse_query(q, ["title", "body"]), 10).hits],
        }, texts, reps, cap=args.pass_cap)
        out["text"] = {k: strip(v) for k, v in text.items()}
        out["text"]["ratio_tuffdb_over_fts5"] = (text["tuffdb"]["qps"]["median"]
                                                 / text["fts5"]["qps"]["median"])
        shared = len(text["fts5"]["out"])
        out["text"]["top10_overlap_tuffdb_fts5"] = recall(
            [set(a) for a in text["fts5"]["out"]], text["tuffdb"]["out"][:shared])
        print(f"  text q/s tuffdb {text['tuffdb']['qps']['median']:.0f} fts5 "
              f"{text['fts5']['qps']['median']:.0f} tantivy {text['tantivy']['qps']['median']:.0f}",
              flush=True)
        # ---- vector
        ids = lambda res: [int(r["record"]["id"][1:]) for r in res["results"]]  # noqa: E731
        plans: dict[float | None, list[str]] = {None: [], 1.0: []}  # by vector_recall

        def ours(v: np.ndarray, vector_recall: float | None = None) -> list[int]:
            res = coll.search("", vector=v.tolist(), vector_field="emb", vector_k=10,
                              select_fields=["tag"], explain=True, vector_recall=vector_recall)
            plans[vector_recall].append(res["explain"]["vector"]["method"])
            return ids(res)

        engine = tf["engine"]
        ff = faiss.IndexFlatIP(args.dim)
        ff.add(unit)
        bare = {
            "hnswlib": (lambda v: h.knn_query(v, k=10, num_threads=1)[0][0].tolist(), h.set_ef),
            "faiss_hnsw": (lambda v: fh.search(v[None, :] / np.linalg.norm(v), 10)[1][0].tolist(),
                           lambda ef: setattr(fh.hnsw, "efSearch", ef)),
        }
        sweeps = {name: ef_at_target(fn, qv, truth, set_ef) for name, (fn, set_ef) in bare.items()}
        runs = interleaved({
            "tuffdb_default": ours,
            "tuffdb_exact": lambda v: ours(v, vector_recall=1.0),
            "tuffdb_index_only": lambda v: [int(r[1:]) for r, _ in engine.search(v, 10)],
            "numpy_flat": lambda v: np.argpartition(
                -np.einsum("ij,j->i", unit, v / np.linalg.norm(v)), 10)[:10].tolist(),
            "faiss_flat": lambda v: ff.search(v[None, :] / np.linalg.norm(v), 10)[1][0].tolist(),
            **{name: bare[name][0] for name, sw in sweeps.items() if sw["ef"] is not None},
        }, list(qv), reps)
        vec: dict[str, Any] = {name: {**strip(r), "recall": recall(truth, r["out"])}
                               for name, r in runs.items()}
        for name, sw in sweeps.items():
            vec[name] = {"at_target": vec.get(name) and {**vec[name], "ef": sw["ef"]},
                         "sweep": sw["sweep"]}
        vec["tuffdb_default"]["methods"] = sorted(set(plans[None]))
        vec["tuffdb_exact"]["methods"] = sorted(set(plans[1.0]))
        with profiled(args, f"{kind}-{args.docs}-vector"):
            timed(ours, list(qv), 1)
        with profiled(args, f"{kind}-{args.docs}-text"):
            timed(lambda q: coll.search(q, limit=10), texts, 1)
        vec["tuffdb_default"]["plan"] = coll.search(
            "", vector=qv[0].tolist(), vector_field="emb", explain=True)["explain"]["vector"]
        best_bare = max((vec[p]["at_target"]["qps"]["median"] for p in ("hnswlib", "faiss_hnsw")
                         if vec[p]["at_target"]), default=None)
        flat_bare = max(vec["numpy_flat"]["qps"]["median"], vec["faiss_flat"]["qps"]["median"])
        vec["ratio_default_over_best_bare_at_target"] = (
            vec["tuffdb_default"]["qps"]["median"] / best_bare if best_bare else None)
        vec["ratio_index_only_over_best_bare_at_target"] = (
            vec["tuffdb_index_only"]["qps"]["median"] / best_bare if best_bare else None)
        vec["ratio_exact_over_best_bare_flat"] = vec["tuffdb_exact"]["qps"]["median"] / flat_bare
        out["vector"] = vec
        print(f"  vector q/s tuffdb default {vec['tuffdb_default']['qps']['median']:.0f} "
              f"(recall {vec['tuffdb_default']['recall']:.3f}, {vec['tuffdb_default']['methods']})"
              f" exact {vec['tuffdb_exact']['qps']['median']:.0f} numpy {flat_bare:.0f} hnswlib "
              f"{vec['hnswlib']['at_target'] and vec['hnswlib']['at_target']['qps']['median']}",
              flush=True)
        # ---- hybrid
        pairs = list(zip(texts, qv, strict=True))
        out["hybrid"] = {"tuffdb": strip(timed(lambda p: coll.search(
            p[0], vector=p[1].tolist(), vector_field="emb", vector_k=10, limit=10,
            select_fields=["tag"]), pairs, reps))}
        tf["db"].close()
        con.close()
        # ---- server path: tuffdb serve on a fresh directory, loaded over HTTP
        if args.server:
            with server(d / "served") as (c, token):
                call(c, token, "POST", "/api/collections/docs", {"fields": {"emb": {
                    "field_type": "Vector", "index": {"type": "vector", "algorithm": "hnsw",
                                                      "metric": "cosine"}}}})
                post(c, token, {"query": "warm", "limit": 1})  # the search state is live
                for lo in range(0, len(docs), BATCH):
                    call(c, token, "POST", "/api/batch/insert/docs", {"inserts": [
                        {**doc, "emb": vecs[i].tolist()}
                        for i, doc in enumerate(docs[lo:lo + BATCH], start=lo)]})
                wait = {"query": "", "vector": qv[0].tolist(), "vector_field": "emb",
                        "explain": True}
                deadline = time.monotonic() + 7200
                while time.monotonic() < deadline:  # until the graph is built and calibrated
                    plan = call(c, token, "POST", "/api/search/docs", wait)["explain"]["vector"]
                    if plan["pending"] == 0 and "not calibrated" not in plan["reason"]:
                        break
                    time.sleep(1)
                st = timed(lambda q: post(c, token, {"query": q, "limit": 10}), texts, reps)
                sv = timed(lambda v: post(c, token, {"query": "", "vector": v.tolist(),
                                                     "vector_field": "emb", "vector_k": 10}),
                           list(qv), reps)
            out["server"] = {"text": strip(st), "vector": {**strip(sv), "recall": recall(
                truth, [[int(i[1:]) for i in got] for got in sv["out"]])}}
    return out


# python bench/search.py plot [RESULT.json]: the chart and table again, from the raw file.
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
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--no-server", dest="server", action="store_false")
    p.add_argument("--pass-cap", type=float, default=60.0,
                   help="seconds after which a text pass stops (FTS5's OR queries are slow)")
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "search"))
    p.add_argument("--profile", help="write pyinstrument reports of tuffdb's ingest, text and "
                   "vector passes (an extra, untimed pass each) to this directory")
    args = p.parse_args(argv)
    env = environment(args.dir, ["chroma-hnswlib", "hnswlib", "faiss-cpu", "tantivy"])
    env["sqlite"] = sqlite3.sqlite_version
    env["mode"] = "one process, one thread issuing queries, closed loop"
    kinds = DATA_KINDS if args.data == "both" else (args.data,)
    result = {"run_id": utc_now().replace(":", "").replace("-", ""), "environment": env,
              "settings": {"batch": BATCH, "target_recall": TARGET, "ef_sweep": EF_SWEEP,
                           "centroids": CENTROIDS, "cluster_noise": CLUSTER_NOISE, **vars(args)},
              "kinds": [one_kind(args, kind) for kind in kinds]}
    out = Path(args.out)
    paths = [(args.dir, "<dir>"), (args.out, "<out>")]
    write_json(out / f"{result['run_id']}.json", result, paths)
    write_json(out / "latest.json", result, paths)
    draw([json.loads((out / "latest.json").read_text())], out)  # as written: paths replaced
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
