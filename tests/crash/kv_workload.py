"""The deterministic write workload shared by the crash child and the parent test.

Thread ``t`` of round ``r`` performs ops ``0, 1, 2, ...``; op ``i`` is a put, a delete
or a ``put_many`` batch on that thread's own keys, fully determined by ``(r, t, i)``,
so the parent can recompute what any prefix of a thread's ops leaves behind without
the child sending values over the pipe. (Not collected by pytest: no test_ prefix.)
"""

from __future__ import annotations

import random

KEYS_PER_THREAD = 24


def key(r: int, t: int, k: int) -> bytes:
    return f"r{r:02d}:t{t}:k{k:02d}".encode()


def namespace(r: int) -> bytes:
    return f"r{r:02d}:".encode()


TTL_S = 6 * 3600.0  # long enough never to expire during a test


Effect = list[tuple[bytes, bytes | None]]


def op(r: int, t: int, i: int, max_value: int) -> tuple[Effect, float | None]:
    """The effect of op ``i``: (key, value) pairs with ``None`` for a delete, and the TTL
    the op sets on every key it puts (``None``: no TTL, which also clears an older one)."""
    rng = random.Random(f"{r}/{t}/{i}")
    roll = rng.random()
    if roll < 0.15:
        return [(key(r, t, rng.randrange(KEYS_PER_THREAD)), None)], None
    count = 3 if roll < 0.3 else 1
    ks = rng.sample(range(KEYS_PER_THREAD), count)
    ttl = TTL_S if rng.random() < 0.25 else None
    out: Effect = []
    for j, k in enumerate(ks):
        size = rng.choice((0, 16, 200, rng.randrange(max_value + 1)))
        out.append((key(r, t, k), f"{r}:{t}:{i}:{j}|".encode() + rng.randbytes(size)))
    return out, ttl


def state_after(r: int, t: int, last: int, max_value: int) -> dict[bytes, tuple[bytes, bool]]:
    """Thread ``t``'s keys after its ops ``0..last`` (``last = -1``: nothing written), as
    key -> (value, has a TTL)."""
    state: dict[bytes, tuple[bytes, bool]] = {}
    for i in range(last + 1):
        effect, ttl = op(r, t, i, max_value)
        for k, v in effect:
            if v is None:
                state.pop(k, None)
            else:
                state[k] = (v, ttl is not None)
    return state
