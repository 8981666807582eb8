"""A cluster leader's UmaDB face keeps one round waiting for its followers at a time
(``service.ROUNDS_IN_FLIGHT``): appends arriving meanwhile gather into the next round,
committed when the round in flight is settled, or ``linger_s`` after the first of them.

The real gRPC face over loopback, called through grpcio (not the ``umadb`` client, which
retries an UNAVAILABLE append by itself), a real event store; the cluster's sequencer is
replaced by hooks the test holds (``set_replication_hooks``, the seam the node itself
installs), so the test decides when a round is confirmed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from tuffdb.errors import NotEnoughReplicasError
from tuffdb.events import umadb_v1_pb2 as pb
from tuffdb.server.umadb.server import UmaDBFace

WAIT_S = 30.0
Confirm = Callable[[BaseException | None], None]


class Leader:
    def __init__(self, face: UmaDBFace, loop: asyncio.AbstractEventLoop) -> None:
        self.face = face
        self.loop = loop
        self.rounds: list[list[tuple[str, int, bytes]]] = []
        self.held: list[Confirm] = []
        self.cv = threading.Condition()
        self.pool = ThreadPoolExecutor(4)
        face.store.set_replication_hooks(self._tap, self._confirm)

    def _tap(self, parts: list[tuple[str, int, bytes]]) -> None:
        with self.cv:
            self.rounds.append(parts)

    def _confirm(self, settle: Confirm) -> None:
        with self.cv:
            self.held.append(settle)
            self.cv.notify_all()

    def wait_held(self, n: int) -> None:
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.held) >= n, WAIT_S), self.held

    def wait_gathered(self, n: int) -> None:
        """Until ``n`` appends wait in the face's next pass (polled on the loop)."""
        deadline = time.monotonic() + WAIT_S
        while asyncio.run_coroutine_threadsafe(self._pass_len(), self.loop).result() < n:
            assert time.monotonic() < deadline, "the appends never reached the face"

    async def _pass_len(self) -> int:
        svc = self.face._svc  # noqa: SLF001
        assert svc is not None
        return len(svc._pass)  # noqa: SLF001

    def round_in_flight(self, linger_s: float) -> Future[int]:
        """Set the face's linger, then append one event whose round waits in flight."""
        svc = self.face._svc  # noqa: SLF001
        assert svc is not None
        svc.linger_s = linger_s
        first = self.append("first")
        self.wait_held(1)
        return first

    def append(self, tag: str) -> Future[int]:
        body = pb.AppendRequest(events=[pb.Event(event_type="t", data=b"x", tags=[tag])])
        return self.pool.submit(self._append, body.SerializeToString())

    def _append(self, body: bytes) -> int:
        with grpc.insecure_channel(f"127.0.0.1:{self.face.bound_port}") as channel:
            reply = channel.unary_unary("/umadb.v1.DCB/Append")(body, timeout=WAIT_S)
        return pb.AppendResponse.FromString(reply).position


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    face = UmaDBFace(tmp_path / "events", port=0)
    asyncio.run_coroutine_threadsafe(face.start(), loop).result(WAIT_S)
    lead = Leader(face, loop)
    try:
        yield lead
    finally:
        for settle in list(lead.held):  # whatever a failing test left waiting
            settle(None)
        lead.pool.shutdown(wait=True)
        asyncio.run_coroutine_threadsafe(face.stop(), loop).result(WAIT_S)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(WAIT_S)


def test_appends_arriving_while_a_round_waits_go_out_together_once_it_is_confirmed(
        leader: Leader) -> None:
    a = leader.round_in_flight(linger_s=600.0)  # only the confirmation frees them here
    b, c = leader.append("b"), leader.append("c")
    leader.wait_gathered(2)
    assert len(leader.rounds) == 1  # b and c wait: one round is in flight
    assert not a.done()
    leader.held[0](None)  # the followers confirm a's round
    assert a.result(WAIT_S) == 1
    leader.wait_held(2)
    assert len(leader.rounds) == 2  # b and c in one round
    assert not b.done() and not c.done()
    leader.held[1](None)
    assert sorted([b.result(WAIT_S), c.result(WAIT_S)]) == [2, 3]


def test_appends_wait_for_a_round_in_flight_at_most_the_linger(leader: Leader) -> None:
    a = leader.round_in_flight(linger_s=0.05)
    b = leader.append("b")
    leader.wait_held(2)  # b's round went out while a's still waits
    assert len(leader.rounds) == 2
    assert not a.done() and not b.done()
    leader.held[0](None)
    leader.held[1](None)
    assert (a.result(WAIT_S), b.result(WAIT_S)) == (1, 2)


def test_a_refused_round_frees_the_window(leader: Leader) -> None:
    a = leader.round_in_flight(linger_s=600.0)
    b = leader.append("b")
    leader.wait_gathered(1)
    leader.held[0](NotEnoughReplicasError("no follower confirmed it in time"))
    with pytest.raises(grpc.RpcError) as refused:
        a.result(WAIT_S)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    # Refused, a's round asks again to be published by a later confirmation (held[1]);
    # b's round went out once a's was refused (held[2]).
    leader.wait_held(3)
    assert len(leader.rounds) == 2
    for settle in leader.held[1:]:
        settle(None)
    assert b.result(WAIT_S) == 2  # after a's event, written though never acknowledged
