"""Search after a SIGKILL: a child keeps writing (inserts, updates, deletes, a transaction)
to a collection whose text and hnsw indexes are live and whose graph builder is running;
it is killed mid-stream. After reopen, text and vector search agree exactly with the
records that recovery kept: the indexes are rebuilt from them, never stale."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import numpy as np

from tuffdb.documents import Database

if TYPE_CHECKING:
    from pathlib import Path

CHILD = """
import sys
import numpy as np
from tuffdb.documents import Database, Vector
db = Database.open(sys.argv[1], durability="always")
spec = {"type": "vector", "algorithm": "hnsw", "metric": "euclidean", "full_scan_threshold_kb": 0}
db.create_collection("c", {"fields": {"v": {"field_type": "Vector", "index": spec}}})
c = db.collection("c")
rng = np.random.default_rng(1)
words = ["alpha", "beta", "gamma", "delta", "omega"]
c.search("alpha")  # the search state is live from here on
n = 0
while True:
    batch = [{"id": f"r{n + i}", "body": " ".join(rng.choice(words, 3)),
              "v": Vector(rng.standard_normal(8).tolist())} for i in range(50)]
    c.insert_many(batch)
    c.update(f"r{n}", {"body": "omega omega", "v": Vector([0.0] * 8)})
    c.delete(f"r{n + 1}")
    with db.transaction() as tx:
        tx.update("c", f"r{n + 2}", {"body": "gamma"})
        tx.delete("c", f"r{n + 3}")
    n += 50
    if n == 1000:
        print("ready", flush=True)
"""


def test_search_matches_the_records_after_a_sigkill(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "db")],  # noqa: S603
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL
    with Database.open(tmp_path / "db") as db:
        c = db.collection("c")
        records = {r["id"]: r for r in c.find()}
        assert len(records) > 900
        for word in ("alpha", "omega", "gamma"):
            out = c.search(word, limit=100_000, enable_stemming=False)
            got = {r["record"]["id"] for r in out["results"]}
            assert got == {rid for rid, r in records.items() if word in r["body"].split()}
        q = np.zeros(8)
        want = sorted(records, key=lambda r: (float(np.linalg.norm(np.asarray(records[r]["v"]) - q)), r))
        stats = c.search_stats(settle=120)["vectors"][0]
        assert stats["vectors"] == len(records)
        assert stats["graph"]["vectors"] + stats["graph"]["holdout"] == len(records)
        out = c.search("", vector=q.tolist(), vector_k=20, vector_recall=1.0)
        got = [r["record"]["id"] for r in out["results"]]
        dist = {rid: float(np.linalg.norm(np.asarray(records[rid]["v"]) - q)) for rid in records}
        assert [round(dist[r], 5) for r in got] == [round(dist[r], 5) for r in want[:20]]
        assert db.check() == []
