"""The search benchmark's chart and table, from a raw result only.

    python bench/search.py plot                          # docs/benchmarks/search/latest.json
    python bench/search.py plot RESULT.json --out DIR

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
    fig.suptitle(f"bench/search.py run {result['run_id']} (one run, median of passes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def markdown(result: dict[str, Any]) -> str:
    rows = ["| data | docs | ingest docs/s tuffdb / FTS5 / Tantivy (ratio) | graph ready s "
            "| text q/s tuffdb / FTS5 / Tantivy (ratio) | vector q/s tuffdb default (recall, "
            "method) / best bare hnsw at 0.95 (ratio) | exact q/s tuffdb / best bare flat (ratio) "
            "| hybrid q/s | server text / vector q/s |", "|---" * 9 + "|"]
    for k in result["kinds"]:
        ing, txt, vec = k["ingest"], k["text"], k["vector"]
        bare = max((vec[p]["at_target"]["qps"]["median"] for p in ("hnswlib", "faiss_hnsw")
                    if vec[p]["at_target"]), default=None)
        flat = max(vec["numpy_flat"]["qps"]["median"], vec["faiss_flat"]["qps"]["median"])
        ratio = vec["ratio_default_over_best_bare_at_target"]
        srv = k.get("server")
        rows.append(
            f"| {k['data']} | {k['docs']:,} | {ing['tuffdb_docs_per_s']:,.0f} / "
            f"{ing['fts5_docs_per_s']:,.0f} / {ing['tantivy_docs_per_s']:,.0f} "
            f"({ing['ratio_tuffdb_over_fts5']:.2f}x) | {ing['tuffdb_graph_ready_s']:.0f} | "
            f"{txt['tuffdb']['qps']['median']:,.0f} / {txt['fts5']['qps']['median']:,.0f} / "
            f"{txt['tantivy']['qps']['median']:,.0f} ({txt['ratio_tuffdb_over_fts5']:.1f}x) | "
            f"{vec['tuffdb_default']['qps']['median']:,.0f} ({vec['tuffdb_default']['recall']:.3f}, "
            f"{'/'.join(vec['tuffdb_default']['methods'])}) / "
            f"{'-' if bare is None else f'{bare:,.0f}'} "
            f"({'-' if ratio is None else f'{ratio:.2f}x'}; index alone "
            f"{vec['tuffdb_index_only']['qps']['median']:,.0f}) | "
            f"{vec['tuffdb_exact']['qps']['median']:,.0f} / {flat:,.0f} "
            f"({vec['ratio_exact_over_best_bare_flat']:.2f}x) | "
            f"{k['hybrid']['tuffdb']['qps']['median']:,.0f} | "
            + (f"{srv['text']['qps']['median']:,.0f} / {srv['vector']['qps']['median']:,.0f} |"
               if srv else "- |"))
    return (f"# bench/search.py run {result['run_id']}\n\n" + "\n".join(rows) + "\n\n"
            f"Command: `{result['environment'].get('command', '')}`; raw: "
            f"`{result['run_id']}.json`.\n")


def draw(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(result))
    plot(result, out / "search.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("result", nargs="?",
                   default=str(REPO / "docs" / "benchmarks" / "search" / "latest.json"))
    p.add_argument("--out", help="output directory (default: the result's own)")
    args = p.parse_args(argv)
    result_path = Path(args.result)
    out = Path(args.out) if args.out else result_path.parent
    draw(json.loads(result_path.read_text()), out)
    print(f"wrote {out / 'results.md'} and {out / 'search.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
