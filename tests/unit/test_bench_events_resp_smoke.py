"""Smoke runs of bench/events.py and bench/resp.py at tiny sizes: each completes against
its peer (the UmaDB server from the ``umadb`` wheel; redis-server) and writes well-formed
results that its ``plot`` tool can read. No numbers are asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> None:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600,
                          check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.once
def test_bench_events_smoke(tmp_path: Path) -> None:
    out = tmp_path / "events.json"
    _run("bench/events.py", "--smoke", "--skip-embedded", "--workloads", "b64-w4,sel-single",
         "--dir", str(tmp_path / "data"), "--out", str(out))
    result = json.loads(out.read_text())
    assert set(result["results"]) >= {"write/b64-w4/tuffdb", "write/b64-w4/umadb",
                                      "read/warm-sel-single/tuffdb", "read/warm-sel-single/umadb"}
    assert result["results"]["write/b64-w4/tuffdb"]["errors"] == 0
    _run("bench/events.py", "plot", str(out))
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.once
def test_bench_resp_smoke(tmp_path: Path) -> None:
    out = tmp_path / "resp"
    _run("bench/resp.py", "-n", "2000", "--reps", "1", "--pairings", "always", "--pipelines", "1",
         "--dir", str(tmp_path / "data"), "--out", str(out))
    result = json.loads((out / "latest.json").read_text())
    assert result["settings"]["requests"] == 2000
    (out / "results.md").unlink()
    _run("bench/resp.py", "--plot-only", "--out", str(out))
    assert "| always | 1 | SET |" in (out / "results.md").read_text()
