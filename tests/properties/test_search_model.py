"""Stateful property test: search results against brute force over a dict model.

Rules: insert, update, delete (plain and in a transaction batch), close/reopen. After every
step: a search for each vocabulary word (stemming off) returns exactly the model's records
holding that word, with every field it appears in listed; exact (flat) vector search
returns the model's true nearest neighbours; the text index passes its self-check.
Reopening rebuilds the indexes from the records (nothing is persisted), so this also
checks that the rebuilt index equals the maintained one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from tuffdb.documents import Database, Vector
from tuffdb.documents.search_index import state_for

WORDS = ["apple", "berry", "cherry", "date", "elder"]
text = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
vec = st.tuples(st.integers(-3, 3), st.integers(-3, 3)).filter(lambda t: t != (0, 0))
docs = st.fixed_dictionaries({}, optional={"title": text, "body": text, "emb": vec})


def stored(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: Vector(v) if k == "emb" else v for k, v in doc.items()}


class SearchModel(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.model: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self._open()

    def _open(self) -> None:
        self.db = Database.open(self.dir / "db", hot_bytes=4096)
        self.coll = self.db.collection("c")

    @rule(target=ids, doc=docs)
    def insert(self, doc: dict[str, Any]) -> str:
        self.counter += 1
        rid = f"id{self.counter:04d}"
        self.coll.insert({"id": rid, **stored(doc)})
        self.model[rid] = dict(doc)
        return rid

    @rule(rid=ids, changes=docs)
    def update(self, rid: str, changes: dict[str, Any]) -> None:
        if rid in self.model:
            self.coll.update(rid, stored(changes))
            self.model[rid].update(changes)

    @rule(rid=ids)
    def delete(self, rid: str) -> None:
        if rid in self.model:
            self.coll.delete(rid)
            del self.model[rid]

    @rule(doc=docs, rid=ids)
    def transaction(self, doc: dict[str, Any], rid: str) -> None:
        tx = self.db.transaction()
        self.counter += 1
        new = f"id{self.counter:04d}"
        tx.insert("c", {"id": new, **stored(doc)})
        if rid in self.model:
            tx.delete("c", rid)
        tx.commit()
        self.model[new] = dict(doc)
        self.model.pop(rid, None)

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self._open()

    @invariant()
    def text_search_equals_brute_force(self) -> None:
        for word in WORDS:
            out = self.coll.search(word, enable_stemming=False, limit=1000)
            got = {r["record"]["id"]: r["matched_fields"] for r in out["results"]}
            want = {
                rid: sorted(f for f in ("body", "title") if word in doc.get(f, "").split())
                for rid, doc in self.model.items()
            }
            assert got == {rid: fields for rid, fields in want.items() if fields}
            assert out["total"] == len(got)
        index = state_for(self.coll).text
        assert index.check() == []
        assert set(index.slot_of) == {
            rid for rid, d in self.model.items() if d.get("title") or d.get("body")
        }

    @invariant()
    def vector_search_equals_brute_force(self) -> None:
        holders = {
            rid: np.asarray(d["emb"], dtype=float) for rid, d in self.model.items() if "emb" in d
        }
        if not holders:
            return
        q = np.array([1.0, 0.5])
        out = self.coll.search(
            "", vector=q.tolist(), vector_field="emb", vector_metric="euclidean", vector_k=3
        )
        dist = {rid: float(np.linalg.norm(v - q)) for rid, v in holders.items()}
        got = [r["record"]["id"] for r in out["results"]]
        want = sorted(dist, key=lambda r: (dist[r], r))[:3]
        assert [round(dist[r], 5) for r in got] == [round(dist[r], 5) for r in want]
        engine = state_for(self.coll).vector_slot(self.coll, "emb", "euclidean").index
        assert engine is not None
        assert set(engine.flat.rows) == set(holders)

    def teardown(self) -> None:
        assert self.db.check() == []
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


SearchModel.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_search_model = SearchModel.TestCase
