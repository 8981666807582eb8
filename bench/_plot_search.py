"""The search benchmark's chart and table, from a raw result only.

    python bench/search.py plot                          # docs/benchmarks/search/latest.json
    python bench/search.py plot RESULT.json [MORE.json ...] --out DIR

Several raw files (e.g. one run per data kind) make one table and one chart, a row per
data kind of each run, each row naming its run: ratios are only ever taken within a run.

Writes ``results.md`` (per data kind: ingest, text, vector, exact, hybrid and server
figures with tuffdb's ratios to the peers) and ``search.png`` beside the result, or in
``--out``.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, T201, E501
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    kinds = result["kinds"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = [
        ("ingest docs/s", [("tuffdb", lambda k: k["ingest"]["tuffdb_docs_per_s"]),
                           ("SQLite FTS5", lambda k: k["ingest"]["fts5_docs_per_s"]),
                           ("Tantivy", lambda k: k["ingest"]["tantivy_docs_per_s"])]),
        ("text q/s (top 10)", [(n, lambda k, n=n: k["text"][n]["qps"]["median"])
                               for n in ("tuffdb", "fts5", "tantivy")]),
        ("vector q/s (recall@10 >= 0.95)", [
            ("tuffdb", lambda k: k["vector"]["tuffdb_default"]["qps"]["median"]),
            ("hnswlib", lambda k: (k["vector"]["hnswlib"]["at_target"] or {"qps": {"median": 0}})["qps"]["median"]),
            ("FAISS HNSW", lambda k: (k["vector"]["faiss_hnsw"]["at_target"] or {"qps": {"median": 0}})["qps"]["median"]),
            ("tuffdb exact", lambda k: k["vector"]["tuffdb_exact"]["qps"]["median"]),
            ("FAISS flat", lambda k: k["vector"]["faiss_flat"]["qps"]["median"])]),
    ]
    for ax, (title, series) in zip(axes, panels, strict=True):
        width = 0.8 / len(series)
        for j, (name, get) in enumerate(series):
            ax.bar([i + j * width for i in range(len(kinds))], [get(k) for k in kinds], width,
                   label=name)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(kinds))])
        ax.set_xticklabels([f"{k['data']} {k['docs']:,}" for k in kinds])
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.suptitle("bench/search.py " + ", ".join(r["run_id"] for r in result["runs"])
                 + " (median of interleaved passes; ratios within a run)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _q(cell: dict[str, Any]) -> str:
    """q/s as ``median [min-max]`` over the passes; ``N=`` when a pass was capped short."""
    q = cell["qps"]
    capped = f" N={cell['queries']}" if cell.get("queries", 1000) < 1000 else ""
    return f"{q['median']:,.0f} [{q['min']:,.0f}-{q['max']:,.0f}]{capped}"


def markdown(result: dict[str, Any]) -> str:
    rows = ["| run | data | docs | ingest docs/s: tuffdb / FTS5 / Tantivy (tuffdb/FTS5) "
            "| tuffdb graph ready s | text q/s: tuffdb / FTS5 / Tantivy (tuffdb/FTS5) "
            "| vector q/s at recall@10 >= 0.95: tuffdb default (recall, method) / tuffdb index "
            "alone / best bare HNSW (default/bare) | exact q/s: tuffdb / best bare flat "
            "(ratio) | hybrid q/s | server text / vector q/s |", "|---" * 10 + "|"]
    for k in result["kinds"]:
        ing, txt, vec = k["ingest"], k["text"], k["vector"]
        bares = [vec[p]["at_target"] for p in ("hnswlib", "faiss_hnsw") if vec[p]["at_target"]]
        bare = max(bares, key=lambda c: c["qps"]["median"], default=None)
        flat = max((vec["numpy_flat"], vec["faiss_flat"]), key=lambda c: c["qps"]["median"])
        ratio = vec["ratio_default_over_best_bare_at_target"]
        srv = k.get("server")
        default = vec["tuffdb_default"]
        rows.append(
            f"| {k['run_id']} | {k['data']} | {k['docs']:,} | {ing['tuffdb_docs_per_s']:,.0f} / "
            f"{ing['fts5_docs_per_s']:,.0f} / {ing['tantivy_docs_per_s']:,.0f} "
            f"({ing['ratio_tuffdb_over_fts5']:.2f}x) | {ing['tuffdb_graph_ready_s']:.0f} | "
            f"{_q(txt['tuffdb'])} / {_q(txt['fts5'])} / {_q(txt['tantivy'])} "
            f"({txt['ratio_tuffdb_over_fts5']:.1f}x) | "
            f"{_q(default)} ({default['recall']:.3f}, {'/'.join(default['methods'])}) / "
            f"{_q(vec['tuffdb_index_only'])} / "
            f"{'-' if bare is None else _q(bare) + ' ef ' + str(bare['ef'])} "
            f"({'-' if ratio is None else f'{ratio:.2f}x'}) | "
            f"{_q(vec['tuffdb_exact'])} / {_q(flat)} "
            f"({vec['ratio_exact_over_best_bare_flat']:.2f}x) | "
            f"{_q(k['hybrid']['tuffdb'])} | "
            + (f"{_q(srv['text'])} / {_q(srv['vector'])} |" if srv else "- |"))
    runs = "\n".join(f"- `{r['run_id']}.json`: `{r['environment'].get('command', '')}` "
                     f"(commit {r['environment'].get('git', {}).get('commit', '?')[:10]})"
                     for r in result["runs"])
    return ("# bench/search.py results\n\n" + "\n".join(rows) + "\n\nRuns:\n\n" + runs
            + "\n\n[min-max] over the interleaved passes; N= queries when a pass hit the time "
            "cap.\n")


def draw(results: list[dict[str, Any]], out: Path) -> None:
    """``results.md`` and ``search.png`` in ``out`` from one or more raw results."""
    result = {"runs": results,
              "kinds": [{**k, "run_id": r["run_id"]} for r in results for k in r["kinds"]]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(result))
    plot(result, out / "search.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("results", nargs="*",
                   default=[str(REPO / "docs" / "benchmarks" / "search" / "latest.json")])
    p.add_argument("--out", help="output directory (default: the first result's own)")
    args = p.parse_args(argv)
    paths = [Path(r) for r in args.results]
    out = Path(args.out) if args.out else paths[0].parent
    draw([json.loads(r.read_text()) for r in paths], out)
    print(f"wrote {out / 'results.md'} and {out / 'search.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
