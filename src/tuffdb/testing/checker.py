"""Checkers for cluster tests: a history recorder, a linearizability search, a log checker.

The way Jepsen tests databases, in a few hundred lines of our own (no maintained Python
checker exists; Knossos, Elle and Porcupine are Clojure and Go):

* :class:`History` records every operation a test's clients run: its invocation, then its
  outcome: ``ok`` (acknowledged, with its result), ``fail`` (definitely not applied: the
  server refused it before doing anything, e.g. ``-READONLY``) or ``info`` (unknown: a
  timeout, a dropped connection; it may or may not have taken effect). Thread-safe;
  timestamps are ``time.monotonic_ns()`` (one system-wide clock on Linux).
* :func:`check_register` / :func:`check_registers`: is each key's history linearizable as a
  register with ``read``, ``write`` and compare-and-set (``cas``)? A Wing & Gong search with
  Lowe's memoisation of visited (linearized set, register state) pairs, as Porcupine does.
  Two reductions of our own keep unknown outcomes cheap: a configuration is skipped when
  one with the same acknowledged ops and state but fewer unknown ops spent was visited,
  and every value no read returns and no compare-and-set expects is one state. With
  unique written values (write a counter, as Jepsen advises), 300 operations of 8
  overlapping clients, 10 % of them unknown, check in about 0.2 s either way (a verdict
  of invalid included); with 3 distinct values, a few seconds.
* :func:`check_log`: an event log against the appends that were recorded: every
  acknowledged append present exactly once and whole, nothing that definitely failed
  present, positions gapless, and no acknowledged conditional append whose condition is
  false against the final log (the events before it).

Each returns a :class:`CheckResult`: ``valid`` (True, False, or None when the search gave
up past its bound) and ``errors`` naming each anomaly in words.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Append",
    "CheckResult",
    "History",
    "LogEntry",
    "Operation",
    "check_log",
    "check_register",
    "check_registers",
    "dcb_condition",
]

Outcome = Literal["ok", "fail", "info"]
MAX_STATES = 2_000_000  # visited (set, state) pairs before the register search gives up


@dataclass
class Operation:
    """One client operation: what was asked (``f``, ``key``, ``value``) and what came back.

    Register ops: ``f="read"`` (``result`` the value read, None for absent), ``"write"``
    (``value``), ``"cas"`` (``value=(expected, new)``, ``result`` True when it applied,
    False when the comparison failed: both are ``ok``). Log ops: ``f="append"`` with
    ``value=Append(...)`` and ``result`` the acknowledged position.
    """

    id: int
    process: Hashable
    f: str
    key: Hashable
    value: Any
    invoke_ns: int
    outcome: Outcome | None = None  # None: still running (checked as info)
    result: Any = None
    complete_ns: int | None = None
    error: str | None = None


class History:
    """A thread-safe record of operations, in invocation order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[Operation] = []

    def invoke(self, process: Hashable, f: str, key: Hashable = None,
               value: Any = None) -> Operation:
        """Record that ``process`` starts ``f(key, value)``; complete it with ok/fail/info."""
        with self._lock:
            op = Operation(len(self._ops), process, f, key, value, time.monotonic_ns())
            self._ops.append(op)
        return op

    def _complete(self, op: Operation, outcome: Outcome, result: Any, error: object) -> None:
        now = time.monotonic_ns()
        with self._lock:
            assert op.outcome is None, f"operation {op.id} completed twice"
            op.complete_ns, op.outcome, op.result = now, outcome, result
            op.error = None if error is None else str(error)

    def ok(self, op: Operation, result: Any = None) -> None:
        """The operation was acknowledged, returning ``result``."""
        self._complete(op, "ok", result, None)

    def fail(self, op: Operation, error: object = None) -> None:
        """The operation definitely did not take effect."""
        self._complete(op, "fail", None, error)

    def info(self, op: Operation, error: object = None) -> None:
        """The outcome is unknown: it may or may not have taken effect."""
        self._complete(op, "info", None, error)

    @contextmanager
    def record(self, process: Hashable, f: str, key: Hashable = None, value: Any = None, *,
               definite: tuple[type[BaseException], ...] = ()) -> Iterator[Operation]:
        """``with history.record(p, "write", k, v) as op: ...; history.ok(op, result)``.

        An exception leaving the block completes the op as ``fail`` when it is one of
        ``definite`` (errors that prove nothing was applied), else ``info``; it propagates.
        A block that ends without completing the op records it as ``ok`` with no result.
        """
        op = self.invoke(process, f, key, value)
        try:
            yield op
        except definite as exc:
            self.fail(op, repr(exc))
            raise
        except BaseException as exc:
            self.info(op, repr(exc))
            raise
        if op.outcome is None:
            self.ok(op)

    def operations(self) -> list[Operation]:
        """A snapshot of every operation so far."""
        with self._lock:
            return list(self._ops)

    def save(self, path: Path) -> None:
        """One JSON object per line (``repr`` for values JSON cannot hold), for post-mortems."""
        with path.open("w") as out:
            for op in self.operations():
                out.write(json.dumps(asdict(op), default=repr) + "\n")


@dataclass
class CheckResult:
    """``valid``: True, False, or None when the search stopped at its bound (undecided)."""

    valid: bool | None
    errors: list[str] = field(default_factory=list)
    checked: int = 0  # operations taken into account

    def __bool__(self) -> bool:
        return self.valid is True


# -- registers: Wing & Gong search with Lowe's memoisation -------------------------------

_NEVER = 1 << 62  # the return time of an op whose outcome is unknown: after everything


class _Unseen:
    """The state after writing a value no read returns and no compare-and-set expects:
    every such value behaves the same from then on, so they share one state."""

    def __repr__(self) -> str:
        return "<a value never read>"


_UNSEEN = _Unseen()


def _register_model(kept: list[Operation], initial: Any) -> list[tuple[str, Any, Any]]:
    """Each op as (kind, operand, written state): ``("read", value, -)``,
    ``("write", -, state)``, ``("cas", expected, state)`` (applied) or
    ``("cas-lost", expected, -)`` (acknowledged as not applied)."""
    referenced = {initial}
    for op in kept:
        if op.f == "read":
            referenced.add(op.result)
        elif op.f == "cas":
            referenced.add(op.value[0])
        elif op.f not in {"write", "delete"}:
            raise ValueError(f"not a register operation: {op.f!r}")

    def canon(value: Any) -> Any:
        return value if value in referenced else _UNSEEN

    model: list[tuple[str, Any, Any]] = []
    for op in kept:
        if op.f == "read":
            model.append(("read", op.result, None))
        elif op.f in {"write", "delete"}:
            model.append(("write", None, canon(op.value if op.f == "write" else None)))
        elif op.outcome != "ok" or op.result:  # applied (an info cas counts only if it did)
            model.append(("cas", op.value[0], canon(op.value[1])))
        else:
            model.append(("cas-lost", op.value[0], None))
    return model


def _step(state: Any, kind: str, operand: Any, written: Any) -> tuple[bool, Any]:
    """The register model: may the op take effect in ``state``, and what state follows?"""
    if kind == "read":
        return operand == state, state
    if kind == "write":
        return True, written
    if kind == "cas":
        return state == operand, written
    return state != operand, state  # cas-lost


def check_register(ops: Iterable[Operation], initial: Any = None, *,
                   max_states: int = MAX_STATES) -> CheckResult:
    """Is this history of one key linearizable as a read/write/cas register?

    ``fail`` ops are left out (they did not happen); ``info`` ops may take effect at any
    moment after their invocation, or never; reads without a known result say nothing
    and are left out.
    """
    kept = [op for op in ops
            if op.outcome != "fail" and not (op.f == "read" and op.outcome != "ok")]
    n = len(kept)
    # Entries 1..2n: a call and a return per op, in time order (calls first on ties, so
    # touching intervals count as concurrent). 0 and 2n+1 are the list's sentinels.
    events = sorted(
        [(op.invoke_ns, 0, i) for i, op in enumerate(kept)]
        + [(op.complete_ns if op.outcome == "ok" and op.complete_ns is not None else _NEVER,
            1, i) for i, op in enumerate(kept)])
    head, tail = 0, 2 * n + 1
    is_call = [False] * (2 * n + 2)
    op_of = [0] * (2 * n + 2)
    match = [0] * (2 * n + 2)
    call_entry = [0] * n
    for entry, (_t, kind, i) in enumerate(events, start=1):
        is_call[entry], op_of[entry] = kind == 0, i
        if kind == 0:
            call_entry[i] = entry
        else:
            match[call_entry[i]] = entry
    nxt = list(range(1, 2 * n + 2)) + [tail]
    prv = [head, *range(2 * n + 1)]
    acknowledged = [op.outcome == "ok" for op in kept]
    remaining = sum(acknowledged)
    model = _register_model(kept, initial)
    # Unknown writes of values never read are interchangeable: only one is tried at a time.
    blank = [not acknowledged[i] and m[0] == "write" and m[2] is _UNSEEN
             for i, m in enumerate(model)]

    def window() -> list[int]:
        """The calls that may be linearized next: those before the first pending return.
        Acknowledged ops are tried first, unknown ones after, so each configuration is
        first reached with as few unknown ops spent as possible (see ``_first_visit``)."""
        calls, later, entry, blank_seen = [], [], nxt[head], False
        while entry != tail and is_call[entry]:
            i = op_of[entry]
            if acknowledged[i]:
                calls.append(entry)
            elif not (blank[i] and blank_seen):
                later.append(entry)
                blank_seen = blank_seen or blank[i]
            entry = nxt[entry]
        return calls + later

    state, linearized = initial, 0
    # One frame per linearized op: the window it was picked from, where to resume in it,
    # and the state before it.
    stack: list[tuple[list[int], int, Any, int]] = []
    # Visited configurations: (acknowledged ops linearized, state) -> the sets of unknown
    # ops linearized with them. A configuration is skipped when one with the same
    # acknowledged set and state, and a subset of its unknown ops, was visited: leaving an
    # unknown op out can only add options (it may still happen later, or never).
    seen: dict[tuple[int, Any], list[int]] = {}
    n_seen = 0
    ok_mask = sum(1 << i for i, op in enumerate(kept) if op.outcome == "ok")
    best = 0
    candidates, at = window(), 0
    while remaining:
        if at < len(candidates):
            entry = candidates[at]
            at += 1
            i = op_of[entry]
            allowed, new_state = _step(state, *model[i])
            bits = linearized | (1 << i)
            if allowed and _first_visit(seen, bits & ok_mask, new_state, bits & ~ok_mask):
                n_seen += 1
                if n_seen > max_states:
                    return CheckResult(None, [f"gave up after {max_states} states"], n)
                stack.append((candidates, at, state, entry))
                state, linearized = new_state, bits
                ret = match[entry]  # lift the call and its return out of the list
                nxt[prv[entry]], prv[nxt[entry]] = nxt[entry], prv[entry]
                nxt[prv[ret]], prv[nxt[ret]] = nxt[ret], prv[ret]
                remaining -= acknowledged[i]
                best = max(best, bits.bit_count())
                candidates, at = window(), 0
            continue
        # Every candidate tried: undo the last choice and try its next sibling.
        if not stack:
            return CheckResult(False, [_explain(kept, best, initial)], n)
        candidates, at, state, entry = stack.pop()
        i = op_of[entry]
        linearized &= ~(1 << i)
        remaining += acknowledged[i]
        ret = match[entry]  # put the return, then the call, back where they were
        nxt[prv[ret]] = ret
        prv[nxt[ret]] = ret
        nxt[prv[entry]] = entry
        prv[nxt[entry]] = entry
    return CheckResult(True, [], n)


def _first_visit(seen: dict[tuple[int, Any], list[int]], acked: int, state: Any,
                 unknown: int) -> bool:
    """Record the configuration; False when it is dominated by one already visited."""
    visited = seen.setdefault((acked, state), [])
    if any(prev & ~unknown == 0 for prev in visited):  # prev is a subset of unknown
        return False
    visited.append(unknown)
    return True


def _explain(kept: list[Operation], best: int, initial: Any) -> str:
    ordered = sorted(kept, key=lambda op: op.invoke_ns)
    lines = [f"not linearizable (at most {best} of {len(kept)} operations could be ordered; "
             f"initial value {initial!r}); operations in invocation order:"]
    lines += [f"  #{op.id} {op.process}: {op.f}({op.value!r}) -> {op.outcome} {op.result!r}"
              for op in ordered[:40]]
    return "\n".join(lines)


def check_registers(ops: Iterable[Operation], initial: Any = None, *,
                    f: Iterable[str] = ("read", "write", "cas", "delete"),
                    max_states: int = MAX_STATES) -> dict[Hashable, CheckResult]:
    """:func:`check_register` per key, over the register operations of a history."""
    kinds = set(f)
    by_key: dict[Hashable, list[Operation]] = defaultdict(list)
    for op in ops:
        if op.f in kinds:
            by_key[op.key].append(op)
    return {key: check_register(key_ops, initial, max_states=max_states)
            for key, key_ops in by_key.items()}


# -- event logs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LogEntry:
    """One event of a final log: its ``position`` and the ``id`` the test gave it, with the
    ``type`` and ``tags`` a DCB query matches on."""

    position: int
    id: Hashable
    type: str = ""
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Append:
    """What an append op asks: its events' ids, in order, and optionally a condition:
    a predicate over the log entries before the batch, True when the append is allowed."""

    ids: tuple[Hashable, ...]
    condition: Callable[[Sequence[LogEntry]], bool] | None = None


def dcb_condition(items: Sequence[tuple[Iterable[str], Iterable[str]]],
                  after: int | None = None) -> Callable[[Sequence[LogEntry]], bool]:
    """A DCB append condition: fail if any event after ``after`` matches the query.

    ``items`` are the query's ``(types, tags)``: an event matches an item when its type is
    one of ``types`` (any, if empty) and it carries every one of ``tags``.
    """
    query = [(frozenset(types), frozenset(tags)) for types, tags in items]

    def allowed(before: Sequence[LogEntry]) -> bool:
        return not any((not types or e.type in types) and tags <= e.tags
                       for e in before if after is None or e.position > after
                       for types, tags in query)

    return allowed


def check_log(ops: Iterable[Operation], log: Sequence[LogEntry], *,
              first_position: int = 1) -> CheckResult:
    """Check a final event log against the recorded ``append`` operations.

    Positions must run from ``first_position`` without gaps; every event id must appear at
    most once and belong to some recorded append; an acknowledged append must be present
    whole, in order, contiguous (and at its acknowledged position, when one was
    returned); a failed append must be absent; an append of unknown outcome may be present
    (whole) or absent; an acknowledged conditional append's condition must hold against
    the events before it.
    """
    appends = [op for op in ops if op.f == "append"]
    errors: list[str] = []
    positions = [e.position for e in log]
    expected = list(range(first_position, first_position + len(log)))
    if positions != expected:
        gaps = sorted(set(expected) - set(positions))[:10]
        errors.append(f"positions are not gapless from {first_position}: "
                      f"missing {gaps}, got {positions[:20]}...")
    counts = Counter(e.id for e in log)
    errors += [f"event {eid!r} duplicated: present {n} times" for eid, n in counts.items()
               if n > 1]
    index = {e.id: i for i, e in enumerate(log)}
    owner = {eid: op for op in appends for eid in op.value.ids}
    errors += [f"event {e.id!r} at {e.position} was never appended" for e in log
               if e.id not in owner]
    for op in appends:
        append: Append = op.value
        present = [eid for eid in append.ids if eid in index]
        what = f"append #{op.id} by {op.process} ({op.outcome})"
        if op.outcome == "fail":
            if present:
                errors.append(f"{what} failed, yet its events {present} are in the log")
            continue
        if not present:
            if op.outcome == "ok":
                errors.append(f"{what} was acknowledged and is lost: {list(append.ids)} "
                              "missing")
            continue
        slots = [index[eid] for eid in present]
        whole = len(present) == len(append.ids)
        if not whole or slots != list(range(slots[0], slots[0] + len(slots))):
            errors.append(f"{what} is partial or out of order: {len(present)} of "
                          f"{len(append.ids)} events, at indexes {slots}")
            continue
        last = log[slots[-1]].position
        if op.outcome == "ok" and op.result is not None and op.result != last:
            errors.append(f"{what} was acknowledged at position {op.result}, "
                          f"but its last event is at {last}")
        if op.outcome == "ok" and append.condition is not None \
                and not append.condition(log[:slots[0]]):
            errors.append(f"{what} was acknowledged although its condition is false "
                          f"against the {slots[0]} events before it")
    return CheckResult(not errors, errors, len(appends))
