"""Under ``CI=true`` nothing the suite is meant to run may be skipped.

Story (issue 34): without redis-server the byte-for-byte Redis comparisons skipped, and
without a compiler the compiled pass did, and CI still went green. Now ``dev.py test``
fails with a line naming what is missing, and tests/conftest.py turns any skip into a
failure that carries the skip's reason; outside CI a skip stays a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.once  # the build changes nothing here

SKIPPING = '''
import pytest

@pytest.mark.skipif(True, reason="no frobnicator here")
def test_marked():
    pass

def test_skips_itself():
    pytest.skip("no widget here")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False

def test_passes():
    pass
'''


def run_pytest(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_module_skip.py").write_text(
        "import pytest\npytest.skip('whole module: no gadget', allow_module_level=True)\n")
    env = {**os.environ, "CI": ci}
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_under_ci_every_skip_fails_with_its_reason(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout
    for reason in ("no frobnicator here", "no widget here", "whole module: no gadget"):
        assert f"skipped under CI=true, which runs everything: Skipped: {reason}" in done.stdout
    assert "1 xfailed" in done.stdout  # an expected failure is not a skip
    assert " skipped" not in done.stdout.splitlines()[-1]


def test_outside_ci_a_skip_stays_a_skip_with_its_reason(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, "")
    assert done.returncode == 0, done.stdout
    assert "no frobnicator here" in done.stdout and "no widget here" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("1 passed, 3 skipped, 1 xfailed")


def test_dev_py_under_ci_fails_when_redis_server_is_missing(tmp_path: Path) -> None:
    """The test command, with a PATH that has everything but redis-server (and no apt, so
    it cannot install it), stops before any test with a line naming what is missing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cc", "gcc", "fusermount3", "redis-cli"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "CI": "true", "PATH": str(bin_dir)}
    done = subprocess.run([sys.executable, str(ROOT / "dev.py"), "test", "--co", "-q"],  # noqa: S603
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("dev.py: CI=true and redis-server (Debian package redis-server) is missing "
            "(not root with apt-get, so dev.py could not install it): failing\n") in done.stdout
    assert "test pass with" not in done.stdout  # no test ran
