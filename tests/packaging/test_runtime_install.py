"""The package as a user installs it: runtime dependencies only, no extras.

A throwaway venv gets the tuffdb wheel and the wheels of its runtime dependencies (kept
in a wheelhouse keyed by the dependency list, so a rerun installs from disk without the
network). In it, every module of the package imports, except the optional integrations,
which must raise ``ImportError`` naming their extra; and ``tuffdb serve`` starts every face
on free ports, answers ``/health``, and exits 0 on SIGTERM. This is what a fresh clone's
``python3 dev.py serve`` needs; the suite's own venv, which has every extra, cannot show it.

The README's dependency table is checked against ``pyproject.toml`` here too.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tuffdb.testing.etcd import free_port

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120.0  # an upper bound on a loaded machine; a passing run never waits this long

# Optional integrations: module -> the extra its ImportError must name.
OPTIONAL = {
    "tuffdb.events.eventsourcing": "tuffdb[eventsourcing]",
    "tuffdb.testing.conformance": "tuffdb[testing]",
}

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import tuffdb
optional = json.loads(sys.argv[1])
result = {"imported": [], "failed": {}, "optional": {}}
for info in pkgutil.walk_packages(tuffdb.__path__, "tuffdb."):
    name = info.name
    try:
        importlib.import_module(name)
    except ImportError as exc:
        (result["optional"] if name in optional else result["failed"])[name] = str(exc)
    except Exception as exc:
        result["failed"][name] = repr(exc)
    else:
        if name in optional:
            result["failed"][name] = "imported without its extra"
        else:
            result["imported"].append(name)
root = tuffdb.__path__[0]
result["files"] = sorted(
    "tuffdb." + str(p.relative_to(root).with_suffix("")).replace("/", ".").removesuffix(".__init__")
    for p in __import__("pathlib").Path(root).rglob("*.py"))
print(json.dumps(result))
"""


def _pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for dep in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^;\s]+)\s*(;.*)?", dep)
        assert match, f"runtime dependency not pinned with ==: {dep!r}"
        pins[match.group(1).lower()] = match.group(2)
    return pins


def test_readme_dependency_table_matches_pyproject() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| Package | Pinned | Why |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:4] for line in table.strip().splitlines()[1:]]
    listed = {name.strip().lower(): pin.strip() for name, pin, _why in rows}
    assert all(why.strip() for _n, _p, why in rows), "every dependency says why"
    assert listed == _pins()


def _wheelhouse(python: Path) -> Path:
    """The runtime dependencies' wheels, built once per dependency list."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    key = hashlib.sha256("\n".join(sorted(deps)).encode()).hexdigest()[:16]
    house = ROOT / ".venv" / "wheelhouse" / key
    if not (house / "COMPLETE").exists():
        shutil.rmtree(house, ignore_errors=True)
        house.mkdir(parents=True)
        subprocess.run([str(python), "-m", "pip", "wheel", "-q", "--wheel-dir", str(house), *deps],
                       check=True)
        (house / "COMPLETE").write_text("\n".join(deps))
    return house


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("runtime-venv")
    house = _wheelhouse(Path(sys.executable))
    # Built from a copy of the sources, so setuptools' build/ lands in the copy.
    source = tmp / "source"
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(dist), str(source)], check=True)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The suite's pip installs into the new venv (--python), from local wheels only.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-index", "--find-links", str(house), "--find-links", str(dist), "tuffdb"],
                   check=True)
    return venv


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TUFFDB_"))}
    env.update(extra)
    return env


@pytest.mark.once
def test_every_module_imports_with_runtime_dependencies_only(runtime_venv: Path,
                                                            tmp_path: Path) -> None:
    python = runtime_venv / "bin" / "python"
    out = subprocess.run([str(python), "-c", IMPORT_ALL, json.dumps(OPTIONAL)], cwd=tmp_path,
                         env=_clean_env(), capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    assert result["failed"] == {}
    # Every module file was reached (a directory without __init__.py is not walked).
    assert set(result["files"]) - {"tuffdb.__init__"} == set(result["imported"]) | set(OPTIONAL)
    assert "tuffdb.server.app" in result["imported"]
    assert set(result["optional"]) == set(OPTIONAL)
    for module, extra in OPTIONAL.items():
        assert f"pip install '{extra}'" in result["optional"][module]


def _free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]  # distinct, outside the ephemeral range


@pytest.mark.once
def test_serve_from_runtime_install_serves_every_face(runtime_venv: Path, tmp_path: Path) -> None:
    resp, grpc, http, admin = _free_ports(4)
    proc = subprocess.Popen(
        [str(runtime_venv / "bin" / "tuffdb"), "serve", "--data-dir", str(tmp_path / "data"),
         "--host", "127.0.0.1", "--resp-port", str(resp), "--grpc-port", str(grpc),
         "--http-port", str(http), "--admin-port", str(admin)],
        cwd=tmp_path, env=_clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            try:
                lines.put(json.loads(raw))
            except json.JSONDecodeError:
                lines.put({"event": "<not json>", "raw": raw})
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[dict[str, Any]] = []

    def wait_for(event: str) -> dict[str, Any]:
        while True:
            line = lines.get(timeout=WAIT_S)
            assert line is not None, f"server exited before {event!r}: {seen}"
            seen.append(line)
            if line.get("event") == event:
                return line

    try:
        ready = wait_for("ready")
        assert ready["faces"] == ["resp", "grpc", "http"]
        for port in (resp, grpc, http, admin):
            socket.create_connection(("127.0.0.1", port), timeout=WAIT_S).close()
        health = httpx.get(f"http://127.0.0.1:{admin}/health", timeout=WAIT_S)
        assert health.status_code == 200
        assert health.json()["status"] == "ok"
        assert set(health.json()["faces"]) == {"resp", "grpc", "http"}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 0
        assert wait_for("stopped")["exit_code"] == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
