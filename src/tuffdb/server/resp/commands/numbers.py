"""INCRBYFLOAT / HINCRBYFLOAT arithmetic, matching Redis's long double and ``%.17Lf``.

Redis adds in ``long double`` (80-bit on x86-64) and prints with ``%.17Lf`` before
trimming trailing zeros, so ``0.1 + 0.2`` replies ``0.3``. numpy's ``longdouble`` is
the same C type, and ``format_float_positional`` with a fixed precision rounds exactly
as printf does; plain Python floats would reply ``0.30000000000000004``.
"""

from __future__ import annotations

import re

import numpy as np

from tuffdb.server.resp.table import NOT_FLOAT, CommandError

_FLOAT_RE = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity)\Z", re.IGNORECASE)


def parse_long_double(raw: bytes, message: str = NOT_FLOAT) -> np.longdouble:
    if len(raw) > 5000 or not _FLOAT_RE.match(raw):
        raise CommandError(message)
    return np.longdouble(raw.decode())


def add_and_format(current: bytes | None, increment: bytes,
                   current_message: str = NOT_FLOAT) -> bytes:
    inc = parse_long_double(increment)
    base = np.longdouble(0) if current is None else parse_long_double(current, current_message)
    with np.errstate(all="ignore"):
        total = base + inc
    if not np.isfinite(total):
        raise CommandError("ERR increment would produce NaN or Infinity")
    text = np.format_float_positional(total, precision=17, unique=False, fractional=True,
                                      trim="-")
    return b"0" if text == "-0" else text.encode()
