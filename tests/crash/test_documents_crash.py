"""A process killed in the middle of a multi-record commit: after reopen, all or nothing.

The child commits a transaction (update a, insert c, delete b) and exits on the spot at
a named failpoint: right after the write intent is stored, or after the first group of
puts. Reopening replays the intent, so the whole transaction is visible, and the deleted
record is in the trash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuffdb._failpoints import EXIT_CODE
from tuffdb.documents import Database

CHILD = """
import sys
from tuffdb.documents import Database
db = Database.open(sys.argv[1], durability="always")
c = db.collection("c")
c.insert({"id": "a", "v": 1})
c.insert({"id": "b", "v": 2})
with db.transaction() as tx:
    tx.update("c", "a", {"v": 10})
    tx.insert("c", {"id": "c", "v": 3})
    tx.delete("c", "b")
print("committed without crashing")
"""


@pytest.mark.parametrize("point", ["documents_after_intent", "documents_mid_apply"])
def test_commit_interrupted_at_failpoint_is_replayed_whole(tmp_path: Path, point: str) -> None:
    env = {**os.environ, "TUFFDB_FAILPOINTS": f"{point}=exit"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "db")], env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == EXIT_CODE, done.stdout + done.stderr
    with Database.open(tmp_path / "db") as db:
        assert db.replayed == 1
        c = db.collection("c")
        assert {r["id"]: r["v"] for r in c.find()} == {"a": 10, "c": 3}
        assert c.restore("b")["v"] == 2
        assert db.check() == []
    with Database.open(tmp_path / "db") as db:
        assert db.replayed == 0
