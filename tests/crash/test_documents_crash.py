"""A multi-record commit after a crash: all or nothing.

A commit (update a, insert c, delete b with its trash copy) goes to the engine as one
``write_batch``: one log frame. The child below makes it durable and exits without
closing, so its log holds every frame. Reopened as it is, the whole commit is there;
with the log's tail torn anywhere inside that last frame, none of it is. A process
killed right after handing the batch over (before its fsync) reopens to one of the two.
Stores written by earlier versions may hold write intents: those are replayed at open.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuffdb._failpoints import EXIT_CODE
from tuffdb.documents import Database, codec
from tuffdb.documents.database import INTENT, TRASH_TTL_SECONDS, record_key

CHILD = """
import os, sys
from tuffdb.documents import Database
db = Database.open(sys.argv[1], durability="always")
c = db.collection("c")
c.insert({"id": "a", "v": 1})
c.insert({"id": "b", "v": 2})
with db.transaction() as tx:
    tx.update("c", "a", {"v": 10})
    tx.insert("c", {"id": "c", "v": 3})
    tx.delete("c", "b")
print("committed", flush=True)
os._exit(0)  # acknowledged and never closed: the log keeps every frame
"""

BEFORE = {"a": 1, "b": 2}
AFTER = {"a": 10, "c": 3}


def _run(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=120, check=False)


def _state(path: Path) -> dict[str, int]:
    with Database.open(path) as db:
        assert db.check() == []
        state = {r["id"]: r["v"] for r in db.collection("c").find()}
        if state == AFTER:  # the delete's trash copy came with it
            assert db.collection("c").restore("b")["v"] == 2
        return state


def test_an_acknowledged_commit_is_there_whole(tmp_path: Path) -> None:
    done = _run(tmp_path / "db")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _state(tmp_path / "db") == AFTER


@pytest.mark.parametrize("torn", [1, 9, 40])
def test_a_commit_torn_off_the_log_is_gone_whole(tmp_path: Path, torn: int) -> None:
    done = _run(tmp_path / "db")
    assert done.returncode == 0, done.stdout + done.stderr
    log = max((tmp_path / "db").glob("*.log"))
    size = log.stat().st_size
    with log.open("r+b") as f:  # the commit's frame is the last one: tear into it
        f.truncate(size - torn)
    assert _state(tmp_path / "db") == BEFORE


def test_a_process_killed_before_the_fsync_reopens_to_all_or_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "TUFFDB_FAILPOINTS": "documents_after_batch=exit"}
    done = _run(tmp_path / "db", env)
    assert done.returncode == EXIT_CODE, done.stdout + done.stderr
    assert _state(tmp_path / "db") in (BEFORE, AFTER)


def test_an_intent_left_by_an_earlier_version_is_replayed_whole(tmp_path: Path) -> None:
    with Database.open(tmp_path / "db", durability="always") as db:
        c = db.collection("c")
        c.insert({"id": "a", "v": 1})
        c.insert({"id": "b", "v": 2})
        old_b = db.kv.get(record_key("c", "b"))
        ops = [[record_key("c", "a"), codec.pack_record({"v": 10}), None],
               [record_key("c", "c"), codec.pack_record({"v": 3}), None],
               [record_key("c", "b"), None, None],
               [b"t\x00c\x00b", old_b, TRASH_TTL_SECONDS]]
        db.kv.put(INTENT + bytes(16), codec.pack_native(ops))  # as earlier versions wrote it
    with Database.open(tmp_path / "db") as db:
        assert db.replayed == 1
        assert {r["id"]: r["v"] for r in db.collection("c").find()} == AFTER
        assert db.collection("c").restore("b")["v"] == 2
        assert db.check() == []
    with Database.open(tmp_path / "db") as db:
        assert db.replayed == 0
