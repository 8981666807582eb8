"""KVStore against a dict: Hypothesis drives random API sequences, the model says what is right.

Rules come from the public API (put, put_many, delete, delete_many, expire, persist,
ttl, get, scan) plus the lifecycle steps that move data between tiers and files
(sync, compact, close-and-reopen). A tiny ``hot_bytes`` makes hot segments fill,
seal and spill every few steps, and values up to ~3x ``hot_bytes`` cross segment
and block boundaries. ``store.check() == []`` is an invariant after every step
[Bitcask bitcask_qc_fsm; sortedcontainers _check()].

Time is a test clock: ``KVStore.open(clock=...)`` takes one, the model reads the same
clock, and an ``advance`` rule moves it, so keys expire in the middle of sequences
(lazily on read, and by the background expiry) without any waiting. Clock and TTLs are
whole seconds so the store's millisecond deadlines agree with the model exactly.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tuffdb import KVStore
from tuffdb.errors import NotFoundError
from tuffdb.kv.store import KEEP_TTL
from tuffdb.testing.models import KVModel

HOT_BYTES = 4096

KEYS = st.sampled_from([
    b"a", b"ab", b"abc", b"b", b"ba", b"\x00", b"\x00\x01", b"\x7f", b"\xff", b"\xff\xff",
    b"key:" + b"x" * 200,
])
BOUNDS = st.one_of(st.none(), st.sampled_from([b"a", b"ab", b"b", b"\x00", b"\xff", b"c"]))
PREFIXES = st.sampled_from([b"", b"a", b"ab", b"\x00", b"\xff", b"k", b"z"])
VALUES = st.one_of(
    st.binary(max_size=40),
    # Big, incompressible values: larger than a hot segment now and then.
    st.tuples(st.integers(0, 3 * HOT_BYTES), st.integers(0, 2**32)).map(
        lambda t: random.Random(t[1]).randbytes(t[0])),
    # Big, compressible values.
    st.tuples(st.integers(0, 3 * HOT_BYTES), st.binary(min_size=1, max_size=3)).map(
        lambda t: (t[1] * (t[0] // len(t[1]) + 1))[: t[0]]),
)
SECONDS = st.integers(1, 200).map(float)
TTLS = st.one_of(st.none(), SECONDS)


class Clock:
    """Whole seconds since the epoch; moved only by the ``advance`` rule."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


class KVMachine(RuleBasedStateMachine):
    options: dict[str, object] = {"durability": "none", "hot_bytes": HOT_BYTES}

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tuffdb-model-"))
        self.path = self.dir / "kv"
        self.clock = Clock()
        self.model = KVModel(clock=self.clock)
        self.store = self._open()

    def _open(self) -> KVStore:
        return KVStore.open(self.path, clock=self.clock, **self.options)

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- writes ------------------------------------------------------------------------
    @rule(key=KEYS, value=VALUES, ttl=TTLS)
    def put(self, key: bytes, value: bytes, ttl: float | None) -> None:
        self.store.put(key, value, ttl=ttl)
        self.model.put(key, value, ttl)

    @rule(items=st.lists(st.tuples(KEYS, VALUES), max_size=6), ttl=TTLS)
    def put_many(self, items: list[tuple[bytes, bytes]], ttl: float | None) -> None:
        self.store.put_many(items, ttl=ttl)
        self.model.put_many(items, ttl)

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        assert self.store.delete(key) == self.model.delete(key)

    @rule(keys=st.lists(KEYS, max_size=4, unique=True))
    def delete_many(self, keys: list[bytes]) -> None:
        assert self.store.delete_many(keys) == self.model.delete_many(keys)

    @rule(ops=st.lists(st.tuples(KEYS, st.one_of(st.none(), VALUES),
                                 st.sampled_from(["plain", "keep", "ttl", "gone"]), SECONDS),
                       max_size=6))
    def write_batch(self, ops: list[tuple[bytes, bytes | None, str, float]]) -> None:
        """Puts, deletes, TTLs and KEEP_TTL rewrites in one atomic batch (later ops on a
        key win). A KEEP_TTL put is made of a key live at that point, as the RESP face
        makes them (of a key it just read); of an absent key it is a plain put."""
        batch: list[tuple[bytes, bytes | None] | tuple[bytes, bytes | None, object]] = []
        for key, value, how, seconds in ops:
            if value is None:
                batch.append((key, None))
                self.model.delete(key)
            elif how == "gone":  # a TTL of 0: deleted on arrival
                batch.append((key, value, 0.0))
                self.model.delete(key)
            elif how == "keep" and self.model.exists(key):
                batch.append((key, value, KEEP_TTL))
                deadline = self.model.deadlines.get(key)
                self.model.put(key, value, None if deadline is None
                               else deadline - self.clock())
            elif how == "ttl":
                batch.append((key, value, seconds))
                self.model.put(key, value, seconds)
            else:
                batch.append((key, value))
                self.model.put(key, value)
        self.store.write_batch(batch)

    @rule(key=KEYS, seconds=SECONDS)
    def expire(self, key: bytes, seconds: float) -> None:
        assert self.store.expire(key, seconds) == self.model.expire(key, seconds)

    @rule(key=KEYS)
    def persist(self, key: bytes) -> None:
        assert self.store.persist(key) == self.model.persist(key)

    # -- lifecycle -----------------------------------------------------------------------
    @rule()
    def sync(self) -> None:
        self.store.sync()

    @rule()
    def compact(self) -> None:
        self.store.compact()

    @rule()
    def close_and_reopen(self) -> None:
        self.store.close()
        self.store = self._open()

    @rule(mode=st.sampled_from(["always", "interval", "none"]))
    def set_durability(self, mode: str) -> None:
        """Switching modes live seals the active segment when logging turns on or off."""
        self.store.set_durability(mode)
        assert self.store.durability == mode

    @rule(seconds=st.integers(0, 150))
    def advance(self, seconds: int) -> None:
        self.clock.now += seconds

    # -- reads -----------------------------------------------------------------------------
    @rule(key=KEYS)
    def get(self, key: bytes) -> None:
        assert self.store.get(key) == self.model.get(key)
        assert self.store.exists(key) == self.model.exists(key)

    @rule(key=KEYS)
    def ttl(self, key: bytes) -> None:
        try:
            expected = self.model.ttl(key)
        except NotFoundError:
            with pytest.raises(NotFoundError):
                self.store.ttl(key)
            return
        assert self.store.ttl(key) == expected

    @rule(prefix=PREFIXES, start=BOUNDS, end=BOUNDS)
    def scan(self, prefix: bytes, start: bytes | None, end: bytes | None) -> None:
        expected = list(self.model.scan(prefix, start, end))
        assert list(self.store.scan(prefix, start, end)) == expected

    @rule()
    def everything(self) -> None:
        live = self.model.live()
        assert list(self.store.scan()) == sorted(live.items())
        assert len(self.store) == len(live)

    @invariant()
    def check_is_clean(self) -> None:
        assert self.store.check() == []


KVMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestKVModel = KVMachine.TestCase


class KVMachineAlways(KVMachine):
    """The same machine with per-write fsync (the path crash tests rely on)."""

    options: dict[str, object] = {"durability": "always", "hot_bytes": HOT_BYTES}


KVMachineAlways.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestKVModelAlways = KVMachineAlways.TestCase


class KVMachineBusyBackground(KVMachine):
    """Background work as often as it can be: one sealed segment before back-pressure,
    merges at 5% dead, and the expiry sweep every 10 ms, racing every foreground step."""

    options: dict[str, object] = {
        "durability": "interval", "interval_ms": 5, "hot_bytes": HOT_BYTES, "max_sealed": 1,
        "compaction_threshold": 0.05, "expiry_interval_s": 0.01,
    }


KVMachineBusyBackground.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestKVModelBusyBackground = KVMachineBusyBackground.TestCase
