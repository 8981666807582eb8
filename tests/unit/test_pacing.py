"""storage/pacing.py: the paced throttle against a simulated disk on a simulated clock.

The disk model: the stores' writers fsync once per millisecond; an fsync takes BASE_S
while the copy is idle and SLOW times that while a copy piece is being written (at
DISK_BPS). Over a period the writers' mean fsync is then BASE_S * (1 + (SLOW - 1) * duty),
duty being the share of time spent writing: within the 1.2x bound up to a known rate.
"""

from __future__ import annotations

import pytest

from tuffdb.storage import pacing
from tuffdb.storage.pacing import PacedThrottle, SyncLatency

BASE_S = 0.0002
DISK_BPS = 2e9
PIECE = 4 << 20


class Sim:
    def __init__(self, slow: float, writers: bool = True) -> None:
        self.t = 1000.0
        self.slow = slow
        self.writers = writers
        self.syncs = SyncLatency()
        self._carry = 0.0
        self.written = 0
        self.busy = 0.0  # seconds spent writing
        self.log: list[tuple[float, float]] = []  # (time, latency) of each fsync

    def clock(self) -> float:
        return self.t

    def _advance(self, dt: float, latency: float) -> None:
        if self.writers:
            self._carry += dt * 1000
            while self._carry >= 1:
                self._carry -= 1
                self.syncs.observe(latency)
                self.log.append((self.t, latency))
        self.t += dt

    def sleep(self, dt: float) -> None:
        self._advance(dt, BASE_S)

    def write(self, n: int) -> None:
        dt = n / DISK_BPS
        self.busy += dt
        self.written += n
        self._advance(dt, BASE_S * self.slow)


def copy(sim: Sim, throttle: PacedThrottle, seconds: float) -> None:
    end = sim.t + seconds
    while sim.t < end:
        throttle.take(PIECE)
        sim.write(PIECE)


def paced(sim: Sim, cap: float | None = None) -> PacedThrottle:
    return PacedThrottle(cap, syncs=sim.syncs, clock=sim.clock, sleep=sim.sleep)


def test_without_writers_the_rate_grows_to_the_cap_and_never_probes_again() -> None:
    sim = Sim(slow=10.0, writers=False)
    t = paced(sim, cap=900e6)
    copy(sim, t, 10.0)
    assert t.rate == 900e6
    assert t.probes == 1  # the first period only: there was nobody to measure
    assert t.cuts == 0
    assert sim.written / 10.0 > 0.8 * 900e6


def test_writers_stay_within_the_bound_and_the_copy_takes_what_is_left() -> None:
    # Writing slows an fsync 3x: the bound (1.2x) allows a duty of 0.1, i.e. 200 MB/s.
    sim = Sim(slow=3.0)
    t = paced(sim)
    copy(sim, t, 5.0)  # converge
    start_t, start_written, start_busy = sim.t, sim.written, sim.busy
    first = len(sim.log)
    copy(sim, t, 30.0)
    mean = sum(lat for _, lat in sim.log[first:]) / (len(sim.log) - first)
    rate = (sim.written - start_written) / (sim.t - start_t)
    assert mean <= BASE_S * (1 + pacing.BOUND) * 1.1  # the writers' latency: about the bound
    assert rate >= 0.5 * 200e6  # not collapsed to the floor: most of what the bound allows
    assert rate <= 1.3 * 200e6
    assert t.cuts > 0
    assert t.probes >= 30 / ((pacing.PROBE_EVERY + 1) * pacing.PERIOD_S) * 0.8
    assert sim.busy - start_busy > 0


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


@pytest.mark.parametrize("slow", [1.5, 5.0])
def test_the_baseline_is_the_writers_alone(slow: float) -> None:
    sim = Sim(slow=slow)
    t = paced(sim)
    copy(sim, t, 3.0)
    assert t.baseline == pytest.approx(BASE_S, rel=0.05)
