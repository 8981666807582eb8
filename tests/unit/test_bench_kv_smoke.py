"""Smoke run of bench/kv.py at a tiny size: it completes and writes well-formed results.

Benchmarks are never part of the test run (PROTOCOL.md section 4); this only checks that the
harness still runs against the current KVStore API (tuffdb + sqlite3, no optional peers) and
that ``bench/kv.py plot`` can read what it wrote. No numbers are asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KV = REPO / "bench" / "kv.py"
CELLS = ("ingest", "durable", "readrandom", "space", "reopen", "workloads", "openloop")


def _tuffdb_available() -> bool:
    try:
        import tuffdb  # noqa: PLC0415
    except ImportError:
        return False
    return hasattr(tuffdb, "KVStore")


def test_bench_kv_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    cmd = [
        sys.executable,
        str(KV),
        "--impl",
        "tuffdb,tuffdb-always,sqlite-wal,sqlite-wal-full",
        "--keys",
        "1000",
        "--reps",
        "1",
        "--threads",
        "2",
        "--duration",
        "0.1",
        "--ops",
        "400",
        "--overwrite-rounds",
        "1",
        "--warmup",
        "0.05",
        "--rates",
        "500",
        "--values",
        "half",
        "--workload",
        "ycsb-a",
        "--workload",
        "readseq",
        "--dir",
        str(tmp_path / "data"),
        "--out",
        str(out),
        "--run-id",
        "smoke",
        "--allow-tmpfs",
        "--store-timeout",
        "60",
        "--quiet",
    ]
    for cell in CELLS:
        cmd += ["--cell", cell]
    proc = subprocess.run(  # noqa: S603 - our own script
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    run = out / "smoke"
    env = json.loads((run / "environment.json").read_text())
    assert {"fsync_probe_start", "fsync_probe_end", "command", "git", "packages"} <= env.keys()
    expect_tuffdb = _tuffdb_available()
    for cell in CELLS:
        doc = json.loads((run / f"{cell}.json").read_text())
        assert doc["cell"] == cell
        assert doc["command"]
        assert doc["finished_at"]
        assert doc["groups"], cell
        for group in doc["groups"]:
            assert group["regime"] in {"DEFAULT", "FULL"}
            for name, row in group["rows"].items():
                assert doc["impls"][name]["regime"] == group["regime"]
                for rep in row["reps"]:
                    assert "failed" not in rep, (cell, name, rep["failed"])
        names = {n for g in doc["groups"] for n in g["rows"]}
        if expect_tuffdb:
            assert any(n.startswith("tuffdb") for n in names), (cell, names)
        if cell != "reopen":
            assert any(n.startswith("sqlite") for n in names), (cell, names)
        assert not (names - {n for n in names if n.startswith(("tuffdb", "sqlite"))})

    proc = subprocess.run(  # noqa: S603 - our own script
        [sys.executable, str(KV), "plot", str(run), "--no-plots"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (run / "results.md").read_text().startswith("# KV benchmark results")
