"""EventStore against a list-of-events model: Hypothesis drives random appends (with and
without conditions, idempotent retries, tracking), reads (queries, start, backwards, limit),
subscriptions and close/reopen with tiny segments, so sealing, index files and recovery are
in every run. ``store.check() == []`` after every step."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tuffdb.errors import IntegrityError
from tuffdb.events import AppendCondition, Event, EventStore, Query, QueryItem, TrackingInfo

TYPES = ["A", "B", "C"]
TAGS = ["x", "y", "z", "w"]
TYPE_SETS = st.lists(st.sampled_from([*TYPES, "Q"]), max_size=2, unique=True)
TAG_SETS = st.lists(st.sampled_from([*TAGS, "q"]), max_size=2, unique=True)
QUERIES = st.one_of(
    st.none(),
    st.lists(st.tuples(TYPE_SETS, TAG_SETS), max_size=3).map(
        lambda items: Query([QueryItem(t, g) for t, g in items])
    ),
)
EVENTS = st.lists(
    st.tuples(st.sampled_from(TYPES), st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
              st.binary(max_size=60)),
    min_size=1, max_size=6,
)


def matches(query: Query | None, etype: str, tags: list[str]) -> bool:
    if query is None or not query.items:
        return True
    return any((not i.types or etype in i.types) and set(i.tags) <= set(tags)
               for i in query.items)


class EventStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.store = EventStore.open(self.dir / "ev", segment_bytes=512)
        self.model: list[tuple[str, list[str], bytes, str]] = []  # type, tags, data, uuid
        self.tracking: dict[str, int] = {}
        self.last_append: tuple[list[Event], AppendCondition] | None = None

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _expected(self, query: Query | None, lo: int, hi: int) -> list[int]:
        return [p for p in range(lo, hi + 1)
                if matches(query, self.model[p - 1][0], self.model[p - 1][1])]

    @rule(events=EVENTS, query=QUERIES, after=st.one_of(st.none(), st.integers(0, 40)),
          conditional=st.booleans(), with_uuids=st.booleans())
    def append(self, events: list, query: Query | None, after: int | None, conditional: bool,
               with_uuids: bool) -> None:
        evs = [Event(t, d, g, uuid=uuid.uuid4() if with_uuids else None) for t, g, d in events]
        cond = AppendCondition(query or Query(), after) if conditional else None
        head = len(self.model)
        fails = cond is not None and bool(self._expected(query, (after or 0) + 1, head))
        if fails:
            try:
                self.store.append(evs, cond)
            except IntegrityError:
                return
            raise AssertionError("condition should have failed")
        assert self.store.append(evs, cond) == head + len(evs)
        self.model += [(e.type, list(e.tags), e.data, str(e.uuid) if e.uuid else "") for e in evs]
        if cond is not None and with_uuids:
            self.last_append = (evs, cond)

    @rule()
    def retry_last_conditional_append(self) -> None:
        if self.last_append is None:
            return
        evs, cond = self.last_append
        head = len(self.model)
        first = self._expected(cond.fail_if_events_match, (cond.after or 0) + 1, head)[: len(evs)]
        same = [self.model[p - 1][3] for p in first] == [str(e.uuid) for e in evs]
        if first and same:
            assert self.store.append(evs, cond) == first[-1]
        elif first:
            try:
                self.store.append(evs, cond)
            except IntegrityError:
                return
            raise AssertionError("retry of a different append should fail")

    @rule(source=st.sampled_from(["s1", "s2"]), position=st.integers(1, 30),
          with_event=st.booleans())
    def track(self, source: str, position: int, with_event: bool) -> None:
        evs = [Event("A", b"t", ["x"])] if with_event else []
        if position <= self.tracking.get(source, 0):
            try:
                self.store.append(evs, tracking_info=TrackingInfo(source, position))
            except IntegrityError:
                return
            raise AssertionError("non-increasing tracking position accepted")
        self.store.append(evs, tracking_info=TrackingInfo(source, position))
        self.tracking[source] = position
        self.model += [("A", ["x"], b"t", "")] * len(evs)

    @rule(query=QUERIES, start=st.one_of(st.none(), st.integers(0, 45)),
          backwards=st.booleans(), limit=st.one_of(st.none(), st.integers(0, 8)))
    def read(self, query: Query | None, start: int | None, backwards: bool,
             limit: int | None) -> None:
        head = len(self.model)
        if backwards:
            expected = self._expected(query, 1, head if start is None else min(start, head))[::-1]
        else:
            expected = self._expected(query, 1 if start is None else max(start, 1), head)
        if limit is not None:
            expected = expected[:limit]
        r = self.store.read(query, start, backwards, limit)
        got = list(r)
        assert [e.position for e in got] == expected
        for e in got:
            t, g, d, _ = self.model[e.position - 1]
            assert (e.event.type, list(e.event.tags), e.event.data) == (t, g, d)
        if limit is None:
            assert r.head == (head or None)
        else:
            assert r.head == (expected[-1] if expected else None)

    @rule(query=QUERIES, after=st.integers(0, 40))
    def subscribe_catch_up(self, query: Query | None, after: int) -> None:
        expected = self._expected(query, after + 1, len(self.model))
        with self.store.subscribe(query, after) as sub:
            got = [next(sub).position for _ in expected]
        assert got == expected

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = EventStore.open(self.dir / "ev", segment_bytes=512)

    @invariant()
    def consistent(self) -> None:
        assert self.store.head() == (len(self.model) or None)
        assert self.store.check() == []
        for s, p in self.tracking.items():
            assert self.store.get_tracking_info(s) == p


TestEventStoreModel = EventStoreMachine.TestCase
TestEventStoreModel.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
