#!/usr/bin/env python3
"""Plot and tabulate bench/events.py raw results (docs/benchmarks/events/*.json).

    python bench/events.py plot docs/benchmarks/events/<run>.json

Writes ``<run>.png`` (events/s per workload, tuffdb beside UmaDB) and prints a markdown table
with events/s, p50/p99 latency (suppressed when N < 1000), errors, the store's CPU, the
load process's CPU (the load generator; for an embedded cell the store and its writers,
one process), and the tuffdb/UmaDB ratio.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def table(run: dict[str, Any]) -> str:
    res = run["results"]
    rows = ["| workload | store | events/s | p50 ms | p99 ms | N | errors | store CPU % | "
            "load process CPU % | ratio vs UmaDB |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = run.get("ratios_tuffdb_over_umadb", {})
    for key in sorted(res):
        r = res[key]
        if "/" not in key or key.startswith("seed/"):
            continue
        wl, store = key.rsplit("/", 1)
        lat = r.get("latency") or {}
        p = lat.get("percentiles") or {}
        p50 = f"{p['p50'] / 1000:.2f}" if "p50" in p else "-"
        p99 = f"{p['p99'] / 1000:.2f}" if "p99" in p else "-"
        ratio = f"{ratios[wl]:.2f}x" if store == "tuffdb" and wl in ratios else ""
        store_cpu = (r.get("store") or {}).get("cpu_percent_avg")
        load_cpu = r.get("load_cpu_percent")  # runs before it was recorded have none
        rows.append(f"| {wl} | {store} | {r['events_per_s']:,.0f} | {p50} | {p99} | "
                    f"{lat.get('n', '-')} | {r.get('errors', 0)} | {_pct(store_cpu)} | "
                    f"{_pct(load_cpu)} | {ratio} |")
    return "\n".join(rows)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def plot(run: dict[str, Any], dest: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    res = run["results"]
    workloads = sorted({k.rsplit("/", 1)[0] for k in res if not k.startswith("seed/")})
    stores = ["tuffdb", "umadb", "tuffdb-embedded"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(workloads)), 4))
    width = 0.8 / len(stores)
    for i, store in enumerate(stores):
        xs, ys = [], []
        for j, wl in enumerate(workloads):
            r = res.get(f"{wl}/{store}")
            if r:
                xs.append(j + i * width)
                ys.append(r["events_per_s"])
        if xs:
            ax.bar(xs, ys, width, label=store)
    ax.set_xticks([j + width for j in range(len(workloads))], workloads, rotation=20, ha="right")
    ax.set_ylabel("events/s")
    ax.set_yscale("log")
    ax.set_title(f"events face, run {run['run_id']}{' (smoke)' if run.get('smoke') else ''}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(dest, dpi=110)


def main() -> None:
    for arg in sys.argv[1:]:
        path = Path(arg)
        run = json.loads(path.read_text())
        plot(run, path.with_suffix(".png"))
        print(f"## {path.name}\n\n{table(run)}\n")


if __name__ == "__main__":
    main()
