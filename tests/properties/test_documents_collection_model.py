"""Stateful property test: a collection with hash and ordered indexes against a dict model.

Rules come from the API (insert, update, delete, increment, a transaction, close/reopen);
after every step the store must equal the model, every index-backed query must equal a
scan of the model, and ``db.check()`` must find nothing. Reopening rebuilds the indexes
from the records, so it also checks that what was acknowledged is what is read back.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from tuffdb.documents import Database, where

vals = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "c"]), st.none())
docs = st.fixed_dictionaries({}, optional={"k": vals, "h": vals, "n": st.integers(0, 9)})


class CollectionModel(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.model: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self._open()
        self.coll.create_index("k", "ordered")
        self.coll.create_index("h", "hash")

    def _open(self) -> None:
        self.db = Database.open(self.dir / "db", hot_bytes=4096)
        self.coll = self.db.collection("c")

    @rule(target=ids, doc=docs)
    def insert(self, doc: dict[str, Any]) -> str:
        self.counter += 1
        rid = f"id{self.counter:04d}"
        assert self.coll.insert({"id": rid, **doc}) == rid
        self.model[rid] = dict(doc)
        return rid

    @rule(rid=ids, changes=docs)
    def update(self, rid: str, changes: dict[str, Any]) -> None:
        if rid in self.model:
            self.coll.update(rid, changes)
            self.model[rid].update(changes)

    @rule(rid=ids)
    def delete(self, rid: str) -> None:
        if rid in self.model:
            assert self.coll.delete(rid)["id"] == rid
            del self.model[rid]

    @rule(rid=ids)
    def increment(self, rid: str) -> None:
        if rid in self.model:
            self.coll.action(rid, "increment", "n", 1)
            self.model[rid]["n"] = self.model[rid].get("n", 0) + 1

    @rule(a=ids, b=ids, doc=docs)
    def transaction(self, a: str, b: str, doc: dict[str, Any]) -> None:
        with self.db.transaction("Serializable") as tx:
            if a in self.model:
                tx.update("c", a, doc)
            if b in self.model and b != a:
                tx.delete("c", b)
        if a in self.model:
            self.model[a].update(doc)
        if b in self.model and b != a:
            del self.model[b]

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self._open()

    @invariant()
    def store_equals_model(self) -> None:
        got = {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in self.coll.find()}
        assert got == self.model
        for value in (-1, 0, "a", None):
            want = sorted(i for i, d in self.model.items() if d.get("h") == value and (value is not None or "h" not in d or d["h"] is None))  # noqa: E501
            assert [r["id"] for r in self.coll.find(where("h") == value)] == want
        want = sorted(i for i, d in self.model.items() if isinstance(d.get("k"), int) and d["k"] >= 0)
        assert self.coll.explain(where("k") >= 0)["plan"] == "index_range"
        assert [r["id"] for r in self.coll.find(where("k") >= 0)] == want
        assert self.db.check() == []

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


CollectionModel.TestCase.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                             suppress_health_check=list(HealthCheck))
test_collection_matches_model = CollectionModel.TestCase
