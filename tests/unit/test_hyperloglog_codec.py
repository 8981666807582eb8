"""The HyperLogLog sparse codec (NumPy and run-list paths) against a plain reference.

The reference below walks the registers one run at a time, as the sparse format is
specified (docs/format/resp.md, Redis's hyperloglog.c); every path of the module must
give the same bytes, the same registers, and the same error on a damaged body.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tuffdb.server.resp.commands import hyperloglog as hll
from tuffdb.server.resp.table import CommandError


def reference_body(regs: np.ndarray) -> bytes | None:
    if int(regs.max()) > hll.SPARSE_MAX_VALUE:
        return None
    out = bytearray()
    i = 0
    while i < hll.REGISTERS:
        j = i
        while j < hll.REGISTERS and regs[j] == regs[i]:
            j += 1
        run, value = j - i, int(regs[i])
        if value == 0:
            if run > 64:  # noqa: PLR2004
                out += bytes((0x40 | ((run - 1) >> 8), (run - 1) & 0xFF))
            else:
                out.append(run - 1)
        else:
            while run:
                take = min(run, 4)
                out.append(0x80 | ((value - 1) << 2) | (take - 1))
                run -= take
        i = j
    return bytes(out) if len(out) <= hll.SPARSE_MAX_BYTES else None


def reference_registers(body: bytes) -> np.ndarray:
    regs = np.zeros(hll.REGISTERS, dtype=np.uint8)
    pos = i = 0
    while i < len(body):
        op = body[i]
        if op & 0x80:
            run, value, i = (op & 3) + 1, ((op >> 2) & 0x1F) + 1, i + 1
        elif op & 0x40:
            if i + 1 >= len(body):
                raise CommandError(hll.CORRUPT)
            run, value, i = (((op & 0x3F) << 8) | body[i + 1]) + 1, 0, i + 2
        else:
            run, value, i = (op & 0x3F) + 1, 0, i + 1
        regs[pos : pos + run] = value
        pos += run
        if pos > hll.REGISTERS:
            raise CommandError(hll.CORRUPT)
    if pos != hll.REGISTERS:
        raise CommandError(hll.CORRUPT)
    return regs


def random_registers(rng: random.Random) -> np.ndarray:
    regs = np.zeros(hll.REGISTERS, dtype=np.uint8)
    values = rng.choice([[1, 2, 3], [1, 2, 3, 4, 5, 32], [1, 33, 51]])
    for _ in range(rng.choice([0, 1, 5, 40, 200, 1000, 4000])):
        regs[rng.randrange(hll.REGISTERS)] = rng.choice(values)
    if rng.random() < 0.3:  # a long run of one value (VAL ops split in fours)
        a = rng.randrange(hll.REGISTERS)
        regs[a : a + rng.randrange(1, 400)] = rng.randrange(0, 6)
    return regs


def outcome(fn, body: bytes) -> tuple[str, bytes]:  # noqa: ANN001
    try:
        return "ok", fn(body).tobytes()
    except CommandError as exc:
        return "error", str(exc).encode()


@pytest.mark.parametrize("seed", range(4))
def test_sparse_bodies_match_the_reference_both_ways(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(120):
        regs = random_registers(rng)
        body = hll._sparse_body(regs)  # noqa: SLF001
        assert body == reference_body(regs)
        if body is None:
            continue
        assert (hll._sparse_registers(body) == regs).all()  # noqa: SLF001
        # Damaged bodies: the same registers or the same error as the reference.
        for _ in range(4):
            bad = bytearray(body)
            cut = rng.randrange(len(bad))
            if rng.random() < 0.5:
                bad[cut] = rng.randrange(256)
            else:
                del bad[cut:]
            assert outcome(hll._sparse_registers, bytes(bad)) == \
                outcome(reference_registers, bytes(bad))  # noqa: SLF001


@pytest.mark.parametrize("seed", range(2))
def test_pfadd_on_the_runs_matches_the_registers_path(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(60):
        regs = np.zeros(hll.REGISTERS, dtype=np.uint8)
        body = hll.EMPTY_SPARSE
        while body is not None and len(body) <= hll.SHORT_SPARSE:
            elements = [b"e%d" % rng.randrange(10**9) for _ in range(rng.choice([0, 1, 3, 20]))]
            before = regs.copy()
            for element in elements:
                index, value = hll.register_of(element)
                regs[index] = max(regs[index], value)
            changed, new = hll._sparse_add(body, elements)  # noqa: SLF001
            assert changed == bool((regs != before).any())
            assert new == reference_body(regs)
            body = new
