"""The compiled build's selection (src/tuffdb/_native.py): keyed to the sources, chosen
by TUFFDB_NATIVE, and really in use in the suite's compiled pass."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest

import tuffdb
from tuffdb import _native

HOT = ("tuffdb.server.resp.parser", "tuffdb.kv.store", "tuffdb.events.writer",
       "tuffdb.server.umadb.grpc_h2", "tuffdb.server.ekodb.proto")


def test_the_suite_runs_the_build_it_was_asked_for() -> None:
    compiled = _native.active is not None
    files = [importlib.import_module(m).__file__ or "" for m in HOT]
    assert [f.endswith(".so") for f in files] == [compiled] * len(HOT), files
    mode = os.environ.get("TUFFDB_NATIVE", "auto")
    if mode in {"0", "1"}:  # dev.py sets one per pass; "auto" takes whatever is built
        assert compiled == (mode == "1")


def test_the_key_follows_every_source_byte(tmp_path: Path) -> None:
    copy = tmp_path / "tuffdb"
    shutil.copytree(Path(tuffdb.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = _native.source_key(copy)
    assert _native.source_key(copy) == before
    f = copy / "errors.py"
    f.write_bytes(f.read_bytes() + b"\n")
    assert _native.source_key(copy) != before


def test_native_required_without_a_build_is_an_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_native, "ROOT", tmp_path / "none-here")
    monkeypatch.delenv(_native.BUILD_ENV, raising=False)
    monkeypatch.setenv("TUFFDB_NATIVE", "1")
    with pytest.raises(ImportError, match="tuffdb native build"):
        _native.activate([])
    monkeypatch.setenv("TUFFDB_NATIVE", "auto")
    path: list[str] = []
    assert _native.activate(path) is None
    assert path == []
    monkeypatch.setenv("TUFFDB_NATIVE", "0")
    assert _native.activate(path) is None
