"""eventsourcing 9.5.6's DCBRecorderTestCase over the wire: a thin DCBRecorder adapter on the
real ``umadb`` client (spec section 13: ``after`` -> ``start = after + 1``, head from
``ReadResponse.head()``), pointed at our server in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import umadb
from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBReadResponse,
    DCBRecorder,
    DCBSequencedEvent,
    DCBSubscription,
)
from eventsourcing.dcb.tests import DCBRecorderTestCase
from eventsourcing.persistence import IntegrityError


def _q(query: DCBQuery | None) -> umadb.Query | None:
    if query is None:
        return None
    return umadb.Query(items=[umadb.QueryItem(types=i.types, tags=i.tags) for i in query.items])


def _se(e: Any) -> DCBSequencedEvent:
    return DCBSequencedEvent(DCBEvent(e.event.event_type, e.event.data, e.event.tags), e.position)


class _Read(DCBReadResponse):
    def __init__(self, resp: Any) -> None:
        self._resp = resp
        self._it = iter(resp)

    @property
    def head(self) -> int | None:
        return self._resp.head()

    def __next__(self) -> DCBSequencedEvent:
        return _se(next(self._it))


class _Sub(DCBSubscription["UmaDBClientRecorder"]):
    def __init__(self, rec: UmaDBClientRecorder, query: DCBQuery | None, after: int | None) -> None:
        super().__init__(rec, query, after)
        self._sub = rec.client.subscribe(query=_q(query), after=after)

    def stop(self) -> None:
        super().stop()
        self._sub.cancel()

    def __next__(self) -> DCBSequencedEvent:
        return _se(next(self._sub))


class UmaDBClientRecorder(DCBRecorder):
    def __init__(self, client: umadb.Client) -> None:
        self.client = client

    def read(self, query: DCBQuery | None = None, *, after: int | None = None,
             limit: int | None = None) -> DCBReadResponse:
        start = None if after is None else after + 1
        return _Read(self.client.read(query=_q(query), start=start, limit=limit))

    def append(self, events: Sequence[DCBEvent], condition: DCBAppendCondition | None = None) -> int:
        cond = None
        if condition is not None:
            cond = umadb.AppendCondition(
                fail_if_events_match=_q(condition.fail_if_events_match), after=condition.after)
        try:
            return self.client.append(
                [umadb.Event(event_type=e.type, data=e.data, tags=e.tags) for e in events],
                condition=cond)
        except umadb.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc

    def subscribe(self, query: DCBQuery | None = None, *, after: int | None = None) -> _Sub:
        return _Sub(self, query, after)


class TestDCBRecorderOverUmaDBWire(DCBRecorderTestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuffdb.server.umadb", "--port", "0",
             "--data-dir", str(Path(self._tmp.name) / "events")],
            stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stderr is not None
        port = 0
        for line in self.proc.stderr:
            if "listening on" in line:
                port = int(line.rsplit(":", 1)[1])
            if "UmaDB started" in line:
                break
        self.client = umadb.Client(url=f"http://127.0.0.1:{port}")

    def tearDown(self) -> None:
        self.client.close()
        self.proc.terminate()
        assert self.proc.wait(30) == 0
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        self._tmp.cleanup()

    def test_append_read(self) -> None:
        self._test_append_read(UmaDBClientRecorder(self.client))

    def test_append_subscribe(self) -> None:
        self._test_append_subscribe(UmaDBClientRecorder(self.client))
