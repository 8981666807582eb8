"""The search benchmark's results table, from a raw result only.

    python bench/search.py plot                          # docs/benchmarks/search/latest.json
    python bench/search.py plot RESULT.json --out DIR

Writes ``results.md`` (text/vector queries/s per repetition and the hnsw recall sweep)
beside the result, or in ``--out``.
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


def search_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Search benchmark ({result['run_id']})",
        "",
        "| rep | docs | ingest s | index build s | text q/s | fuzzy q/s | flat q/s | hnsw q/s at recall >= 0.95 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["reps"]:
        best = r["vector_hnsw_at_target"]
        hnsw = (
            f"{best['qps']:,.0f} (ef {best['ef_search']}, recall {best['recall_at_10']:.3f})"
            if best
            else "not reached"
        )
        lines.append(
            f"| {r['rep']} | {r['docs']:,} | {r['ingest_s']:.1f} | {r['index_build_s']:.1f} | "
            f"{r['text']['qps']:,.0f} | {r['text_fuzzy']['qps']:,.0f} | {r['vector_flat']['qps']:,.0f} | {hnsw} |"
        )
    lines += [
        "",
        "hnsw sweep (last rep): "
        + ", ".join(
            f"ef {s['ef_search']}: {s['recall_at_10']:.3f} @ {s['qps']:,.0f} q/s"
            for s in result["reps"][-1]["vector_hnsw_sweep"]
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("result", nargs="?",
                   default=str(REPO / "docs" / "benchmarks" / "search" / "latest.json"))
    p.add_argument("--out", help="output directory (default: the result's own)")
    args = p.parse_args(argv)
    result_path = Path(args.result)
    out = Path(args.out) if args.out else result_path.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(search_markdown(json.loads(result_path.read_text())))
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
