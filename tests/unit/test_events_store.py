"""The embedded event store keeps the DCB semantics of UmaDB and eventsourcing exactly:
positions from 1, gapless, not consumed by failures; items OR'ed, types OR'ed, tags AND'ed;
``after`` exclusive, ``start`` inclusive; read heads as in spec section 4.6."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuffdb.errors import ClosedError, IntegrityError, LimitExceeded, LockTimeout, ProgrammingError
from tuffdb.events import (
    AppendCondition,
    Event,
    EventStore,
    Query,
    QueryItem,
    TrackingInfo,
)


# A value of the wrong Python type: ProgrammingError from our own checks, or, in the
# compiled build (mypyc), the TypeError its typed signatures raise at the call, before
# them ("int or None object expected; got str"). Either way nothing is done.
WRONG_TYPE = (ProgrammingError, TypeError)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore.open(tmp_path / "ev")
    yield s
    if not s.closed:
        assert s.check() == []
        s.close()


def q(*items: tuple[list[str], list[str]]) -> Query:
    return Query([QueryItem(t, g) for t, g in items])


def positions(resp: object) -> list[int]:
    return [e.position for e in resp]  # type: ignore[attr-defined]


def test_empty_store_has_no_head(store: EventStore) -> None:
    assert store.head() is None
    r = store.read()
    assert list(r) == []
    assert r.head is None


def test_positions_start_at_one_and_are_gapless(store: EventStore) -> None:
    assert store.append([Event("a", b"1")]) == 1
    assert store.append([Event("a", b"2"), Event("b", b"3")]) == 3
    assert positions(store.read()) == [1, 2, 3]
    assert store.head() == 3


def test_event_fields_round_trip(store: EventStore) -> None:
    u = uuid.uuid4()
    store.append([Event("T", b"\x00data", ["x", "y"], uuid=u, metadata={"k": "v", "a": "b"})])
    (e,) = store.read()
    assert (e.event.type, e.event.data, list(e.event.tags)) == ("T", b"\x00data", ["x", "y"])
    assert e.event.uuid == str(u)
    assert list(e.event.metadata.items()) == [("k", "v"), ("a", "b")]


def test_uppercase_uuid_is_returned_canonical(store: EventStore) -> None:
    u = uuid.uuid4()
    store.append([Event("T", b"", uuid=str(u).upper())])
    assert next(iter(store.read())).event.uuid == str(u)


def test_query_items_are_ored_types_ored_tags_anded(store: EventStore) -> None:
    store.append([
        Event("A", b"", ["x", "y"]),  # 1
        Event("B", b"", ["x"]),  # 2
        Event("C", b"", ["y"]),  # 3
        Event("A", b"", []),  # 4
    ])
    assert positions(store.read(q((["A"], [])))) == [1, 4]
    assert positions(store.read(q((["A", "C"], [])))) == [1, 3, 4]
    assert positions(store.read(q(([], ["x", "y"])))) == [1]
    assert positions(store.read(q(([], ["x"]), ([], ["y"])))) == [1, 2, 3]
    assert positions(store.read(q((["B"], ["x"]), (["C"], [])))) == [2, 3]
    assert positions(store.read(q((["Z"], [])))) == []
    assert positions(store.read(q(([], ["nope"])))) == []
    assert positions(store.read(Query([QueryItem()]))) == [1, 2, 3, 4]
    assert positions(store.read(Query([]))) == [1, 2, 3, 4]


def test_read_start_is_inclusive_forwards_and_backwards(store: EventStore) -> None:
    store.append([Event("a", b"")] * 3)
    assert positions(store.read(start=2)) == [2, 3]
    assert positions(store.read(start=2, backwards=True)) == [2, 1]
    assert positions(store.read(backwards=True)) == [3, 2, 1]
    assert positions(store.read(backwards=True, limit=2)) == [3, 2]


def test_read_head_without_limit_is_store_head(store: EventStore) -> None:
    store.append([Event("a", b"", ["x"]), Event("b", b"")])
    r = store.read(q(([], ["x"])))
    assert positions(r) == [1]
    assert r.head == 2
    r = store.read(q(([], ["nope"])))
    assert r.head == 2


def test_read_head_with_limit_is_last_returned(store: EventStore) -> None:
    store.append([Event("a", b"")] * 5)
    r = store.read(limit=3)
    assert positions(r) == [1, 2, 3]
    assert r.head == 3
    r = store.read(q(([], ["nope"])), limit=3)
    assert r.head is None
    r = store.read(limit=0)
    assert positions(r) == []
    assert r.head is None


def test_condition_after_is_exclusive(store: EventStore) -> None:
    store.append([Event("a", b"", ["x"])])
    cond = AppendCondition(q(([], ["x"])), after=0)
    with pytest.raises(IntegrityError):
        store.append([Event("a", b"")], cond)
    assert store.append([Event("a", b"")], AppendCondition(q(([], ["x"])), after=1)) == 2


def test_empty_condition_query_is_expected_head_check(store: EventStore) -> None:
    store.append([Event("a", b"")])
    with pytest.raises(IntegrityError):
        store.append([Event("a", b"")], AppendCondition())
    with pytest.raises(IntegrityError):
        store.append([Event("a", b"")], AppendCondition(after=0))
    assert store.append([Event("a", b"")], AppendCondition(after=1)) == 2


def test_failed_append_consumes_no_position(store: EventStore) -> None:
    store.append([Event("a", b"", ["x"])])
    with pytest.raises(IntegrityError):
        store.append([Event("a", b"")] * 3, AppendCondition(q(([], ["x"]))))
    assert store.append([Event("b", b"")]) == 2


def test_condition_on_type_and_tag_together(store: EventStore) -> None:
    store.append([Event("A", b"", ["x"]), Event("B", b"", ["y"])])
    assert store.append([Event("C", b"")], AppendCondition(q((["B"], ["x"])))) == 3
    with pytest.raises(IntegrityError):
        store.append([Event("C", b"")], AppendCondition(q((["A"], ["x"]))))


def test_idempotent_retry_by_uuid_returns_original_position(store: EventStore) -> None:
    cond = AppendCondition(q(([], ["acc"])), after=0)
    evs = [Event("a", b"1", ["acc"], uuid=uuid.uuid4()), Event("a", b"2", ["acc"], uuid=uuid.uuid4())]
    store.append([Event("other", b"")])
    assert store.append(evs, cond) == 3
    assert store.append(evs, cond) == 3
    assert store.head() == 3
    other = [Event("a", b"3", ["acc"], uuid=uuid.uuid4())]
    with pytest.raises(IntegrityError):
        store.append(other, cond)


def test_no_dedup_without_condition(store: EventStore) -> None:
    e = Event("a", b"", uuid=uuid.uuid4())
    store.append([e])
    assert store.append([e]) == 2


def test_tracking_info_strictly_increasing_and_echoed(store: EventStore) -> None:
    assert store.get_tracking_info("up") is None
    store.append([Event("a", b"")], tracking_info=TrackingInfo("up", 5))
    assert store.get_tracking_info("up") == 5
    with pytest.raises(IntegrityError, match="non-increasing tracking position"):
        store.append([Event("a", b"")], tracking_info=TrackingInfo("up", 5))
    assert store.head() == 1
    assert store.append([], tracking_info=TrackingInfo("up", 9)) == 0
    assert store.get_tracking_info("up") == 9
    (e,) = store.read()
    assert e.tracking_info is not None
    assert (e.tracking_info.source, e.tracking_info.position) == ("up", 5)


def test_empty_append_returns_zero_and_failing_condition_raises(store: EventStore) -> None:
    assert store.append([]) == 0
    store.append([Event("a", b"")])
    with pytest.raises(IntegrityError):
        store.append([], AppendCondition())
    assert store.head() == 1


def test_validation_rejects_before_writing(store: EventStore) -> None:
    with pytest.raises(ProgrammingError, match="uuid"):
        store.append([Event("a", b"", uuid="not-a-uuid")])
    with pytest.raises(LimitExceeded):
        store.append([Event("a", b"", ["t" * 70_000])])
    with pytest.raises(LimitExceeded):
        store.append([Event("a", b"")], tracking_info=TrackingInfo("s" * 256, 1))
    assert store.head() is None


def test_reopen_recovers_events_index_and_tracking(tmp_path: Path) -> None:
    path = tmp_path / "ev"
    with EventStore.open(path, segment_bytes=4096) as s:
        for i in range(50):
            s.append([Event(f"T{i % 3}", bytes(100), [f"e{i % 7}", "all"])],
                     tracking_info=TrackingInfo("src", i + 1))
        before = [(e.position, e.event) for e in s.read(q(([], ["e3"])))]
    assert len(list(path.joinpath("log").iterdir())) >= 3  # several segments
    with EventStore.open(path) as s:
        assert s.head() == 50
        assert [(e.position, e.event) for e in s.read(q(([], ["e3"])))] == before
        assert s.get_tracking_info("src") == 50
        assert positions(s.read(q((["T1"], ["all"])))) == list(range(2, 51, 3))
        assert s.append([Event("x", b"")]) == 51
        assert s.check() == []


def test_second_open_of_same_directory_is_refused(store: EventStore) -> None:
    with pytest.raises(LockTimeout):
        EventStore.open(store.path)


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    s = EventStore.open(tmp_path / "ev")
    s.close()
    s.close()
    with pytest.raises(ClosedError):
        s.append([Event("a", b"")])
    with pytest.raises(ClosedError):
        s.read()


def test_concurrent_conditional_writers_exactly_one_wins_each_round(store: EventStore) -> None:
    rounds, writers = 20, 8
    wins = []
    for r in range(rounds):
        barrier = threading.Barrier(writers)
        results: list[object] = []
        head = store.head() or 0

        def go(i: int, head: int = head, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                results.append(store.append(
                    [Event("t", str(i).encode(), ["k"])], AppendCondition(q(([], ["k"])), head)
                ))
            except IntegrityError as exc:
                results.append(exc)

        ts = [threading.Thread(target=go, args=(i,)) for i in range(writers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ok = [x for x in results if isinstance(x, int)]
        assert len(ok) == 1, (r, results)
        wins.append(ok[0])
    assert wins == list(range(1, rounds + 1))


def test_subscription_catches_up_then_delivers_live(store: EventStore) -> None:
    store.append([Event("a", b"", ["x"]), Event("b", b"")])
    with store.subscribe(q(([], ["x"]))) as sub:
        assert next(sub).position == 1
        got: list[int] = []
        t = threading.Thread(target=lambda: got.append(next(sub).position))
        t.start()
        store.append([Event("c", b"")])
        store.append([Event("d", b"", ["x"])])
        t.join(10)
        assert got == [4]


def test_subscription_after_is_exclusive_and_stop_ends_it(store: EventStore) -> None:
    store.append([Event("a", b"")] * 3)
    sub = store.subscribe(after=1)
    assert [next(sub).position, next(sub).position] == [2, 3]
    t = threading.Thread(target=lambda: list(sub))
    t.start()
    sub.stop()
    t.join(10)
    assert not t.is_alive()


def test_encrypted_store_round_trips_and_hides_plaintext(tmp_path: Path) -> None:
    key = bytes(range(32))
    path = tmp_path / "ev"
    with EventStore.open(path, encryption_key=key, segment_bytes=2048) as s:
        for i in range(40):
            s.append([Event("SecretType", f"secret-{i}".encode(), ["secret-tag", f"k{i}"])],
                     tracking_info=TrackingInfo("secret-src", i + 1))
        before = [(e.position, e.event) for e in s.read(q(([], ["secret-tag"])))]
    raw = b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())
    assert b"secret" not in raw and b"Secret" not in raw
    with EventStore.open(path, encryption_key=key) as s:
        assert s.indexes_rebuilt == 0
        assert [(e.position, e.event) for e in s.read(q(([], ["secret-tag"])))] == before
        assert positions(s.read(q(([], ["k7"])), backwards=True)) == [8]
        assert s.get_tracking_info("secret-src") == 40
    from tuffdb.errors import WrongKeyError
    with pytest.raises(WrongKeyError):
        EventStore.open(path, encryption_key=bytes(32))
    with pytest.raises(WrongKeyError):
        EventStore.open(path)


@pytest.mark.parametrize("point", ["before_sync_segment", "before_log_write"])
def test_failed_write_or_fsync_poisons_and_reopen_recovers(tmp_path: Path, point: str) -> None:
    from tuffdb import _failpoints
    from tuffdb.errors import PoisonedError

    path = tmp_path / "ev"
    s = EventStore.open(path)
    s.append([Event("a", b"kept", ["x"])])
    _failpoints.enable(point, "raise")
    try:
        with pytest.raises(OSError):
            s.append([Event("a", b"lost", ["x"])])
    finally:
        _failpoints.disable(point)
    with pytest.raises(PoisonedError):
        s.append([Event("a", b"refused")])
    assert positions(s.read()) == [1]  # the failed drain never became visible
    assert positions(s.read(q(([], ["x"])))) == [1]
    s.close()
    with EventStore.open(path) as s2:
        assert s2.head() in (1, 2)  # an unsynced write may or may not have reached the file
        assert next(iter(s2.read())).event.data == b"kept"
        assert s2.append([Event("b", b"after")]) == (s2.head() or 0)


def test_deep_check_verifies_every_frame(tmp_path: Path) -> None:
    path = tmp_path / "ev"
    with EventStore.open(path, segment_bytes=1024) as s:
        for i in range(30):
            s.append([Event("a", bytes(50), [f"t{i}"])])
        assert s.check(deep=True) == []
    seg = sorted((path / "log").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[100] ^= 0xFF  # a bit flip inside a sealed segment, after it was indexed
    seg.write_bytes(bytes(data))
    with EventStore.open(path) as s:
        problems = s.check(deep=True)
        assert problems and "checksum" in problems[0]


@pytest.mark.parametrize("size", [0, 1, 300])
def test_uniform_batches_round_trip(store: EventStore, size: int) -> None:
    """A batch for one entity (same type and tags, equal-size data) takes the numpy path."""
    evs = [Event("T", bytes([i]) * size, ["e1", "all"]) for i in range(20)]
    assert store.append(evs, tracking_info=TrackingInfo("s", 1)) == 20
    store.append([Event("U", b"odd", ["e2"])] * 9)
    got = list(store.read(q(([], ["e1"]))))
    assert [(g.event.type, g.event.data, list(g.event.tags)) for g in got] == [
        ("T", e.data, ["e1", "all"]) for e in evs]
    assert all(g.tracking_info == TrackingInfo("s", 1) for g in got)
    assert positions(store.read(q((["U"], ["e2"])))) == list(range(21, 30))


@pytest.mark.parametrize(("event", "message"), [
    (Event("T", b"x", "order-7"), "tags must be a list of str, not str"),  # type: ignore[arg-type]
    (Event("T", b"x", ["ok", 7]), "tags must be str, not int"),  # type: ignore[list-item]
    (Event("T", "text", ["t"]), "data must be bytes, not str"),  # type: ignore[arg-type]
    (Event("T", 5, ["t"]), "data must be bytes, not int"),  # type: ignore[arg-type]
    (Event(None, b"x", ["t"]), "type must be a str|str object expected"),  # type: ignore[arg-type]
])
@pytest.mark.parametrize("batch", [1, 3, 9])  # 9: the uniform batch's own path
def test_events_of_the_wrong_shape_are_refused_and_nothing_is_appended(
        store: EventStore, event: Event, message: str, batch: int) -> None:
    """Before, a str as the tags became one tag per letter (``"order-7"``: o, r, d, ...),
    an int as the data that many zero bytes, and a str data or a non-str tag escaped as
    TypeError / AttributeError."""
    store.append([Event("Before", b"", ["t"])])
    with pytest.raises(WRONG_TYPE, match=message):
        store.append([event] * batch)
    assert store.head() == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"start": "a"}, "start must be a position|int or None object expected"),
    ({"start": 1.5}, "start must be a position|int or None object expected"),
    ({"limit": -1}, "limit must be an int >= 0"),
    ({"limit": "3"}, "limit must be an int|int or None object expected"),
])
def test_reads_with_options_of_the_wrong_type_are_refused(
        store: EventStore, options: dict, message: str) -> None:
    """Before, a str start escaped from deep inside as a TypeError from a comparison."""
    store.append([Event("T", b"", ["t"])])
    with pytest.raises(WRONG_TYPE, match=message):
        list(store.read(**options))
