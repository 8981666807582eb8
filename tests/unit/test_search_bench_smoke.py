"""Smoke run of bench/search.py at a tiny size: it completes and writes its result file.

Benchmarks are never part of the test run (PROTOCOL.md section 4); no numbers asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_search_smoke(tmp_path: Path) -> None:
    cmd = [sys.executable, str(REPO / "bench" / "search.py"), "--docs", "300", "--queries", "20",
           "--reps", "1", "--data", "clustered", "--dir", str(tmp_path / "data"),
           "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "out" / "latest.json").read_text())
    kind = result["kinds"][0]
    assert kind["docs"] == 300
    assert kind["text"]["tuffdb"]["qps"]["median"] > 0
    assert kind["vector"]["tuffdb_default"]["recall"] == 1.0  # 300 vectors: searched exactly
    assert kind["server"]["vector"]["recall"] == 1.0
    (tmp_path / "out" / "results.md").unlink()
    plot = [sys.executable, str(REPO / "bench" / "search.py"), "plot",
            str(tmp_path / "out" / "latest.json")]
    done = subprocess.run(plot, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| clustered | 300 |" in (tmp_path / "out" / "results.md").read_text()
    assert (tmp_path / "out" / "search.png").stat().st_size > 0


def test_bench_ycsb_smoke(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(REPO / "bench" / "ycsb.py"),
        "--records",
        "200",
        "--ops",
        "400",
        "--threads",
        "1,2",
        "--embedded-threads",
        "1,2",
        "--reps",
        "1",
        "--warmup",  # the defaults (1 s + 5 s a cell, 40 cells) made this a 36 s test
        "0",
        "--duration",
        "0.2",
        "--ceiling-duration",
        "0.2",
        "--stores",
        "tuffdb-embedded,tuffdb-http",
        "--dir",
        str(tmp_path / "data"),
        "--out",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "out" / "latest.json").read_text())
    cells = {(c["tier"], c["store"]): c for c in result["cells"]}
    assert set(cells) == {
        (t, s) for t in ("durable", "cache") for s in ("tuffdb-embedded", "tuffdb-http")
    }
    for cell in cells.values():
        assert set(cell["workloads"]) == {f"{w}/{t}" for w in "ABCDF" for t in (1, 2)}
        assert all(res["errors"] == 0 for res in cell["workloads"].values())
    plot = [
        sys.executable,
        str(REPO / "bench" / "ycsb.py"),
        "plot",
        str(tmp_path / "out" / "latest.json"),
        "--out",
        str(tmp_path / "plots"),
    ]
    done = subprocess.run(plot, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| A/1 |" in (tmp_path / "plots" / "ycsb-results.md").read_text()
    assert (tmp_path / "plots" / "ycsb.png").stat().st_size > 0
