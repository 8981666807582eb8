"""The checkers themselves, on histories whose verdict is known: good ones and bad ones.

A checker that never says "invalid" would make every fault test pass, so each anomaly a
cluster can produce is written down by hand here (a stale read after an acknowledged
write, a lost acknowledged write, two compare-and-sets that both won, a duplicated or
lost event, a gap, a violated append condition) and must be caught; and histories of a
few hundred operations recorded from real threads on a real atomic register must pass.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from tuffdb.testing.checker import (
    Append,
    History,
    LogEntry,
    Operation,
    check_log,
    check_register,
    check_registers,
    dcb_condition,
)

INFO = None  # complete time of an op whose outcome is unknown


def op(i: int, f: str, value: Any, start: int, end: int | None, result: Any = None, *,
       outcome: str = "ok", process: Hashable = None, key: Hashable = "k") -> Operation:
    """A hand-made operation; times are plain ticks (only their order matters)."""
    if end is INFO and outcome == "ok":
        outcome = "info"
    return Operation(i, process if process is not None else i, f, key, value, start,
                     outcome, result, end)  # type: ignore[arg-type]


# -- registers ---------------------------------------------------------------------------------

def test_sequential_register_history_is_linearizable() -> None:
    history = [op(0, "write", 1, 0, 1), op(1, "read", None, 2, 3, 1),
               op(2, "cas", (1, 2), 4, 5, True), op(3, "cas", (1, 3), 6, 7, False),
               op(4, "read", None, 8, 9, 2), op(5, "delete", None, 10, 11),
               op(6, "read", None, 12, 13, None)]
    result = check_register(history)
    assert result.valid is True and result.checked == 7


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    for seen in (None, 1):
        assert check_register([op(0, "write", 1, 0, 10), op(1, "read", None, 2, 3, seen)])
    assert not check_register([op(0, "write", 1, 0, 10), op(1, "read", None, 2, 3, 7)])


def test_stale_read_after_an_acknowledged_write_is_caught() -> None:
    history = [op(0, "write", 1, 0, 1), op(1, "write", 2, 2, 3),
               op(2, "read", None, 4, 5, 1)]  # the old leader still answering reads
    result = check_register(history)
    assert result.valid is False
    assert "not linearizable" in result.errors[0] and "#2" in result.errors[0]


def test_lost_acknowledged_write_is_caught() -> None:
    history = [op(0, "write", "a", 0, 1), op(1, "write", "b", 2, 3),
               op(2, "read", None, 10, 11, "b"),
               op(3, "read", None, 20, 21, "a")]  # failover rolled "b" back
    assert check_register(history).valid is False


def test_two_compare_and_sets_that_both_won_are_caught() -> None:
    """Split brain: two leaders each accept a CAS from the same expected value."""
    history = [op(0, "write", 0, 0, 1), op(1, "cas", (0, "x"), 2, 6, True),
               op(2, "cas", (0, "y"), 3, 5, True)]
    assert check_register(history).valid is False
    history[2] = op(2, "cas", (0, "y"), 3, 5, False)  # the loser says it lost: fine
    assert check_register(history).valid is True


def test_an_unknown_write_may_have_happened_or_not_but_not_both() -> None:
    unknown = op(0, "write", 2, 1, INFO)
    assert check_register([unknown, op(1, "read", None, 5, 6, 2)], initial=1)
    assert check_register([unknown, op(1, "read", None, 5, 6, 1)], initial=1)
    flip = [unknown, op(1, "read", None, 5, 6, 2), op(2, "read", None, 7, 8, 1)]
    assert check_register(flip, initial=1).valid is False
    # It cannot take effect before it was invoked either.
    assert not check_register([op(1, "read", None, 0, 1, 2), op(0, "write", 2, 3, INFO)],
                              initial=1)


def test_an_unknown_cas_that_could_not_apply_is_allowed_to_have_not_happened() -> None:
    history = [op(0, "cas", (5, 6), 0, INFO), op(1, "read", None, 1, 2, 1)]
    assert check_register(history, initial=1).valid is True


def test_a_failed_write_must_not_be_seen() -> None:
    history = [op(0, "write", 2, 0, 1, outcome="fail"), op(1, "read", None, 2, 3, 2)]
    assert check_register(history, initial=1).valid is False
    assert check_register(history[:1] + [op(1, "read", None, 2, 3, 1)], initial=1)


def test_a_pending_operation_counts_as_unknown() -> None:
    pending = Operation(0, "p", "write", "k", 9, 0)  # invoked, never completed
    assert check_register([pending, op(1, "read", None, 5, 6, 9)])
    assert check_register([pending, op(1, "read", None, 5, 6, None)])


def test_the_search_gives_up_at_its_bound_rather_than_guessing() -> None:
    history = [op(i, "write", i, 0, 100) for i in range(8)] + [op(8, "read", None, 101,
                                                                102, -1)]
    result = check_register(history, max_states=50)
    assert result.valid is None and "gave up" in result.errors[0]


class AtomicRegisters:
    """A real linearizable store (a lock): histories recorded against it must pass."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, Any] = {}

    def run(self, history: History, thread: int, n_ops: int, seed: int,
            keys: list[str]) -> None:
        rng = random.Random(seed)
        for _ in range(n_ops):
            key = rng.choice(keys)
            kind = rng.choice(("read", "write", "cas"))
            value: Any = (rng.randrange(3), rng.randrange(3)) if kind == "cas" else \
                rng.randrange(3) if kind == "write" else None
            op_ = history.invoke(thread, kind, key, value)
            with self.lock:
                current = self.values.get(key)
                if kind == "read":
                    result = current
                elif kind == "write":
                    self.values[key], result = value, None
                else:
                    result = current == value[0]
                    if result:
                        self.values[key] = value[1]
            if kind == "write" and rng.random() < 0.1:
                history.info(op_, "timeout (applied)")  # the client never heard back
            else:
                history.ok(op_, result)


def test_hundreds_of_concurrent_operations_per_key_from_real_threads_check() -> None:
    history, store = History(), AtomicRegisters()
    keys = ["a", "b"]
    threads = [threading.Thread(target=store.run, args=(history, t, 150, t, keys))
               for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ops = history.operations()
    assert len(ops) == 600
    results = check_registers(ops)
    assert set(results) == {"a", "b"}
    assert all(r.valid is True for r in results.values()), results
    assert sum(r.checked for r in results.values()) >= 550  # unknown reads left out only
    # One corrupted read (a value never written) turns the verdict.
    reads = [o for o in ops if o.f == "read" and o.key == "a" and o.outcome == "ok"]
    reads[len(reads) // 2].result = 99
    assert check_registers(ops)["a"].valid is False


def concurrent_history(n: int, processes: int, seed: int, unknown_rate: float
                       ) -> list[Operation]:
    """A linearizable history with much overlap: each op takes effect at a random moment
    inside its interval, ops of different processes overlap by up to ~8; writes carry
    unique values (as the cluster tests' clients do) and some outcomes are unknown."""
    rng = random.Random(seed)
    clock = [0] * processes
    planned = []
    for i in range(n):
        p = rng.randrange(processes)
        start = clock[p] + rng.randrange(1, 5)
        clock[p] = end = start + rng.randrange(1, 40)
        kind = rng.choice(("read", "write", "cas"))
        value = None if kind == "read" else i if kind == "write" else (
            rng.randrange(max(i - 5, 0), i) if i else None, i)
        planned.append((rng.uniform(start, end), i, p, kind, value, start, end))
    state, ops = None, []
    for _at, i, p, kind, value, start, end in sorted(planned):
        result = state if kind == "read" else None
        if kind == "write":
            state = value
        elif kind == "cas":
            result = state == value[0]
            state = value[1] if result else state
        known = kind == "read" or rng.random() >= unknown_rate
        ops.append(Operation(i, p, kind, "k", value, start, "ok" if known else "info",
                             result if known else None, end if known else None))
    return ops


@pytest.mark.parametrize(("processes", "unknown_rate"), [(8, 0.0), (8, 0.1), (5, 0.3)])
def test_hundreds_of_overlapping_operations_check_both_ways(processes: int,
                                                           unknown_rate: float) -> None:
    ops = concurrent_history(300, processes, seed=processes, unknown_rate=unknown_rate)
    assert check_register(ops).valid is True
    reads = [o for o in ops if o.f == "read" and o.outcome == "ok"]
    reads[len(reads) // 2].result = reads[len(reads) // 2 - 1].result = -1  # never written
    assert check_register(ops).valid is False


# -- the recorder --------------------------------------------------------------------------------

def test_history_records_outcomes_from_many_threads(tmp_path: Path) -> None:
    history = History()

    def client(n: int) -> None:
        for i in range(100):
            with history.record(n, "write", "k", i) as o:
                history.ok(o, None)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ops = history.operations()
    assert sorted(o.id for o in ops) == list(range(400))
    assert all(o.outcome == "ok" and (o.complete_ns or 0) >= o.invoke_ns for o in ops)

    with pytest.raises(PermissionError), history.record(9, "write", "k", 1,
                                                         definite=(PermissionError,)):
        raise PermissionError("READONLY")
    with pytest.raises(TimeoutError), history.record(9, "write", "k", 2,
                                                      definite=(PermissionError,)):
        raise TimeoutError
    with history.record(9, "read", "k"):
        pass
    last = history.operations()[-3:]
    assert [o.outcome for o in last] == ["fail", "info", "ok"]
    assert "READONLY" in (last[0].error or "")
    with pytest.raises(AssertionError, match="twice"):
        history.ok(last[0])
    history.save(tmp_path / "history.jsonl")
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == 403 and json.loads(lines[-3])["outcome"] == "fail"


# -- event logs ---------------------------------------------------------------------------------

def append(i: int, ids: tuple[str, ...], outcome: str = "ok", result: int | None = None,
           condition: Any = None) -> Operation:
    return Operation(i, f"c{i}", "append", None, Append(ids, condition), i, outcome, result,
                     i + 1)  # type: ignore[arg-type]


def entries(*ids: str, tags: dict[str, frozenset[str]] | None = None) -> list[LogEntry]:
    return [LogEntry(p, eid, "E", (tags or {}).get(eid, frozenset()))
            for p, eid in enumerate(ids, start=1)]


def test_a_good_log_passes() -> None:
    ops = [append(0, ("a1", "a2"), result=2), append(1, ("b1",), result=3),
           append(2, ("u1",), outcome="info"), append(3, ("u2",), outcome="info"),
           append(4, ("f1",), outcome="fail"),
           append(5, ("c1",), result=5, condition=dcb_condition([((), ("order-1",))]))]
    result = check_log(ops, entries("a1", "a2", "b1", "u1", "c1"))
    assert result.valid is True, result.errors
    assert result.checked == 6


@pytest.mark.parametrize(("log_ids", "ops", "message"), [
    (("a1", "a1"), [append(0, ("a1",))], "duplicated"),
    (("b1",), [append(0, ("a1",)), append(1, ("b1",))], "is lost"),
    (("a1", "f1"), [append(0, ("a1",)), append(1, ("f1",), outcome="fail")], "failed, yet"),
    (("a1", "x"), [append(0, ("a1",))], "never appended"),
    (("a1", "b1", "a2"), [append(0, ("a1", "a2")), append(1, ("b1",))], "partial"),
    (("a1",), [append(0, ("a1", "a2"), outcome="info")], "partial"),
    (("a1", "b1"), [append(0, ("a1",), result=2), append(1, ("b1",))], "acknowledged at"),
])
def test_log_anomalies_are_caught(log_ids: tuple[str, ...], ops: list[Operation],
                                  message: str) -> None:
    result = check_log(ops, entries(*log_ids))
    assert result.valid is False
    assert any(message in e for e in result.errors), result.errors


def test_a_gap_in_positions_is_caught() -> None:
    log = [LogEntry(1, "a1"), LogEntry(3, "b1")]
    result = check_log([append(0, ("a1",)), append(1, ("b1",))], log)
    assert not result.valid and "gapless" in result.errors[0] and "[2]" in result.errors[0]


def test_two_acknowledged_appends_violating_each_others_condition_are_caught() -> None:
    """Both writers read "no order-7 event yet" and both were acknowledged: only one may."""
    tags = {"x1": frozenset({"order-7"}), "y1": frozenset({"order-7"})}
    unique = dcb_condition([(("OrderPlaced",), ("order-7",)), ((), ("other",))], after=0)
    log = [LogEntry(1, "x1", "OrderPlaced", tags["x1"]),
           LogEntry(2, "y1", "OrderPlaced", tags["y1"])]
    both = [append(0, ("x1",), condition=unique), append(1, ("y1",), condition=unique)]
    result = check_log(both, log)
    assert not result.valid and "condition is false" in result.errors[0]
    assert "#1" in result.errors[0]
    # The second one refused (fail) and absent: fine. Or its condition started later.
    ok_log = log[:1]
    assert check_log([both[0], append(1, ("y1",), outcome="fail", condition=unique)], ok_log)
    later = dcb_condition([(("OrderPlaced",), ("order-7",))], after=1)
    assert check_log([both[0], append(1, ("y1",), condition=later)], log)
    # A different type does not match the query.
    other = [LogEntry(1, "x1", "OrderShipped", tags["x1"]), log[1]]
    assert check_log(both, other)
