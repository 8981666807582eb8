"""``element_keys`` (``ListState.positions``): the engine keys of a run of list elements,
built one by one for a few and with NumPy for many (LRANGE). Both must give the same keys,
including positions whose big-endian bytes end in zeros (a raw ``V`` item keeps them; an
``S`` item would drop them) and positions on both sides of the list's start at 2**63."""

from __future__ import annotations

import struct

import pytest

from tuffdb._format.resp import LIST_START
from tuffdb.server.resp.commands.lists import MANY_POSITIONS, element_keys, span_keys

_pack = struct.Struct(">Q").pack


@pytest.mark.parametrize("head", [LIST_START - 40, LIST_START, (1 << 64) - 700, 0, 255])
@pytest.mark.parametrize("prefix", [b"\xffd" + _pack(7), b"\xffd" + _pack(0), b"x"])
def test_positions_many_and_few_agree(head: int, prefix: bytes) -> None:
    for i, j in ((0, 0), (0, 1), (5, 5 + MANY_POSITIONS - 1), (5, 5 + MANY_POSITIONS),
                 (0, 100), (3, 600)):
        expected = [prefix + _pack(p) for p in range(head + i, head + j)]
        assert element_keys(prefix, head + i, head + j) == expected


@pytest.mark.parametrize("head", [LIST_START - 40, (1 << 64) - 700, 0])
def test_pipelined_spans_give_each_span_its_keys_in_order(head: int) -> None:
    """Pipelined LRANGEs build the keys of all their spans in one NumPy pass."""
    spans = [(b"\xffd" + _pack(cid), head + lo, head + hi)
             for cid, lo, hi in ((7, 0, 100), (0, 3, 4), (7, 50, 650), (1 << 40, 0, 33))]
    expected = [prefix + _pack(p) for prefix, lo, hi in spans for p in range(lo, hi)]
    assert span_keys(spans) == expected
    assert span_keys(spans[:1]) == expected[:100]
