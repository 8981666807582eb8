#!/usr/bin/env python3
"""Regenerate the KV benchmark plots and markdown tables from raw results only.

    python bench/kv.py plot                               # newest run under docs/benchmarks/kv/
    python bench/kv.py plot docs/benchmarks/kv/<run-id>   # a given run
    python bench/kv.py plot RUN --no-plots                # only results.md
    python bench/kv.py plot RUN --md -                    # markdown to stdout

Reads ``<run>/environment.json`` and every ``<run>/<cell>.json`` written by ``bench/kv.py``;
recomputes medians, min/max, the median repetition's latency and the ratios vs the best peer
from the per-repetition records (the summaries stored by kv.py are not trusted). Writes
``<run>/<cell>.png`` (one panel per table) and ``<run>/results.md``.

Rules kept here (PROTOCOL.md section 4): DEFAULT and FULL rows never share a table or a panel;
percentiles are shown only when N >= 1000; every row names its durability setting.
"""

# Benchmark script, not library code.
# ruff: noqa: T201, CPY001, EXE001, C901, PLR0912, PLR0915, ICN001, ISC004, PLR0913, PLR0917
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "docs" / "benchmarks" / "kv"
MIN_N = 1000


def load_run(run: Path) -> tuple[dict, list[dict]]:
    env_path = run / "environment.json"
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    cells = []
    order = {c: i for i, c in enumerate(env.get("cells", []))}
    for p in sorted(run.glob("*.json"), key=lambda p: (order.get(p.stem, 99), p.stem)):
        if p.name == "environment.json":
            continue
        doc = json.loads(p.read_text())
        if "groups" in doc:
            cells.append(doc)
    return env, cells


def latest_run(root: Path) -> Path:
    runs = sorted(p for p in root.iterdir() if (p / "environment.json").exists())
    if not runs:
        raise SystemExit(f"no runs under {root}")
    return runs[-1]


def summarize(group: dict, impls: dict) -> list[dict]:
    """One dict per row, recomputed from the raw reps."""
    metric = group["metric"]
    higher = group["better"] == "higher"
    rows = []
    for name, row in group["rows"].items():
        reps = row["reps"]
        vals = [r.get(metric) for r in reps]
        ok = [v for v in vals if isinstance(v, (int, float)) and not math.isnan(v)]
        failed = [r["failed"] for r in reps if "failed" in r]
        out: dict[str, Any] = {
            "name": name,
            "settings": impls.get(name, {}).get("settings", ""),
            "family": impls.get(name, {}).get("family", ""),
            "reps": len(ok),
            "median": statistics.median(ok) if ok else None,
            "min": min(ok) if ok else None,
            "max": max(ok) if ok else None,
            "failed": failed,
        }
        phases = [r.get("phase") for r in reps]
        if ok and all(phases):
            order = sorted(range(len(vals)), key=lambda i: vals[i] if vals[i] is not None else -1)
            mi = order[(len(order) - 1) // 2]
            ph = phases[mi]
            out["latency"] = ph["latency"]
            out["errors"] = sum(p["errors"] for p in phases)
            out["misses"] = sum(p.get("get_misses", 0) for p in phases)
            out["time_capped"] = group["params"].get("window") == "ops" and any(
                p.get("stopped_by") == "time" for p in phases
            )
            out["short_window"] = any(p.get("short_window") for p in phases)
            out["ops"] = ph["ops"]
            out["profiled"] = any(r.get("profiled") for r in reps)
            st = reps[mi].get("store_stats") or {}
            if "hot_bytes" in st or "cache_bytes" in st:  # tuffdb: hot tier vs cache budget
                out["memory"] = (
                    f"hot tier {st.get('hot_bytes', 0) / 2**20:.1f} MiB, cache "
                    f"{st.get('cache_bytes', 0) / 2**20:.1f}/{st.get('cache_limit', 0) / 2**20:.1f}"
                    " MiB"
                )
            incl = [r.get("throughput_incl_close") for r in reps]
            if all(isinstance(x, (int, float)) for x in incl):
                out["incl_close"] = statistics.median(incl)
            out["not_kept_up"] = [
                round(p.get("achieved_rate") or 0) for p in phases if p.get("kept_up") is False
            ]
        rows.append(out)
    peers = [r for r in rows if r["family"] != "tuffdb" and r["median"] is not None]
    best = None
    if peers:
        best = (max if higher else min)(peers, key=lambda r: r["median"])
    for r in rows:
        r["ratio"] = (
            (r["median"] / best["median"])
            if (best and r["median"] is not None and best["median"])
            else None
        )
        r["best_peer"] = best["name"] if best else None
    if metric == "space":
        rd = next((r for r in rows if r["name"] == "rocksdict" and r["median"]), None)
        for r in rows:
            r["ratio_rocksdict"] = (r["median"] / rd["median"]) if (rd and r["median"]) else None
    rows.sort(
        key=lambda r: (r["median"] is None, -(r["median"] or 0) if higher else (r["median"] or 0))
    )
    return rows


def fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    if metric == "space":
        return f"{v:.3f}"
    if metric.endswith("_s"):
        return f"{v:.4g}"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def pct(lat: dict | None, key: str) -> str:
    if not lat or not lat.get("percentiles"):
        return "-"
    v = lat["percentiles"].get(key)
    return "-" if v is None else f"{v:,.1f}"


def _find(cells: list[dict], gid: str) -> tuple[dict, list[dict]] | None:
    for doc in cells:
        for group in doc["groups"]:
            if group["id"] == gid:
                return group, summarize(group, doc.get("impls", {}))
    return None


def _row(rows: list[dict], name: str) -> dict | None:
    return next((r for r in rows if r["name"] == name and r["median"] is not None), None)


def _spread_txt(r: dict, metric: str) -> str:
    lat = r.get("latency") or {}
    n = f", N={lat['n']:,}" if lat.get("n") else ""
    return f"{fmt(r['median'], metric)} ({fmt(r['min'], metric)}-{fmt(r['max'], metric)}{n})"


def targets(cells: list[dict]) -> list[str]:
    """Issue 2 section 4 targets, evaluated from this run's raw results (absent cells: '-')."""
    lines = [
        "## Issue 2 section 4 targets (this run)",
        "",
        "| target | tuffdb (median, min-max, N) | compared with | ratio | met? |",
        "|---|---|---|---|---|",
    ]

    def add(
        label: str,
        gid: str,
        subject: str,
        against: str | None,
        op: str,
        bound: float,
        mode: str = "ratio",
    ) -> None:
        found = _find(cells, gid)
        if not found:
            lines.append(f"| {label} | not run (`{gid}`) | | | |")
            return
        group, rows = found
        me = _row(rows, subject)
        if me is None:
            lines.append(f"| {label} | {subject} missing or failed | | | |")
            return
        metric = group["metric"]
        if mode == "value":
            value, other = me["median"], "-"
        elif mode == "self":
            base = _find(cells, gid.replace("after-compact", "after-load"))
            ref = _row(base[1], subject) if base else None
            if ref is None:
                lines.append(f"| {label} | {_spread_txt(me, metric)} | no after-load row | | |")
                return
            value = me["median"] / ref["median"]
            other = f"{subject} after load {_spread_txt(ref, metric)}"
        else:
            ref = _row(rows, against) if against else None
            if against is None:
                ref = _row(rows, me["best_peer"]) if me["best_peer"] else None
            if ref is None:
                lines.append(f"| {label} | {_spread_txt(me, metric)} | no peer result | | |")
                return
            value = me["median"] / ref["median"]
            other = f"{ref['name']} {_spread_txt(ref, metric)}"
        met = value >= bound if op == ">=" else value < bound if op == "<" else value <= bound
        shown = f"{value:.2f}x" if mode in ("ratio", "self") else fmt(value, metric)
        keys = group["params"].get("keys")
        if keys:
            label = f"{label} [this run: {keys:,} keys]"
        lines.append(
            f"| {label} | {_spread_txt(me, metric)} | {other} | {shown} | "
            f"{'yes' if met else '**no**'} ({op} {bound:g}) |"
        )

    add(
        "ingest 300k, 8 threads, DEFAULT: >= 3x fastest peer",
        "ingest-t8",
        "tuffdb",
        None,
        ">=",
        3.0,
    )
    add("ingest 300k, 1 thread: >= 2.5x fastest peer", "ingest-t1", "tuffdb", None, ">=", 2.5)
    add(
        "durable, 8 threads, FULL: >= 2.5x fastest peer",
        "durable-t8",
        "tuffdb-always",
        None,
        ">=",
        2.5,
    )
    add(
        "readrandom after reopen, in cache: >= 1x lmdb",
        "readrandom-in-cache-t1",
        "tuffdb",
        "lmdb",
        ">=",
        1.0,
    )
    add(
        "readrandom after reopen, cache = working/8: >= 1x rocksdict",
        "readrandom-out-of-cache-t1",
        "tuffdb",
        "rocksdict",
        ">=",
        1.0,
    )
    add(
        "Space after close, half-compressible: <= rocksdict",
        "space-half-after-load",
        "tuffdb",
        "rocksdict",
        "<=",
        1.0,
    )
    add(
        "Space after close, incompressible: <= 1.05x raw",
        "space-random-after-load",
        "tuffdb",
        None,
        "<=",
        1.05,
        mode="value",
    )
    for kind in ("half", "random", "template"):
        add(
            f"Space after 10 overwrites + compact(), {kind}: <= 1.5x raw live data",
            f"space-{kind}-after-compact",
            "tuffdb",
            None,
            "<=",
            1.5,
            mode="value",
        )
        add(
            f"... same, {kind}: <= 1.5x its own Space after the first load",
            f"space-{kind}-after-compact",
            "tuffdb",
            None,
            "<=",
            1.5,
            mode="self",
        )
    add("reopen, 1,000,000 keys: < 1 s", "reopen", "tuffdb", None, "<", 1.0, mode="value")
    lines.append("")
    return lines


def markdown(env: dict, cells: list[dict], run: Path) -> str:
    out: list[str] = [f"# KV benchmark results: run `{run.name}`", ""]
    out += [
        "Generated by `bench/kv.py plot` from the raw files in this directory; do not edit.",
        "",
    ]
    if env:
        g = env.get("git", {})
        fs = env.get("filesystem", {})
        out += ["## Environment", "", "| | |", "|---|---|"]
        ram = env.get("ram_bytes")
        rows = [
            ("command", f"`{env.get('command', '')}`"),
            (
                "git",
                f"{g.get('commit', '')[:12]}{' (dirty)' if g.get('dirty') else ''} "
                f"{g.get('subject', '')}",
            ),
            (
                "CPU",
                f"{env.get('cpu_model')} ({env.get('cpu_count')} CPUs, affinity "
                f"{env.get('cpu_affinity')})",
            ),
            ("RAM", f"{ram / 2**30:.1f} GiB" if ram else "?"),
            ("kernel / Python", f"{env.get('kernel')} / {env.get('python')}"),
            (
                "disk",
                f"{fs.get('device')} {fs.get('type')} ({fs.get('options')}); "
                f"{env.get('disk_kind')}",
            ),
            ("mode", env.get("mode", "")),
            (
                "load average",
                f"start {env.get('loadavg_at_start')}; end {env.get('loadavg_at_end', '?')}",
            ),
            (
                "packages",
                ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items())
                + f"; SQLite {env.get('sqlite_version')}, LevelDB {env.get('leveldb_version')}, "
                f"LMDB {env.get('lmdb_library_version')}",
            ),
        ]
        for key in ("fsync_probe_start", "fsync_probe_end"):
            p = env.get(key)
            if p:
                rows.append(
                    (
                        key.replace("_", " "),
                        f"min {p['min_us']} / avg {p['avg_us']} / p95 {p['p95_us']} / "
                        f"p99 {p['p99_us']} / max {p['max_us']} us (50 x 4 KiB write+fsync)"
                        + (" **SUSPICIOUS: avg < 50 us**" if p.get("suspicious") else ""),
                    )
                )
        out += [f"| {k} | {v} |" for k, v in rows]
        out.append("")
    out += targets(cells)
    for doc in cells:
        impls = doc.get("impls", {})
        out += [f"## Cell `{doc['cell']}`", "", f"Command: `{doc.get('command', '')}`", ""]
        what = doc.get("params", {}).get("what")
        if what:
            out += [f"Procedure: {what}.", ""]
        for group in doc["groups"]:
            rows = summarize(group, impls)
            metric = group["metric"]
            unit = group["unit"]
            lower = group["better"] == "lower"
            out += [
                f"### {group['title']}",
                "",
                f"Regime: **{group['regime']}**. Metric: {metric} ({unit}, "
                f"{'lower' if lower else 'higher'} is better); median of reps with min-max; "
                f"ratio vs the best peer in this table"
                + (f" (**{rows[0]['best_peer']}**)" if rows and rows[0]["best_peer"] else "")
                + ".",
                "",
            ]
            has_lat = any(r.get("latency") for r in rows)
            has_incl = any(r.get("incl_close") is not None for r in rows)
            head = ["store", "setting", "median", "min-max", "ratio vs best peer"]
            if metric == "space":
                head.append("vs rocksdict")
            if has_incl:
                head.append("incl. flush+close")
            if has_lat:
                head += ["p50 us", "p99 us", "p99.9 us", "N", "errors"]
            head.append("notes")
            out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for r in rows:
                notes = []
                if r["failed"]:
                    notes.append("FAILED: " + r["failed"][0][:80])
                if r.get("time_capped"):
                    notes.append("stopped by the time cap")
                if r.get("short_window"):
                    notes.append("window < 1 s")
                if r.get("not_kept_up"):
                    notes.append(
                        "did not keep up with the offered rate (achieved "
                        + ", ".join(f"{x:,}" for x in r["not_kept_up"])
                        + " ops/s)"
                    )
                if r.get("profiled"):
                    notes.append("PROFILED rep(s): py-spy overhead included")
                if r.get("memory"):
                    notes.append(r["memory"])
                if r.get("misses"):
                    notes.append(f"{r['misses']} get misses")
                lat = r.get("latency")
                if lat and not lat.get("percentiles"):
                    notes.append(f"percentiles suppressed (N={lat.get('n')} < {MIN_N})")
                if r["reps"] < 3:
                    notes.append(f"{r['reps']} rep(s)")
                name = f"**{r['name']}**" if r["family"] == "tuffdb" else r["name"]
                cells_ = [
                    name,
                    r["settings"],
                    fmt(r["median"], metric),
                    f"{fmt(r['min'], metric)}-{fmt(r['max'], metric)}",
                    f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-",
                ]
                if metric == "space":
                    rr = r.get("ratio_rocksdict")
                    cells_.append(f"{rr:.2f}x" if rr is not None else "-")
                if has_incl:
                    cells_.append(fmt(r.get("incl_close"), metric))
                if has_lat:
                    cells_ += [
                        pct(lat, "p50"),
                        pct(lat, "p99"),
                        pct(lat, "p99.9"),
                        f"{lat['n']:,}" if lat else "-",
                        str(r.get("errors", "-")),
                    ]
                cells_.append("; ".join(notes))
                out.append("| " + " | ".join(c.replace("|", "/") for c in cells_) + " |")
            skipped = group.get("skipped")
            if skipped:
                out += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())]
            out.append("")
        omitted = doc.get("omitted") or {}
        if omitted:
            out += ["Omitted: " + "; ".join(f"{k}: {v}" for k, v in omitted.items()), ""]
    out += ["Latency is closed-loop and not corrected for coordinated omission.", ""]
    return "\n".join(out)


def plot(cells: list[dict], run: Path) -> list[Path]:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    written = []
    for doc in cells:
        groups = doc["groups"]
        if not groups:
            continue
        ncol = min(3, len(groups))
        nrow = math.ceil(len(groups) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.9 * nrow), squeeze=False)
        for ax in axes.flat[len(groups) :]:
            ax.set_visible(False)
        for ax, group in zip(axes.flat, groups, strict=False):
            rows = [r for r in summarize(group, doc.get("impls", {})) if r["median"] is not None]
            names = [r["name"] for r in rows]
            med = [r["median"] for r in rows]
            lo = [r["median"] - r["min"] for r in rows]
            hi = [r["max"] - r["median"] for r in rows]
            colors = ["#c0392b" if r["family"] == "tuffdb" else "#7f8c8d" for r in rows]
            ax.barh(names, med, xerr=[lo, hi], color=colors, capsize=3)
            ax.invert_yaxis()
            for i, r in enumerate(rows):
                if r["ratio"] is not None:
                    ax.text(r["median"], i, f" {r['ratio']:.2f}x", va="center", fontsize=7)
            ax.set_title(f"[{group['regime']}] {group['title']}", fontsize=8, wrap=True)
            ax.set_xlabel(
                f"{group['metric']} ({group['unit']}; "
                f"{'lower' if group['better'] == 'lower' else 'higher'} is better)",
                fontsize=7,
            )
            ax.tick_params(labelsize=7)
            if group["metric"] == "space":
                ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
            if group["metric"] == "throughput" and med and max(med) / max(min(med), 1e-9) > 50:
                ax.set_xscale("log")
        fig.suptitle(
            f"tuffdb bench/kv.py: cell {doc['cell']} (run {doc.get('run_id', run.name)}; "
            "median, whiskers min-max; ratio vs best peer)",
            fontsize=9,
        )
        fig.tight_layout()
        path = run / f"{doc['cell']}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "run", nargs="?", help="run directory (default: newest under docs/benchmarks/kv/)"
    )
    p.add_argument("--md", help="markdown output path, '-' for stdout (default <run>/results.md)")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    run = Path(args.run) if args.run else latest_run(DEFAULT_ROOT)
    env, cells = load_run(run)
    if not cells:
        raise SystemExit(f"no cell results in {run}")
    md = markdown(env, cells, run)
    if args.md == "-":
        sys.stdout.write(md)
    else:
        target = Path(args.md) if args.md else run / "results.md"
        target.write_text(md, encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    if not args.no_plots:
        for path in plot(cells, run):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
