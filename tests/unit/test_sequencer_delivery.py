"""How a replicated round's writers are called back (cluster/sequencer.py,
``Sequencer._deliver``): by the thread that learns the outcome, in LSN order, never
before enough followers acknowledged it under a valid lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tuffdb.cluster.sequencer import FollowerState, Lease, Sequencer
from tuffdb.errors import NotEnoughReplicasError, NotLeaderError

WAIT_S = 30.0  # a bound on waiting for an event that must come, not a timing assertion


Make = Callable[..., Sequencer]


class Outcomes:
    """A round's callback that records each outcome and sets ``called``."""

    def __init__(self) -> None:
        self.got: list[BaseException | None] = []
        self.called = threading.Event()

    def __call__(self, exc: BaseException | None) -> None:
        self.got.append(exc)
        self.called.set()


@pytest.fixture
def sequencer() -> Iterator[Make]:
    """Sequencers of a leader whose rounds need follower n2's acknowledgement; closed after
    the test."""
    made: list[Sequencer] = []

    def make(timeout_s: float = 60.0) -> Sequencer:
        lease = Lease(ttl_s=3600, margin_s=1)
        lease.renewed(time.monotonic())
        seq = Sequencer(epoch=7, last_lsn=0, lease=lease, required=lambda: 1,
                        timeout_s=timeout_s)
        seq.followers["n2"] = FollowerState("n2", connected=True)
        seq.set_counted(frozenset({"n2"}))
        made.append(seq)
        return seq

    yield make
    for seq in made:
        seq.close()


def test_a_round_already_acknowledged_is_called_back_at_registration(sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    tap([("log/a", 0, b"x")])
    seq.ack("n2", 1)  # the follower took it while the leader fsynced
    got: list[tuple[BaseException | None, int]] = []
    later(lambda exc: got.append((exc, threading.get_ident())))
    assert got == [(None, threading.get_ident())]  # here, before later() returned
    assert seq.confirmed == 1


def test_an_acknowledgement_calls_back_every_round_it_covers_in_order_on_its_thread(
        sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    got: list[tuple[int, BaseException | None, int]] = []
    for lsn in (1, 2, 3):
        tap([("log/a", lsn, b"x")])
        later(lambda exc, lsn=lsn: got.append((lsn, exc, threading.get_ident())))
    assert got == []  # nothing acknowledged yet
    seq.ack("n2", 2)
    acker = threading.Thread(target=seq.ack, args=("n2", 3))
    assert [g[:2] for g in got] == [(1, None), (2, None)]
    acker.start()
    acker.join(WAIT_S)
    assert [g[:2] for g in got] == [(1, None), (2, None), (3, None)]
    assert got[2][2] == acker.ident  # the reader of the acknowledgement called it back


def test_a_round_nobody_acknowledges_is_refused_at_its_deadline(
        sequencer: Make) -> None:
    seq = sequencer(timeout_s=0.05)
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    first = Outcomes()
    tap([("log/a", 0, b"x")])
    later(first)
    assert first.called.wait(WAIT_S)  # the confirmer delivers it once the deadline passed
    assert isinstance(first.got[0], NotEnoughReplicasError)
    assert seq.confirmed == 0


def test_a_lapsed_lease_refuses_a_round_even_when_followers_acknowledged_it(
        sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    tap([("log/a", 0, b"x")])
    seq.lease.revoke()
    seq.ack("n2", 1)
    got: list[BaseException | None] = []
    later(got.append)
    assert len(got) == 1 and isinstance(got[0], NotLeaderError)
    assert seq.confirmed == 0


def test_a_callback_that_registers_again_is_called_back_after_it_in_order(sequencer: Make) -> None:
    """The event store re-registers a refused round's publication from its callback: the
    delivery under way takes the new registration in its next look, without deadlock."""
    seq = sequencer()
    tap, later = seq.tap("events"), seq.confirm_later("events")
    got: list[str] = []
    tap([("log/a", 0, b"x")])

    def again(exc: BaseException | None) -> None:
        got.append(f"again {exc}")

    def first(exc: BaseException | None) -> None:
        got.append(f"first {exc}")
        later(again)  # registered while this delivery runs

    later(first)
    seq.ack("n2", 1)
    assert got == ["first None", "again None"]


def test_rounds_registered_and_acknowledged_from_racing_threads_are_called_back_in_order(
        sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    n = 2000
    got: list[int] = []
    done = threading.Event()

    def committer() -> None:
        for lsn in range(1, n + 1):
            tap([("log/a", lsn, b"x")])

            def called(exc: BaseException | None, lsn: int = lsn) -> None:
                assert exc is None
                got.append(lsn)
                if lsn == n:
                    done.set()

            later(called)

    def acker() -> None:
        acked = 0
        while acked < n and not seq.closed:  # (closed: the test is over, failed or not)
            acked = max(acked, seq.last_lsn)  # acknowledge whatever was tapped by now
            seq.ack("n2", acked)

    threads = [threading.Thread(target=committer), threading.Thread(target=acker)]
    for t in threads:
        t.start()
    assert done.wait(WAIT_S)
    for t in threads:
        t.join(WAIT_S)
    assert got == list(range(1, n + 1))


def test_close_refuses_what_is_still_waiting_and_the_confirmer_ends(sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    callback = Outcomes()
    tap([("log/a", 0, b"x")])
    later(callback)
    seq.close()
    assert callback.called.wait(WAIT_S)
    assert isinstance(callback.got[0], NotLeaderError)
    confirmer = seq._confirmer  # noqa: SLF001
    assert confirmer is not None
    confirmer.join(WAIT_S)
    assert not confirmer.is_alive()


def test_a_callback_that_raises_loses_no_other_round_and_delivery_goes_on(sequencer: Make) -> None:
    seq = sequencer()
    tap, later = seq.tap("kv"), seq.confirm_later("kv")
    got: list[int] = []

    def broken(exc: BaseException | None) -> None:
        raise RuntimeError("a broken callback")

    for lsn in (1, 2, 3):
        tap([("log/a", lsn, b"x")])
        later(broken if lsn == 2 else lambda exc, lsn=lsn: got.append(lsn))
    with pytest.raises(RuntimeError, match="broken"):
        seq.ack("n2", 3)  # raised to the thread that delivered, after the others
    assert got == [1, 3]
    tap([("log/a", 4, b"x")])
    seq.ack("n2", 4)
    later(lambda exc: got.append(4))
    assert got == [1, 3, 4]
