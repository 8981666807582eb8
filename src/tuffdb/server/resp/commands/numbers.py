"""INCRBYFLOAT / HINCRBYFLOAT arithmetic, matching Redis's long double and ``%.17Lf``.

Redis adds in ``long double`` (80-bit on x86-64) and prints with ``%.17Lf`` before
trimming trailing zeros, so ``0.1 + 0.2`` replies ``0.3``. numpy's ``longdouble`` is
the same C type, and ``format_float_positional`` with a fixed precision rounds exactly
as printf does; plain Python floats would reply ``0.30000000000000004``.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from tuffdb.server.resp.table import NOT_FLOAT, CommandError

_FLOAT_RE = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity)\Z", re.IGNORECASE)


_HEX_RE = re.compile(
    rb"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?[0-9]+))?\Z")


def parse_long_double(raw: bytes, message: str = NOT_FLOAT) -> np.longdouble:
    """What ``strtold`` reads from all of ``raw`` (Redis's string2ld): decimal, ``inf``,
    or C99 hexadecimal (``0x1p3`` is 8); an overflow, or an underflow to zero, is refused
    (strtold's ERANGE)."""
    if len(raw) > 5000:  # noqa: PLR2004 - Redis's MAX_LONG_DOUBLE_CHARS
        raise CommandError(message)
    if _FLOAT_RE.match(raw):
        if b"e" in raw or b"E" in raw:  # an exponent: may overflow (numpy warns)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                value = np.longdouble(raw.decode())
            nonzero = raw.lower().split(b"e")[0].strip(b"+-0.") != b""
        else:
            value = np.longdouble(raw.decode())
            nonzero = False  # no exponent: zero only when written as zero
    else:
        value, nonzero = _hex_long_double(raw, message)
    if (np.isinf(value) and b"inf" not in raw.lower()) or (value == 0 and nonzero):
        raise CommandError(message)
    return value


def _hex_long_double(raw: bytes, message: str) -> tuple[np.longdouble, bool]:
    """A hexadecimal float, exact up to 64 significant bits (a long double's mantissa),
    and whether its digits are not all zero."""
    m = _HEX_RE.match(raw)
    if m is None or not (m.group(2) or m.group(3)):
        raise CommandError(message)
    whole, frac = m.group(2), m.group(3) or b""
    mantissa = int(whole + frac, 16) if whole + frac else 0
    exponent = int(m.group(4) or 0) - 4 * len(frac)
    with np.errstate(all="ignore"):
        value = np.ldexp(np.longdouble(mantissa), max(min(exponent, 20000), -20000))
    return (-value if m.group(1) == b"-" else value), mantissa != 0


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
