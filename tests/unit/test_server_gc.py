"""Server processes raise the cyclic collector's thresholds (server/app.py tune_gc); the
embedded library leaves the application's collector alone. Each case runs in a fresh
interpreter, so this test process's own settings neither leak in nor change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tuffdb.server.app import SERVER_GC_THRESHOLDS


def _thresholds_after(code: str) -> tuple[int, ...]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport gc, json\n"
                          "print(json.dumps(gc.get_threshold()))"],
                         check=True, capture_output=True, text=True, timeout=120)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_embedded_library_leaves_the_collector_alone(tmp_path: Path) -> None:
    default = _thresholds_after("")
    opened = _thresholds_after(
        "from tuffdb.documents import Database\n"
        f"db = Database.open({str(tmp_path / 'db')!r})\n"
        "db.collection('c').insert({'a': 1})\n"
        "db.close()")
    assert opened == default


def test_tune_gc_sets_the_server_thresholds_above_the_default() -> None:
    assert SERVER_GC_THRESHOLDS[0] > _thresholds_after("")[0]
    assert _thresholds_after("from tuffdb.server.app import tune_gc\ntune_gc()") \
        == SERVER_GC_THRESHOLDS
