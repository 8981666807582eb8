"""Process-wide metrics in Prometheus text format.

Counters and histograms are plain Python objects updated without locks: an update
is a few bytecodes under the GIL, so a lost increment under heavy contention is
possible but rare. They are for operators, never for correctness decisions.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

# Latency buckets in seconds: 10 us .. 10 s, roughly x2.5 per step.
LATENCY_BUCKETS_S = (
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)


class Counter:
    __slots__ = ("help", "name", "value")

    def __init__(self, name: str, help_: str) -> None:
        self.name = name
        self.help = help_
        self.value: float = 0

    def inc(self, n: float = 1) -> None:
        self.value += n

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        yield f"{self.name} {self.value}"


class Gauge(Counter):
    __slots__ = ("function",)

    def __init__(self, name: str, help_: str) -> None:
        super().__init__(name, help_)
        #: When set, read at every render instead of ``value`` (a gauge that is always
        #: current, e.g. an age that grows while nothing happens).
        self.function: Callable[[], float] | None = None

    def set(self, v: float) -> None:
        self.value = v

    def set_function(self, fn: Callable[[], float] | None) -> None:
        self.function = fn

    def render(self) -> Iterable[str]:
        fn = self.function
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} gauge"
        yield f"{self.name} {self.value if fn is None else fn()}"


class Histogram:
    __slots__ = ("bounds", "counts", "help", "name", "sum")

    def __init__(self, name: str, help_: str, bounds: tuple[float, ...]) -> None:
        self.name = name
        self.help = help_
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v

    @property
    def count(self) -> int:
        return sum(self.counts)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        acc = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            acc += c
            yield f'{self.name}_bucket{{le="{bound:g}"}} {acc}'
        acc += self.counts[-1]
        yield f'{self.name}_bucket{{le="+Inf"}} {acc}'
        yield f"{self.name}_sum {self.sum}"
        yield f"{self.name}_count {acc}"


class Registry:
    def __init__(self) -> None:
        self._metrics: dict[str, Counter | Histogram] = {}

    def counter(self, name: str, help_: str) -> Counter:
        return self._get(name, lambda: Counter(name, help_))  # type: ignore[return-value]

    def gauge(self, name: str, help_: str) -> Gauge:
        return self._get(name, lambda: Gauge(name, help_))  # type: ignore[return-value]

    def histogram(
        self, name: str, help_: str, bounds: tuple[float, ...] = LATENCY_BUCKETS_S
    ) -> Histogram:
        return self._get(name, lambda: Histogram(name, help_, bounds))  # type: ignore[return-value]

    def _get(self, name: str, make: object) -> Counter | Histogram:
        m = self._metrics.get(name)
        if m is None:
            m = make()  # type: ignore[operator]
            self._metrics[name] = m
        return m

    def render(self) -> str:
        lines: list[str] = []
        for m in self._metrics.values():
            lines.extend(m.render())
        return "\n".join(lines) + "\n"


REGISTRY = Registry()

# Storage core
LOG_WRITES = REGISTRY.counter("tuffdb_log_writes_total", "write() calls issued by group-commit writers")
LOG_BYTES = REGISTRY.counter("tuffdb_log_bytes_total", "bytes appended to logs")
FSYNCS = REGISTRY.counter("tuffdb_fsyncs_total", "fsync/fdatasync calls on data files")
GROUP_SIZE = REGISTRY.histogram(
    "tuffdb_group_commit_records", "records per group commit", SIZE_BUCKETS
)
FSYNC_SECONDS = REGISTRY.histogram("tuffdb_fsync_seconds", "fsync latency")
# KV engine
KV_PUTS = REGISTRY.counter("tuffdb_kv_puts_total", "KV records written (puts and deletes)")
KV_GETS = REGISTRY.counter("tuffdb_kv_gets_total", "KV cold-tier block loads")
KV_SPILLS = REGISTRY.counter("tuffdb_kv_spilled_segments_total", "hot segments spilled to cold")
KV_SPILL_BYTES = REGISTRY.counter("tuffdb_kv_spilled_bytes_total", "raw bytes spilled to cold")
KV_SPILL_SECONDS = REGISTRY.histogram("tuffdb_kv_spill_seconds", "time to spill one segment")
KV_COMPACTIONS = REGISTRY.counter("tuffdb_kv_compactions_total", "cold segment merges")
KV_COMPACTED_BYTES = REGISTRY.counter(
    "tuffdb_kv_compaction_reclaimed_bytes_total", "bytes reclaimed by compaction"
)
KV_SEALED_PENDING = REGISTRY.gauge("tuffdb_kv_sealed_pending", "sealed hot segments awaiting spill")
KV_DURABLE_WAIT_SECONDS = REGISTRY.histogram(
    "tuffdb_kv_durable_write_seconds", "latency of durable (always) KV writes"
)
# Documents face
EKODB_READS_HELD = REGISTRY.counter(
    "tuffdb_ekodb_reads_held_total",
    "ekoDB replies held until the writes they may show are durable (durable_operations)",
)
