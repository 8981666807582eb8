"""LCS: the longest common subsequence of two strings (LEN, IDX, MINMATCHLEN,
WITHMATCHLEN), as Redis 7.0 computes and reports it.

The table of LCS lengths is filled a row at a time by NumPy (a row is the running
maximum of the row above and its diagonal matches), then walked back from the end as
Redis walks it, so the string and the match ranges (reported last match first) are
Redis's.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuffdb._format.resp import TAG_STRING
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.keyspace import stored
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


def _string(c: Conn, key: bytes) -> bytes:
    raw = c.db.get(stored(key))
    if raw is None:
        return b""
    if raw[0] != TAG_STRING:
        raise CommandError("ERR The specified keys must contain string values")
    return bytes(raw[1:])


def table(a: bytes, b: bytes) -> np.ndarray:
    """LCS[i, j]: the length of the LCS of a[:i] and b[:j]."""
    lcs = np.zeros((len(a) + 1, len(b) + 1), dtype=np.uint32)
    bb = np.frombuffer(b, dtype=np.uint8)
    for i in range(1, len(a) + 1):
        prev = lcs[i - 1]
        match = np.zeros(len(b) + 1, dtype=np.uint32)
        match[1:] = np.where(bb == a[i - 1], prev[:-1] + 1, 0)
        np.maximum.accumulate(np.maximum(prev, match), out=lcs[i])
    return lcs


@command("lcs", -3, "readonly", (1, 2, 1), group="string", since="7.0.0")
def lcs(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912
    """The longest common subsequence of two strings, its length, or its match ranges."""
    s1, s2 = _string(c, a[1]), _string(c, a[2])  # the keys' types before the options (Redis)
    get_len = get_idx = with_len = False
    min_len = 0
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if opt == b"idx":
            get_idx = True
        elif opt == b"len":
            get_len = True
        elif opt == b"withmatchlen":
            with_len = True
        elif opt == b"minmatchlen" and i + 1 < len(a):
            min_len = max(to_int(a[i + 1]), 0)
            i += 1
        else:
            raise CommandError(SYNTAX)
        i += 1
    if get_idx and get_len:
        raise CommandError("ERR If you want both the length and indexes, please just use IDX.")
    t = table(s1, s2)
    total = int(t[len(s1), len(s2)])
    if get_len:
        return reply.integer(total)
    out = bytearray(total)
    idx = total
    ranges: list[bytes] = []
    unset = len(s1)  # Redis marks "no range open" with the first string's length
    a_start = a_end = b_start = b_end = 0
    a_start = unset
    x, y = len(s1), len(s2)
    while x > 0 and y > 0:
        emit = False
        if s1[x - 1] == s2[y - 1]:
            out[idx - 1] = s1[x - 1]
            if a_start == unset:
                a_start = a_end = x - 1
                b_start = b_end = y - 1
            elif a_start == x and b_start == y:  # the range extends backwards
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            x -= 1
            y -= 1
        else:
            if t[x - 1, y] > t[x, y - 1]:
                x -= 1
            else:
                y -= 1
            if a_start != unset:
                emit = True
        if emit:
            length = a_end - a_start + 1
            if min_len == 0 or length >= min_len:
                item = [reply.array([reply.integer(a_start), reply.integer(a_end)]),
                        reply.array([reply.integer(b_start), reply.integer(b_end)])]
                if with_len:
                    item.append(reply.integer(length))
                ranges.append(reply.array(item))
            a_start = unset
    if get_idx:
        return c.enc.map([(reply.bulk(b"matches"), reply.array(ranges)),
                          (reply.bulk(b"len"), reply.integer(total))])
    return reply.bulk(bytes(out))
