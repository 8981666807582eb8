"""storage/pacing.py: the paced throttle against a simulated disk on a simulated clock.

The disk model: the stores' writers fsync once per millisecond; an fsync takes BASE_S
while the copy is idle and ``slow`` times that while a copy piece is being written (at
DISK_BPS). Over a period the writers' mean fsync is then BASE_S * (1 + (slow - 1) * duty),
duty being the share of time spent writing, so the bound allows a known copy rate:
DISK_BPS * (BOUND - 1) / (slow - 1).
"""

from __future__ import annotations

import pytest

from tuffdb.storage import pacing
from tuffdb.storage.pacing import RING, PacedThrottle, SyncLatency, trimmed_mean

BASE_S = 0.0002
DISK_BPS = 2e9
PIECE = 4 << 20


class Sim:
    def __init__(self, slow: float, writers: bool = True, stall_every: int = 0) -> None:
        self.t = 1000.0
        self.slow = slow
        self.writers = writers
        self.stall_every = stall_every  # one 50 ms fsync per this many (a host's hiccup)
        self.syncs = SyncLatency()
        self._carry = 0.0
        self.written = 0
        self.log: list[float] = []  # every fsync's latency, in order

    def clock(self) -> float:
        return self.t

    def _advance(self, dt: float, latency: float) -> None:
        if self.writers:
            self._carry += dt * 1000
            while self._carry >= 1:
                self._carry -= 1
                lat = latency
                if self.stall_every and len(self.log) % self.stall_every == 0:
                    lat = 0.05
                self.syncs.observe(lat)
                self.log.append(lat)
        self.t += dt

    def sleep(self, dt: float) -> None:
        self._advance(dt, BASE_S)

    def write(self, n: int) -> None:
        self.written += n
        self._advance(n / DISK_BPS, BASE_S * self.slow)


def copy(sim: Sim, throttle: PacedThrottle, seconds: float) -> None:
    end = sim.t + seconds
    while sim.t < end:
        throttle.take(PIECE)
        sim.write(PIECE)


def paced(sim: Sim, cap: float | None = None) -> PacedThrottle:
    return PacedThrottle(cap, syncs=sim.syncs, clock=sim.clock, sleep=sim.sleep)


def allowed(slow: float) -> float:
    return DISK_BPS * (pacing.BOUND - 1) / (slow - 1)


def test_without_writers_the_rate_grows_to_the_cap_and_never_probes_again() -> None:
    sim = Sim(slow=10.0, writers=False)
    t = paced(sim, cap=900e6)
    copy(sim, t, 10.0)
    assert t.rate == 900e6
    assert t.probes == 1  # the first period only: there was nobody to measure
    assert t.cuts == 0
    assert sim.written / 10.0 > 0.8 * 900e6


@pytest.mark.parametrize("slow", [3.0, 6.0])
def test_writers_stay_within_the_bound_and_the_copy_takes_what_is_left(slow: float) -> None:
    sim = Sim(slow=slow)
    t = paced(sim)
    copy(sim, t, 5.0)  # converge
    start_t, start_written, first = sim.t, sim.written, len(sim.log)
    copy(sim, t, 30.0)
    mean = sum(sim.log[first:]) / (len(sim.log) - first)
    rate = (sim.written - start_written) / (sim.t - start_t)
    assert mean <= BASE_S * pacing.BOUND * 1.05  # the writers' latency: about the bound
    assert 0.5 * allowed(slow) <= rate <= 1.3 * allowed(slow)  # most of what it allows
    assert t.cuts > 0
    assert t.probes >= 30 / ((pacing.PROBE_EVERY + 1) * pacing.PERIOD_S) * 0.8
    assert t.baseline == pytest.approx(BASE_S, rel=0.05)  # the probes: the writers alone


def test_a_rare_stall_does_not_decide_a_period() -> None:
    # The copy costs the writers nothing; one fsync in 150 stalls for 50 ms (about one
    # per period: alone it would raise a period's mean 1.3x over the bound's 1.5x).
    sim = Sim(slow=1.0, stall_every=150)
    t = paced(sim, cap=1e9)
    copy(sim, t, 10.0)
    assert t.cuts == 0
    assert t.rate == 1e9


def test_the_copy_never_stops_below_the_floor() -> None:
    sim = Sim(slow=1000.0)  # any copying at all breaks the bound
    t = paced(sim)
    copy(sim, t, 20.0)
    assert t.rate >= pacing.FLOOR_BYTES_PER_S
    assert t.rate < 2 * pacing.FLOOR_BYTES_PER_S
    assert sim.written >= 0.5 * pacing.FLOOR_BYTES_PER_S * 20.0


def test_a_cap_bounds_the_paced_rate() -> None:
    sim = Sim(slow=1.0)  # the copy costs the writers nothing: only the cap holds it
    t = paced(sim, cap=300e6)
    copy(sim, t, 10.0)
    assert t.rate == 300e6
    assert t.cuts == 0
    assert sim.written / 10.0 <= 300e6 * 1.05


def test_sync_latency_keeps_the_last_ring_of_samples() -> None:
    s = SyncLatency()
    assert s.since(0) == []
    for i in range(RING + 10):
        s.observe(float(i))
    assert s.since(RING + 5) == [float(i) for i in range(RING + 5, RING + 10)]
    assert s.since(0) == [float(i) for i in range(10, RING + 10)]  # wrapped: the last RING
    assert s.since(RING + 10) == []
    assert trimmed_mean([1.0] * 99 + [1000.0]) == 1.0
    assert trimmed_mean([1.0, 3.0]) == 1.0
