"""The package passes its own strict type check (``[tool.mypy]`` in pyproject.toml).

STYLE.md names strict typing as a gate; the compiled build checks only the modules it
compiles, so this runs mypy over the whole package, as a reviewer would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.once
def test_the_package_passes_strict_mypy(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "src/tuffdb"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
