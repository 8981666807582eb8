"""Differential test: one request sequence against tuffdb and against the UmaDB 0.7.8 server
from the ``umadb`` wheel, through the same client; positions, heads, read results, tracking
and error classes must agree. Deliberate divergences (docs/design/events.md) are not sent:
an empty append with a failing condition (crashes UmaDB 0.7.8) and unparsable uuids (the
client cannot send them)."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import umadb

from tuffdb.testing.etcd import free_port

UMADB = Path(sys.executable).with_name("umadb")


def _wait(proc: subprocess.Popen[str], needle: str, streams: list[Any]) -> dict[str, str]:
    seen: dict[str, str] = {}
    ready = threading.Event()

    def watch(stream: Any) -> None:
        for line in stream:
            if "listening on" in line:
                seen["port"] = line.rsplit(":", 1)[1].strip()
            if needle in line:
                ready.set()
        ready.set()  # EOF: the process exited

    for s in streams:
        threading.Thread(target=watch, args=(s,), daemon=True).start()
    ready.wait()
    assert proc.poll() is None, f"server exited with {proc.returncode}"
    return seen


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[umadb.Client, umadb.Client]]:
    ours = subprocess.Popen(
        [sys.executable, "-m", "tuffdb.server.umadb", "--port", "0",
         "--data-dir", str(tmp_path / "tuffdb")], stderr=subprocess.PIPE, text=True)
    port = free_port()
    theirs = subprocess.Popen(
        [str(UMADB), "--listen", f"127.0.0.1:{port}", "--db-path", str(tmp_path / "uma.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = _wait(ours, "UmaDB started", [ours.stderr])
        _wait(theirs, "UmaDB started", [theirs.stdout, theirs.stderr])
        yield (umadb.Client(url=f"http://127.0.0.1:{seen['port']}"),
               umadb.Client(url=f"http://127.0.0.1:{port}"))
    finally:
        for p in (ours, theirs):
            p.terminate()
            p.wait(30)


def outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 (the class is what we compare)
        return ("error", type(exc).__name__)


def read(c: umadb.Client, **kw: Any) -> Any:
    r = c.read(**kw)
    events = [(e.position, e.event.event_type, e.event.data, e.event.tags, e.event.uuid,
               e.event.metadata, (e.tracking_info.source, e.tracking_info.position)
               if e.tracking_info else None) for e in r]
    return events, r.head()


def Q(*items: tuple[list[str], list[str]]) -> umadb.Query:  # noqa: N802
    return umadb.Query(items=[umadb.QueryItem(types=t, tags=g) for t, g in items])


def C(query: umadb.Query, after: int | None = None) -> umadb.AppendCondition:  # noqa: N802
    return umadb.AppendCondition(fail_if_events_match=query, after=after)


def test_same_sequence_same_answers(servers: tuple[umadb.Client, umadb.Client]) -> None:
    u1, u2 = uuid.uuid4(), uuid.uuid4()
    E = umadb.Event  # noqa: N806
    ops: list[Callable[[umadb.Client], Any]] = [
        lambda c: c.head(),
        lambda c: read(c),
        lambda c: read(c, limit=0),
        lambda c: c.append([E(event_type="A", data=b"1", tags=["x", "y"])]),
        lambda c: c.append([E(event_type="B", data=b"2", tags=["x"], metadata={"k": "v", "a": "b"}),
                            E(event_type="C", data=b"", tags=[])]),
        lambda c: c.append([E(event_type="A", data=b"3")], condition=C(Q(([], ["x"])), 0)),
        lambda c: c.append([E(event_type="A", data=b"3")], condition=C(Q(([], ["x"])), 2)),
        lambda c: c.append([E(event_type="D", data=b"4", tags=["acc"], uuid=u1),
                            E(event_type="D", data=b"5", tags=["acc"], uuid=u2)],
                           condition=C(Q(([], ["acc"])), 3)),
        lambda c: c.append([E(event_type="D", data=b"4", tags=["acc"], uuid=u1),
                            E(event_type="D", data=b"5", tags=["acc"], uuid=u2)],
                           condition=C(Q(([], ["acc"])), 3)),
        lambda c: c.append([E(event_type="D", data=b"4", tags=["acc"], uuid=u1)],
                           condition=C(Q(([], ["acc"])), 3)),
        lambda c: c.append([E(event_type="E", data=b"6")], condition=C(umadb.Query(items=[]))),
        lambda c: c.append([E(event_type="E", data=b"6")], condition=C(umadb.Query(items=[]), 5)),
        lambda c: c.append([E(event_type="T", data=b"7")], tracking_info=umadb.TrackingInfo("up", 5)),
        lambda c: c.append([E(event_type="T", data=b"8")], tracking_info=umadb.TrackingInfo("up", 5)),
        lambda c: c.append([], tracking_info=umadb.TrackingInfo("up", 9)),
        lambda c: c.get_tracking_info("up"),
        lambda c: c.get_tracking_info("down"),
        lambda c: c.append([E(event_type="T", data=b"9")], tracking_info=umadb.TrackingInfo("s" * 256, 1)),
        lambda c: c.append([E(event_type="F", data=b"x", tags=["t" * 70_000])]),
        lambda c: c.head(),
        lambda c: read(c),
        lambda c: read(c, start=3),
        lambda c: read(c, start=3, backwards=True),
        lambda c: read(c, backwards=True, limit=2),
        lambda c: read(c, limit=3),
        lambda c: read(c, query=Q(([], ["nope"]))),
        lambda c: read(c, query=Q(([], ["nope"])), limit=2),
        lambda c: read(c, query=Q((["A"], []))),
        lambda c: read(c, query=Q(([], ["x", "y"]))),
        lambda c: read(c, query=Q((["B"], ["x"]), (["D"], []))),
        lambda c: read(c, query=umadb.Query(items=[umadb.QueryItem()])),
        lambda c: read(c, query=Q((["D"], ["acc"])), start=5, limit=1),
        lambda c: [next(s).position for s in [c.subscribe(after=4)] for _ in range(3)],
        lambda c: [next(s).position for s in [c.subscribe(query=Q(([], ["acc"])))] for _ in range(2)],
    ]
    ours, theirs = servers
    for i, op in enumerate(ops):
        a, b = outcome(lambda: op(ours)), outcome(lambda: op(theirs))
        assert a == b, f"op {i}: {a} != {b}"
