"""``element_keys`` (``ListState.positions``): the engine keys of a run of list elements,
built one by one for a few and with NumPy for many (LRANGE). Both must give the same keys,
including positions whose big-endian bytes end in zeros (a raw ``V`` item keeps them; an
``S`` item would drop them) and positions on both sides of the list's start at 2**63."""

from __future__ import annotations

import struct

import pytest

from tuffdb._format.resp import LIST_START
from tuffdb.server.resp.commands.lists import MANY_POSITIONS, element_keys

_pack = struct.Struct(">Q").pack


@pytest.mark.parametrize("head", [LIST_START - 40, LIST_START, (1 << 64) - 700, 0, 255])
@pytest.mark.parametrize("prefix", [b"\xffd" + _pack(7), b"\xffd" + _pack(0), b"x"])
def test_positions_many_and_few_agree(head: int, prefix: bytes) -> None:
    for i, j in ((0, 0), (0, 1), (5, 5 + MANY_POSITIONS - 1), (5, 5 + MANY_POSITIONS),
                 (0, 100), (3, 600)):
        expected = [prefix + _pack(p) for p in range(head + i, head + j)]
        assert element_keys(prefix, head + i, head + j) == expected
