"""A background copy that gives way to the stores' commits.

An online backup shares the disk with the stores' durable writers: each byte it writes
makes the log fsyncs beside it slower, and a durable load is as fast as its fsyncs. A
fixed rate cannot say what that costs (the same MB/s is harmless on one disk and halves
the writers on another). :class:`PacedThrottle` measures it instead:

* every log fsync of a store reports its duration to :data:`SYNCS` (``LogFile.sync``, and
  the AIO rounds of ``server/loop_rounds.py``); the copy itself never does;
* the copy runs in periods of :data:`PERIOD_S`. Every :data:`PROBE_EVERY` periods, while
  fsyncs are happening, it pauses for one period (a *probe*): the fsyncs' mean latency
  then is the writers' latency without the copy (the baseline);
* after each copying period it compares that period's mean fsync latency with the
  baseline: above ``1 + BOUND`` times it, the rate is cut (x :data:`DOWN`, not under
  :data:`FLOOR_BYTES_PER_S`, so a backup always progresses); otherwise it grows (x
  :data:`UP`, up to the cap, if any). Periods with too few fsyncs to measure (no durable
  writers) grow it too: nobody is there to slow down.

So the writers' commits stay within about ``1 + BOUND`` of their latency alone, and the
copy takes what the disk has left. Increase and decrease are multiplicative, as TCP's
congestion control is additive-increase, multiplicative-decrease: a load that comes and
goes is followed within a second.
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
PROBE_EVERY = 7
#: The writers' fsyncs may be this much slower than in the last probe (0.2: 1.2x).
BOUND = 0.2
#: Fewer fsyncs than this in a period say nothing about the writers.
MIN_SAMPLES = 20
START_BYTES_PER_S = 128e6
FLOOR_BYTES_PER_S = 16e6
#: With no cap, the rate stops growing here (far beyond any disk: unthrottled in effect).
CEILING_BYTES_PER_S = 64e9
UP = 1.25
DOWN = 0.7


class SyncLatency:
    """Running totals of the stores' log fsyncs: how many, and their seconds. Readers take
    differences over their own windows. Updated under the GIL without a lock: a race can
    lose one sample, which a mean over hundreds does not notice."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0

    def observe(self, seconds: float) -> None:
        self.seconds += seconds
        self.count += 1


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
        self.baseline: float | None = None  # mean fsync seconds in the last probe
        self.probes = 0
        self.cuts = 0
        self._periods = 0
        self._probing = True  # the first period measures the writers alone
        self._hold(clock())
        self._mark(clock())

    def _mark(self, now: float) -> None:
        self._since = now
        self._count0 = self._syncs.count
        self._seconds0 = self._syncs.seconds

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
        n = self._syncs.count - self._count0
        mean = (self._syncs.seconds - self._seconds0) / n if n >= MIN_SAMPLES else None
        if self._probing:
            self._probing = False
            self.baseline = mean
        else:
            self._periods += 1
            if mean is not None and self.baseline is not None \
                    and mean > self.baseline * (1 + BOUND):
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
