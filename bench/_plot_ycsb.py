"""Redraw the YCSB benchmark tables and charts from raw results only.

    python bench/ycsb.py plot RESULT.json                       # beside the result
    python bench/ycsb.py plot RESULT.json --out DIR             # elsewhere

YCSB: one table per durability tier (tiers never share a table or a panel), a row per
workload and thread count, a column per store with the median ops/s over repetitions
(min-max beside it) and tuffdb-http's ratio to the tier's peer (PostgreSQL for durable,
Redis for cache: the ratio of the medians, and for an ``--interleave`` run each
repetition's own ratio beside it); p50/p99 of the median repetition when N >= 1000, with N; errors in bold.
Under each table: the generator ceilings (trivial request at the most threads, and
redis-benchmark PING), the generators' own core use there and their highest core use in
any workload cell (a generator near 100 % of its pinned core would be the bottleneck).
Writes ``ycsb-results.md`` and ``ycsb.png``.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, T201, E501, ISC004
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PEER = {"durable": "postgres", "cache": "redis"}


def _cells(result: dict[str, Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in result["cells"]:
        for wl, res in c["workloads"].items():
            out.setdefault((c["tier"], c["store"], wl), []).append(
                {**res, "rep": c["rep"], "interleaved": bool(c.get("interleaved"))}
            )
    return out


def _paired(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str:
    """Interleaved runs (bench/ycsb.py --interleave): each repetition's own ratio, its
    two cells measured seconds apart."""
    if not all(r["interleaved"] for r in ours + theirs):
        return ""
    peer = {r["rep"]: r["ops_per_s"] for r in theirs}
    pairs = [r["ops_per_s"] / peer[r["rep"]] for r in ours if peer.get(r["rep"])]
    return " (per rep: " + ", ".join(f"{x:.2f}" for x in pairs) + ")" if pairs else ""


def _median_rep(reps: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(reps, key=lambda r: r["ops_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def ycsb_markdown(result: dict[str, Any]) -> str:
    cells = _cells(result)
    tiers = sorted({t for t, _, _ in cells}, key=lambda t: t != "durable")
    lines = [
        f"# YCSB results ({result['run_id']})",
        "",
        f"{result['records']:,} records, {_window(result)}; "
        f"host {result['environment'].get('host')}, {result['environment'].get('cpu_model')}; "
        f"fsync probe avg {result['environment'].get('fsync_start', {}).get('avg_us', '?')} us.",
        "Closed loop: latency not corrected for coordinated omission.",
        *_generators(result),
        "",
    ]
    for tier in tiers:
        stores = sorted({s for t, s, _ in cells if t == tier})
        wls = sorted(
            {w for t, _, w in cells if t == tier}, key=lambda w: ("ABCFD".index(w[0]), int(w[2:]))
        )
        peer = PEER[tier]
        lines += [
            f"## {tier} tier",
            "",
            "| workload/threads | " + " | ".join(stores) + f" | tuffdb-http / {peer} |",
            "|---" * (len(stores) + 2) + "|",
        ]
        for wl in wls:
            row = [wl]
            med: dict[str, float] = {}
            for s in stores:
                reps = cells.get((tier, s, wl))
                if not reps:
                    row.append("-")
                    continue
                rates = [r["ops_per_s"] for r in reps]
                med[s] = statistics.median(rates)
                mid = _median_rep(reps)["latency"]
                lat = mid.get("percentiles") or {}
                extra = (
                    f" (p50 {lat['p50']:.0f} / p99 {lat['p99']:.0f} us, N {mid['n']:,})"
                    if lat
                    else f" (N {mid['n']:,})"
                )
                errors = sum(r.get("errors", 0) for r in reps)
                if errors:
                    extra += f" **{errors:,} errors**"
                row.append(f"{med[s]:,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]{extra}")
            ratio = (
                (med["tuffdb-http"] / med[peer]) if "tuffdb-http" in med and med.get(peer) else None
            )
            paired = (
                _paired(cells[(tier, "tuffdb-http", wl)], cells[(tier, peer, wl)]) if ratio else ""
            )
            row.append(f"{ratio:.2f}x{paired}" if ratio else "-")
            lines.append("| " + " | ".join(row) + " |")
        lines += _ceilings(result, tier)
        lines.append("")
    return "\n".join(lines)


def _window(result: dict[str, Any]) -> str:
    if "duration_s" not in result:  # runs before the C generators: a fixed op count
        return f"{result['ops']:,} measured ops per cell"
    text = f"{result['warmup_s']:g} s warm-up + {result['duration_s']:g} s window per cell"
    if result.get("ops_cap"):
        text += f" (at most {result['ops_cap']:,} ops)"
    return text


def _generators(result: dict[str, Any]) -> list[str]:
    gens = result["environment"].get("generators")
    if not gens:
        return []
    out = ["Load generators: " + "; ".join(f"{s}: {g}" for s, g in gens.items()) + "."]
    null = result.get("wrk_null_server_ceiling")
    if null:
        rates = [n["ops_per_s"] for n in null]
        util = [n["cpu"]["generator_core_util"] for n in null if "cpu" in n]
        out.append(
            f"HTTP generator's own ceiling (GET /api/health on a null C server, "
            f"{max(result.get('threads') or [0])} connections): "
            f"{statistics.median(rates):,.0f} ops/s [{min(rates):,.0f}-{max(rates):,.0f}]"
            + (f", generator core {statistics.median(util):.0%}" if util else "")
            + "."
        )
    return out


def _ceilings(result: dict[str, Any], tier: str) -> list[str]:
    """Per store: median generator ceiling on a trivial request at the most threads, the
    generator's own core use there, and its highest core use in any workload cell."""
    out = []
    stores = sorted({c["store"] for c in result["cells"] if c["tier"] == tier})
    for store in stores:
        cs = [c for c in result["cells"] if c["tier"] == tier and c["store"] == store]
        ceil = [c["generator_ceiling"] for c in cs if "generator_ceiling" in c]
        if not ceil:
            continue
        text = f"{store} {statistics.median(x['ops_per_s'] for x in ceil):,.0f} ops/s"
        util = [x["cpu"]["generator_core_util"] for x in ceil if "cpu" in x]
        if util:
            text += f" (generator core {statistics.median(util):.0%})"
        bench = [
            c["generator_ceiling_redis_benchmark"]["ops_per_s"]
            for c in cs
            if "generator_ceiling_redis_benchmark" in c
        ]
        if bench:
            text += f", redis-benchmark PING {statistics.median(bench):,.0f} ops/s"
        busiest = [
            w["cpu"]["generator_core_util"]
            for c in cs
            for w in c["workloads"].values()
            if "cpu" in w
        ]
        if busiest:
            text += f"; generator core at most {max(busiest):.0%} in the workload cells"
        out.append(text)
    if not out:
        return []
    return [
        "",
        "Generator ceilings (trivial request, most threads; median over reps): "
        + "; ".join(out)
        + ".",
    ]


def ycsb_plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    cells = _cells(result)
    tiers = sorted({t for t, _, _ in cells}, key=lambda t: t != "durable")
    fig, axes = plt.subplots(len(tiers), 1, figsize=(10, 4 * len(tiers)), squeeze=False)
    for ax, tier in zip(axes[:, 0], tiers, strict=True):
        stores = sorted({s for t, s, _ in cells if t == tier})
        wls = sorted(
            {w for t, _, w in cells if t == tier}, key=lambda w: ("ABCFD".index(w[0]), int(w[2:]))
        )
        width = 0.8 / max(1, len(stores))
        for i, s in enumerate(stores):
            ys = [
                statistics.median([r["ops_per_s"] for r in cells.get((tier, s, w), [])] or [0])
                for w in wls
            ]
            ax.bar([x + i * width for x in range(len(wls))], ys, width, label=s)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(wls))], wls)
        ax.set_ylabel("ops/s (median)")
        ax.set_title(f"YCSB, {tier} tier")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("result", help="a bench/ycsb.py result file (e.g. docs/benchmarks/ycsb/cache/latest.json)")
    p.add_argument("--out", help="output directory (default: the result's own)")
    args = p.parse_args(argv)
    result_path = Path(args.result)
    out = Path(args.out) if args.out else result_path.parent
    out.mkdir(parents=True, exist_ok=True)
    result = json.loads(result_path.read_text())
    (out / "ycsb-results.md").write_text(ycsb_markdown(result))
    ycsb_plot(result, out / "ycsb.png")
    print(f"wrote {out / 'ycsb-results.md'} and {out / 'ycsb.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
