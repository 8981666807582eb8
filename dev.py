#!/usr/bin/env python3
"""Bootstrap for the two README commands; needs only Python 3.11+ and pip.

    python3 dev.py serve [tuffdb serve options]   # set up .venv, start the server
    python3 dev.py test  [pytest options]         # set up .venv (+ test tools), run the suite

Creates ``.venv`` next to this file on first use and reinstalls only when
``pyproject.toml`` changes. Where a C compiler is present, both compile the hot modules
with mypyc (``tuffdb native build``, redone only when a source changes): ``serve`` runs
the compiled build, ``test`` runs the suite twice, pure Python first (the build runs
behind it, at the lowest CPU priority), then compiled (tests marked ``once`` only in the
compiled pass).
``test`` also installs the Debian packages the suite needs beside Python (redis-server and
redis-tools, which it compares against; etcd-server and etcd-client, the coordination
store the cluster tests start privately; iptables, with which the cluster fault tests cut
links inside network namespaces of their own; fuse3 for the power-loss tests;
build-essential and python3-dev where the C compiler or Python's headers are missing) when
run as root with apt available. The services these packages start on install (redis on
6379, etcd on 2379) are stopped: the tests start their own on free ports. Outside CI it
carries on without what it could not install (the tests that need it are skipped and say
why). Under ``CI=true`` nothing is skipped: a package, compiler or header still missing
fails the command with a line naming it, and so does any test that would have been
skipped (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
# Debian package -> the program it brings (how we tell it is installed).
DEBIAN_TEST_PACKAGES = {
    "redis-server": "redis-server",
    "redis-tools": "redis-cli",
    "etcd-server": "etcd",
    "etcd-client": "etcdctl",
    "iptables": "iptables",
    "fuse3": "fusermount3",
}
# The services those packages start on install (stopped again: tests start their own).
DEBIAN_SERVICES = ("redis-server", "etcd")
CI = os.environ.get("CI", "").lower() in {"true", "1"}


def _run(*cmd: str | Path, check: bool = True) -> int:
    return subprocess.run([str(c) for c in cmd], check=check, cwd=ROOT).returncode


def _ensure_venv(extras: str) -> None:
    if sys.version_info < (3, 11):
        sys.exit("tuffdb needs Python 3.11 or newer")
    if not PY.exists():
        _run(sys.executable, "-m", "venv", VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    stamp = VENV / f".installed-{extras or 'base'}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    _run(PY, "-m", "pip", "install", "-q", "--upgrade", "pip")
    target = f".[{extras}]" if extras else "."
    _run(PY, "-m", "pip", "install", "-q", "-e", target)
    stamp.write_text(digest)


def _python_headers() -> Path:
    include = subprocess.run(
        [str(PY), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True, text=True, check=False).stdout.strip()
    return Path(include) / "Python.h"


def _missing() -> list[tuple[str | None, str]]:
    """What the tests need and is not here: (the Debian package that brings it, or None
    where apt cannot help, what is missing)."""
    out: list[tuple[str | None, str]] = [
        (p, f"{cmd} (Debian package {p})") for p, cmd in DEBIAN_TEST_PACKAGES.items()
        if not shutil.which(cmd)]
    if not (shutil.which("cc") or shutil.which("gcc")):
        out.append(("build-essential", "a C compiler (Debian package build-essential)"))
    headers = _python_headers()
    if not headers.exists():
        # Debian's python3-dev serves Debian's interpreter only (pyenv and the like ship
        # their headers with the interpreter)
        debian = Path(sys.base_prefix) == Path("/usr")
        out.append(("python3-dev" if debian else None,
                    f"Python's headers {headers} (Debian package python3-dev for /usr/bin/python3)"))
    return out


def _ensure_debian_packages() -> tuple[list[str], str]:
    """Install what the tests need when root with apt; return what is still missing, and
    what was tried."""
    wanted = [p for p, _ in _missing() if p is not None]
    if not wanted:
        tried = "apt cannot provide it"
    elif os.geteuid() != 0 or not shutil.which("apt-get"):
        tried = "not root with apt-get, so dev.py could not install it"
    else:
        tried = f"after apt-get install {' '.join(wanted)}"
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *wanted]):
            if subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL).returncode:
                print(f"dev.py: '{' '.join(cmd)}' failed")
                break
        for service in DEBIAN_SERVICES:
            subprocess.run(["service", service, "stop"], check=False, capture_output=True)
    return [what for _, what in _missing()], tried


def _toolchain() -> bool:
    """Whether the compiled build can be attempted (said once when it cannot)."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        print("dev.py: no C compiler found: running the pure-Python package only")
        return False
    if not _python_headers().exists():
        print(f"dev.py: no Python headers ({_python_headers()}; e.g. Debian's python3-dev):"
              " running the pure-Python package only")
        return False
    return True


def _native_build() -> bool | None:
    """Compile the hot modules (mypyc): True when built, None when the C toolchain is
    missing (a compiler, Python's headers: pure Python only, said once), False when the
    compiler rejected the source."""
    if not _toolchain():
        return None
    return _run(VENV / "bin" / "tuffdb", "native", "build", check=False) == 0


def _native_build_behind(log: Path) -> subprocess.Popen[bytes]:
    """Start the compiled build at the lowest CPU priority, its output into ``log``: it
    takes ~4 minutes of one core (gcc -O3 on one large C file) and runs while the pure
    pass does, on what that pass leaves idle."""
    with log.open("wb") as out:
        return subprocess.Popen(  # noqa: S603
            [str(VENV / "bin" / "tuffdb"), "native", "build"], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: os.nice(19))  # noqa: PLW1509


def _pytest(args: list[str], native: str) -> int:
    print(f"dev.py: test pass with TUFFDB_NATIVE={native} "
          f"({'compiled build' if native == '1' else 'pure Python'})", flush=True)
    env = dict(os.environ, TUFFDB_NATIVE=native)
    return subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env,
                          check=False).returncode


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"serve", "test"}:
        print(__doc__)
        return 2
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        _ensure_venv("native")
        _native_build()
        args = rest if any(a.startswith("--data-dir") for a in rest) else ["--data-dir", "tuffdb-data", *rest]
        os.execv(str(VENV / "bin" / "tuffdb"), ["tuffdb", "serve", *args])
    _ensure_venv("test")
    missing, tried = _ensure_debian_packages()
    if missing and CI:
        # CI runs what it is meant to run: a comparison or the compiled pass that cannot
        # run is a failure, not a quiet skip.
        for what in missing:
            print(f"dev.py: CI=true and {what} is missing ({tried}): failing")
        return 1
    for what in missing:
        print(f"dev.py: {what} is missing: carrying on without it (CI=true fails instead)")
    if not _toolchain():
        return _pytest(rest, "0")
    # Tests marked `once` (packaging, real applications, clusters: what the build does
    # not change) run in the compiled pass only, the build `serve` runs. The build runs
    # behind the pure pass (which does not use it).
    log = VENV / "native-build.log"
    build = _native_build_behind(log)
    pure = rest if any(a.startswith("-m") for a in rest) else ["-m", "not once", *rest]
    try:
        rc = _pytest(pure, "0")
    except BaseException:  # Ctrl-C: the build (and its compiler) go too
        with contextlib.suppress(ProcessLookupError):  # (it may have ended already)
            os.killpg(build.pid, signal.SIGKILL)
        build.wait()
        raise
    built = build.wait() == 0
    print(log.read_text(errors="replace").strip(), flush=True)
    if not built:  # a compiler is here and the source no longer compiles: a failure
        print("dev.py: the compiled build failed (tuffdb native build -v shows why)")
        return 1
    return _pytest(rest, "1") or rc


if __name__ == "__main__":
    sys.exit(main())
