"""Draw bench/backup.py's plot from its raw JSON only (``python bench/backup.py plot RUN``).

Five panels: MB/s of every copy with its min..max over repetitions (offline, and under
the write load); the writer's puts/s alone and during each backup; the server cell's
trade-off (each copy's rate against cp's, the load during it against alone); the
archive lag under YCSB A over time; tiered point-read latency (p50 and p99) against
local reads.
Percentiles are drawn only when N >= 1000 (PROTOCOL.md section 4).
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, T201, PLR0915
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MIN_N = 1000


def _bars(ax: Any, labels: list[str], spreads: list[dict[str, float]], color: str) -> None:
    med = [s["median"] for s in spreads]
    lo = [s["median"] - s["min"] for s in spreads]
    hi = [s["max"] - s["median"] for s in spreads]
    ax.barh(labels, med, xerr=[lo, hi], color=color, capsize=3)
    for y, v in enumerate(med):
        ax.text(v, y, f" {v:,.0f}", va="center", fontsize=7)


def _tier_rows(tier: dict[str, Any]) -> tuple[list[str], list[float], list[float]]:
    labels, p50, p99 = [], [], []
    for target, row in tier.items():
        if not isinstance(row, dict) or "local" not in row:
            continue
        for phase in ("local", "tiered hit", "tiered miss"):
            lat = row[phase]["latency"]
            if lat.get("percentiles") is None or lat["n"] < MIN_N:
                continue
            labels.append(f"{target}: {phase}")
            p50.append(lat["percentiles"]["p50"])
            p99.append(lat["percentiles"]["p99"])
    return labels, p50, p99


def _server(ax: Any, cell: dict[str, Any] | None) -> None:
    """The trade-off of the server cell: each contestant's copy rate (against ``cp -r`` +
    sync under the same load) and the load's writes during it (against alone), medians
    with min..max whiskers, both targets (0.8x) drawn."""
    if not cell or "spread" not in cell:
        return
    cp = cell["spread"]["cp -r + sync"]["mb_per_s"]["median"]
    for name, sp in cell["spread"].items():
        x, y = sp["mb_per_s"], sp["writes_ratio"]
        ax.errorbar(x["median"] / cp, y["median"],
                    xerr=[[(x["median"] - x["min"]) / cp], [(x["max"] - x["median"]) / cp]],
                    yerr=[[y["median"] - y["min"]], [y["max"] - y["median"]]],
                    fmt="o", capsize=2, label=f"{name}: {x['median']:,.0f} MB/s, "
                                              f"{y['median']:.3f}x writes")
    ax.axhline(0.8, color="r", lw=0.8, ls="--")
    ax.axvline(0.8, color="r", lw=0.8, ls="--")
    ax.set_xlabel("copy rate / cp -r + sync's under the same load")
    ax.set_ylabel("server's KV writes/s during / alone")
    ax.set_title("Server under YCSB A durable: copy rate vs load\n(targets 0.8x, 0.8x)",
                 fontsize=10)
    ax.legend(fontsize=7)


def main(argv: list[str]) -> int:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    if not argv:
        print("usage: python bench/backup.py plot RESULT.json", file=sys.stderr)
        return 2
    path = Path(argv[0])
    run = json.loads(path.read_text())
    if {"copies", "under_load", "ycsb_a_archive_lag", "tiered_reads"}.isdisjoint(run):
        # a run of the server cell alone (--only server): its one panel
        fig, ax = plt.subplots(figsize=(9, 6))
        _server(ax, run.get("server_under_load"))
        return _save(fig, run, path, "server cell; ")
    fig, axes = plt.subplots(2, 3, figsize=(19, 8.5))
    (ax_copy, ax_load, ax_server), (ax_lag, ax_tier, ax_none) = axes
    ax_none.axis("off")
    _server(ax_server, run.get("server_under_load"))

    copies = run.get("copies")
    loads = run.get("under_load") or {}
    if copies:
        labels = list(copies["mb_per_s"])
        spreads = [copies["mb_per_s"][k] for k in labels]
        for name, one in loads.items():
            for contestant, cell in one["spread"].items():
                labels.append(f"{contestant}, {name} load")
                spreads.append(cell["mb_per_s"])
        _bars(ax_copy, labels, spreads, "tab:blue")
        ax_copy.invert_yaxis()
        ax_copy.set_xlabel("MB/s (median; whiskers min..max)")
        gb = copies["data_bytes"] / 1e9
        ax_copy.set_title(f"Copies of a {gb:.1f} GB data directory", fontsize=10)
    if loads:
        names = list(next(iter(loads.values()))["spread"])
        width = 0.8 / len(names)
        groups = list(loads)
        for i, contestant in enumerate(names):
            ratios = [loads[g]["spread"][contestant]["puts_ratio"] for g in groups]
            _ = [ax_load.errorbar(x + i * width, r["median"], yerr=[[r["median"] - r["min"]],
                                  [r["max"] - r["median"]]], fmt="none", color="k", capsize=2)
                 for x, r in enumerate(ratios)]
            ax_load.bar([x + i * width for x in range(len(groups))],
                        [r["median"] for r in ratios], width, label=contestant)
        ax_load.axhline(0.8, color="r", lw=0.8, ls="--")
        ax_load.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))],
                           [f"{g} load" for g in groups])
        ax_load.set_ylabel("writer's puts/s during / alone")
        ax_load.set_title("The writer while a copy runs (embedded; median, min..max)",
                          fontsize=10)
        ax_load.legend(fontsize=7)
    ycsb = run.get("ycsb_a_archive_lag") or {}
    for label, row in ycsb.items():
        if not isinstance(row, dict) or "lag_s" not in row:
            continue
        s = row["lag_s"]["samples"]
        p = row["lag_s"]
        ax_lag.plot([i * 0.05 for i in range(len(s))], s, lw=0.7,
                    label=f"{label}: p99 {p['p99']:.2f} s (N={p['n']}), "
                          f"{row['ops_ratio_vs_no_archive']:.2f}x ops/s")
    if ycsb:
        ax_lag.axhline(2.0, color="r", lw=0.8, ls="--")
        ax_lag.set_xlabel("seconds into YCSB A (samples every 50 ms)")
        ax_lag.set_ylabel("archive lag, s")
        ax_lag.set_title("Archive lag under YCSB A, durable (target p99 < 2 s)", fontsize=10)
        ax_lag.legend(fontsize=7)
    tier = run.get("tiered_reads") or {}
    labels, p50, p99 = _tier_rows(tier)
    if labels:
        ys = range(len(labels))
        ax_tier.barh([y - 0.2 for y in ys], p50, 0.4, label="p50")
        ax_tier.barh([y + 0.2 for y in ys], p99, 0.4, label="p99")
        ax_tier.set_yticks(list(ys), labels, fontsize=8)
        ax_tier.invert_yaxis()
        ax_tier.set_xscale("log")
        ax_tier.set_xlabel("point read latency, us (log)")
        ax_tier.set_title("Reads of tiered segments (block cache off)", fontsize=10)
        ax_tier.legend(fontsize=8)
    elif tier:
        ax_tier.text(0.5, 0.5, "N < 1000 per phase: percentiles suppressed", ha="center",
                     transform=ax_tier.transAxes)
    return _save(fig, run, path)


def _save(fig: Any, run: dict[str, Any], path: Path, what: str = "") -> int:
    """Title the figure with the run and its build, write it beside the JSON."""
    env = run["environment"]
    fig.suptitle(f"bench/backup.py {run['run_id']} ({what}{env['tuffdb_build']}, "
                 f"{env['cpu_count']} CPUs)", fontsize=11)
    fig.tight_layout()
    out = path.with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
