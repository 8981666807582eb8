"""The optional compiled build: the hot modules, compiled by mypyc, used when present.

The source stays plain typed Python and is always complete on its own. ``tuffdb native
build`` copies this package to ``<sys.prefix>/tuffdb-native/<key>/tuffdb``
and compiles the modules in :data:`HOT_MODULES` there (a C compiler and ``mypy`` are
needed; ``pip install tuffdb[native]``). ``<key>`` is a digest of every source file,
so a build never runs against sources it was not made from: an edit means a new key,
and until it is rebuilt the pure-Python package is used.

``import tuffdb`` calls :func:`activate` first thing. ``TUFFDB_NATIVE`` chooses:

- unset or ``auto``: the compiled build for these exact sources if there is one;
- ``0``: pure Python even if a build exists (the test suite's first pass);
- ``1``: the compiled build, and an ImportError if there is none (so a benchmark or a
  test pass that means to measure the compiled build cannot silently measure the other).

Once active, ``TUFFDB_NATIVE_BUILD`` in the environment names the build, so the processes
this one starts (servers under test or benchmark) run the same build even if the sources
change meanwhile. Activation puts the build's copy of the package first on
``tuffdb.__path__`` (every submodule then loads from the copy: the compiled ones as
extension modules, the rest as the copied sources) and its root on ``sys.path``
(mypyc's shared support library).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The modules on the per-request and per-event paths (profiles: docs/benchmarks/*.md).
# A module run with ``python -m`` cannot be compiled (an extension module has no code
# object for runpy), so the ``__main__`` modules of the ``-m`` entry points stay Python.
HOT_MODULES = (
    "tuffdb/server/resp/parser.py",
    "tuffdb/server/resp/reply.py",
    "tuffdb/server/resp/conn.py",
    "tuffdb/server/resp/table.py",
    "tuffdb/server/resp/commands/strings.py",
    "tuffdb/server/resp/commands/common.py",
    "tuffdb/server/resp/commands/collection.py",
    "tuffdb/server/resp/commands/lists.py",
    "tuffdb/server/resp/commands/hashes.py",
    "tuffdb/server/resp/commands/sets.py",
    "tuffdb/server/resp/commands/zsets.py",
    "tuffdb/server/resp/commands/streams.py",
    "tuffdb/server/resp/keyspace.py",
    "tuffdb/server/loop_rounds.py",
    "tuffdb/kv/store.py",
    "tuffdb/kv/hot_tier.py",
    "tuffdb/kv/ordered.py",
    "tuffdb/kv/background.py",
    "tuffdb/kv/merge.py",
    "tuffdb/kv/records.py",
    "tuffdb/kv/cold.py",
    "tuffdb/kv/tier.py",  # its TieredSegment subclasses cold.ColdSegment
    "tuffdb/_format/record.py",
    "tuffdb/events/codec.py",
    "tuffdb/events/writer.py",
    "tuffdb/events/tag_index.py",
    "tuffdb/events/type_column.py",
    "tuffdb/events/planner.py",
    "tuffdb/events/store.py",
    "tuffdb/server/umadb/grpc_h2.py",
    "tuffdb/server/umadb/hpack_codec.py",
    "tuffdb/server/umadb/service.py",
    "tuffdb/server/ekodb/proto.py",
    "tuffdb/server/ekodb/app.py",
    "tuffdb/server/ekodb/data.py",
    "tuffdb/server/ekodb/sse.py",  # its Takeover subclasses proto.Response
    "tuffdb/server/ekodb/wire.py",
    "tuffdb/server/ekodb/read_cache.py",
    "tuffdb/server/ekodb/body.py",
    "tuffdb/server/busy_poll.py",
    "tuffdb/storage/codec.py",
    "tuffdb/documents/codec.py",
    "tuffdb/documents/wire.py",
    "tuffdb/documents/shape.py",
    "tuffdb/documents/collection.py",
    "tuffdb/documents/database.py",
    "tuffdb/documents/write_lock.py",
    "tuffdb/documents/search.py",
    "tuffdb/documents/search_index.py",
    "tuffdb/documents/vector/flat.py",
    "tuffdb/documents/vector/engine.py",
    "tuffdb/documents/fulltext/postings.py",
    "tuffdb/documents/fulltext/analyzer.py",
    "tuffdb/documents/fulltext/scoring.py",
)
KEEP_BUILDS = 3  # builds of other sources (another checkout, a branch) are kept a while

PACKAGE = Path(__file__).resolve().parent
ROOT = Path(sys.prefix) / "tuffdb-native"
STAMP = "BUILD-OK"
BUILD_ENV = "TUFFDB_NATIVE_BUILD"  # set once active, so child processes use the same build
# The build's own mypy settings: the compiler needs types, not the repository's lint
# strictness, and some dependencies ship no stubs.
MYPY_INI = "[mypy]\nignore_missing_imports = True\n"

active: Path | None = None  # the build in use, if any


def source_key(package: Path = PACKAGE) -> str:
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    h.update("\n".join(HOT_MODULES).encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:20]


def build_dir(key: str | None = None) -> Path:
    return ROOT / (key or source_key())


def activate(package_path: list[str]) -> Path | None:
    """Put the compiled build first on ``package_path`` (``tuffdb.__path__``)."""
    global active  # noqa: PLW0603  (set once, at import)
    mode = os.environ.get("TUFFDB_NATIVE", "auto").lower()
    if mode in {"0", "off", "no", "false"}:
        return None
    # A child process (a server a test or benchmark starts) runs its parent's build.
    inherited = os.environ.get(BUILD_ENV)
    where = Path(inherited) if inherited else build_dir()
    if not (where / STAMP).exists():
        if mode in {"1", "on", "yes", "true", "require"}:
            raise ImportError(
                f"TUFFDB_NATIVE={mode}: no compiled build of these sources at {where}; "
                "run 'tuffdb native build'"
            )
        return None
    sys.path.insert(0, str(where))
    package_path.insert(0, str(where / "tuffdb"))
    os.environ[BUILD_ENV] = str(where)
    active = where
    return where


def build(*, quiet: bool = True) -> Path:
    """Compile the hot modules into a fresh copy of the package; return the build dir."""
    key = source_key()
    final = build_dir(key)
    if (final / STAMP).exists():
        return final
    ROOT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=ROOT))
    try:
        shutil.copytree(
            PACKAGE, work / "tuffdb",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
        )
        (work / "mypy.ini").write_text(MYPY_INI)
        out = subprocess.run(
            [sys.executable, "-m", "mypyc", "--config-file", "mypy.ini", *HOT_MODULES],
            cwd=work, capture_output=quiet, text=True, check=False,
        )
        if out.returncode:
            detail = (out.stdout or "") + (out.stderr or "") if quiet else ""
            raise RuntimeError(f"mypyc failed (exit {out.returncode})\n{detail[-4000:]}")
        shutil.rmtree(work / "build", ignore_errors=True)
        (work / "mypy.ini").unlink()
        shutil.rmtree(work / ".mypy_cache", ignore_errors=True)
        (work / STAMP).write_text(key + "\n")
        try:
            work.rename(final)
        except OSError:  # another build won the race; theirs is as good
            if not (final / STAMP).exists():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    builds = sorted((d for d in ROOT.iterdir() if not d.name.startswith(".build-")),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for old in builds[KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def main(action: str, *, verbose: bool = False) -> int:
    """``tuffdb native build|status``."""
    if action == "build":
        try:
            where = build(quiet=not verbose)
        except (RuntimeError, OSError) as exc:
            print(f"tuffdb: no compiled build ({exc}); the pure-Python package is used")
            return 1
        print(f"tuffdb: compiled build ready at {where}")
        return 0
    where = build_dir()
    state = "in use" if active == where else "ready" if (where / STAMP).exists() else "absent"
    print(f"{where} {state}")
    return 0
