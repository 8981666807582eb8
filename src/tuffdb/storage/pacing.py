"""A background copy that gives way to the stores' commits.

An online backup shares the disk with the stores' durable writers: each byte it writes
makes the log fsyncs beside it slower, and a durable load is as fast as its fsyncs. A
fixed rate cannot say what that costs (the same MB/s is harmless on one disk and halves
the writers on another). :class:`PacedThrottle` measures it instead:

* every log fsync of a store reports its duration to :data:`SYNCS` (``LogFile.sync``, and
  the AIO rounds of ``server/loop_rounds.py``); the copy itself never does;
* the copy runs in periods of :data:`PERIOD_S`, each summed up by the mean of its fsyncs
  without their slowest :data:`TRIM` (a host's rare stall of tens of milliseconds would
  otherwise decide a period alone: measured, one period in twenty without any copy);
* every :data:`PROBE_EVERY` periods, while fsyncs are happening, it pauses for one period
  (a *probe*): the fsyncs' latency then is the writers' latency without the copy; the
  baseline is the median of the last :data:`PROBES_KEPT` probes;
* after each copying period it compares the period's latency with the baseline: above
  ``BOUND`` times it, the rate is cut (x :data:`DOWN`, not under
  :data:`FLOOR_BYTES_PER_S`, so a backup always progresses); otherwise it grows (x
  :data:`UP`, up to the cap, if any). Periods with too few fsyncs to measure (no durable
  writers) grow it too: nobody is there to slow down.

So the writers' commits stay within about ``BOUND`` times their latency alone, and the
copy takes what the disk has left. Increase and decrease are multiplicative: a load that
comes and goes is followed within a second or two.

Why 1.5x (measured on the 2-core host of docs/benchmarks/backup.md, a server under a
durable YCSB A load, 0.25 s periods): the fsyncs' mean was 1.1x its latency alone
beside a copy at 100 MB/s, 1.5x at 200 MB/s and 3.4x at 400 MB/s, and the load's writes
0.9-1.0x, 0.85-0.9x and 0.5x of alone: the load is not bound by its fsyncs alone, so
1.5x latency cost it about a tenth of its writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tuffdb.storage.copy import Throttle

#: Length of a measuring period, and of a probe's pause.
PERIOD_S = 0.25
#: Copying periods between probes (a probe costs the copy 1 / (PROBE_EVERY + 1) of its time,
#: only while durable writers are active).
PROBE_EVERY = 11
PROBES_KEPT = 3
#: The writers' fsyncs may take this many times their latency in the probes.
BOUND = 1.5
#: The share of a period's slowest fsyncs left out of its latency (at least one).
TRIM = 0.01
#: Fewer fsyncs than this in a period say nothing about the writers.
MIN_SAMPLES = 20
#: Fsync durations kept (a period under a durable load holds a few hundred).
RING = 8192
START_BYTES_PER_S = 128e6
FLOOR_BYTES_PER_S = 16e6
#: With no cap, the rate stops growing here (far beyond any disk: unthrottled in effect).
CEILING_BYTES_PER_S = 64e9
UP = 1.25
DOWN = 0.7


class SyncLatency:
    """The stores' log fsyncs: how many so far, and the durations of the last
    :data:`RING`. Readers take what came since a count of their own. Updated under the
    GIL without a lock: a race can lose or overwrite one sample, which a period of
    hundreds does not notice."""

    def __init__(self) -> None:
        self.count = 0
        self._ring = [0.0] * RING

    def observe(self, seconds: float) -> None:
        self._ring[self.count % RING] = seconds
        self.count += 1

    def since(self, count: int) -> list[float]:
        """The durations observed after the first ``count`` (at most the last RING)."""
        end = self.count
        n = min(end - count, RING)
        if n <= 0:
            return []
        lo, hi = (end - n) % RING, end % RING
        ring = self._ring
        return ring[lo:hi] if lo < hi else ring[lo:] + ring[:hi]


def trimmed_mean(samples: list[float]) -> float:
    """The mean without the slowest :data:`TRIM` share (at least one sample)."""
    keep = sorted(samples)[:len(samples) - max(1, int(len(samples) * TRIM))]
    return sum(keep) / len(keep)


#: Every store's log fsyncs, process-wide.
SYNCS = SyncLatency()


class PacedThrottle(Throttle):
    """A :class:`Throttle` whose rate follows the stores' fsync latency (the module
    docstring); ``cap_bytes_per_s`` bounds it from above (None: no bound but the disk)."""

    def __init__(self, cap_bytes_per_s: float | None = None, *, syncs: SyncLatency = SYNCS,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cap = float(cap_bytes_per_s) if cap_bytes_per_s else CEILING_BYTES_PER_S
        super().__init__(min(self.cap, START_BYTES_PER_S), clock=clock, sleep=sleep)
        self._syncs = syncs
        self._pace_mu = threading.Lock()
        self.baseline: float | None = None  # the writers' fsync seconds alone
        self._probed: list[float] = []  # the last PROBES_KEPT probes' latencies
        self.probes = 0
        self.cuts = 0
        self._periods = 0
        self._probing = True  # the first period measures the writers alone
        self._hold(clock())
        self._mark(clock())

    def _mark(self, now: float) -> None:
        self._since = now
        self._count0 = self._syncs.count

    def _hold(self, now: float) -> None:
        """Pause every copying thread for one period (a probe)."""
        with self._mu:
            self._next = max(self._next, now + PERIOD_S)
        self.probes += 1

    def take(self, nbytes: int) -> None:
        now = self._clock()
        if now - self._since >= PERIOD_S:
            with self._pace_mu:
                if now - self._since >= PERIOD_S:
                    self._adjust(now)
        super().take(nbytes)

    def _adjust(self, now: float) -> None:
        samples = self._syncs.since(self._count0)
        mean = trimmed_mean(samples) if len(samples) >= MIN_SAMPLES else None
        if self._probing:
            self._probing = False
            if mean is not None:
                self._probed = [*self._probed[1 - PROBES_KEPT:], mean]
                self.baseline = sorted(self._probed)[len(self._probed) // 2]
        else:
            self._periods += 1
            if mean is not None and self.baseline is not None \
                    and mean > self.baseline * BOUND:
                self.rate = max(FLOOR_BYTES_PER_S, self.rate * DOWN)
                self.cuts += 1
            else:
                self.rate = min(self.cap, self.rate * UP)
            # Probe again while there are writers to measure: periodically, and at once
            # when writers appear with no baseline yet.
            if mean is not None and (self.baseline is None or self._periods >= PROBE_EVERY):
                self._periods = 0
                self._probing = True
                self._hold(now)
        self._mark(now)
