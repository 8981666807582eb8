"""Redis glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET) as compiled regexes.

Redis's ``stringmatchlen`` differs from :mod:`fnmatch`: ``[^a]`` negates (not ``[!a]``),
a backslash escapes the next byte anywhere, and an unterminated ``[`` matches up to the
end of the pattern. We translate once per pattern and cache the result.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_SPECIAL = frozenset(b"*?[\\")


@lru_cache(maxsize=1024)
def compile_glob(pattern: bytes) -> Callable[[bytes], object]:  # noqa: C901, PLR0912
    """Return a callable that is truthy when a key matches ``pattern``."""
    if pattern == b"*":
        return lambda _key: True
    out = bytearray()
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == 0x2A:  # "*"
            out += b".*"
        elif c == 0x3F:  # "?"
            out += b"."
        elif c == 0x5C and i + 1 < n:  # "\"
            i += 1
            out += re.escape(pattern[i : i + 1])
        elif c == 0x5B:  # "["
            i += 1
            negate = i < n and pattern[i] == 0x5E  # "^"
            if negate:
                i += 1
            items = bytearray()
            while i < n and pattern[i] != 0x5D:  # "]"
                if pattern[i] == 0x5C and i + 1 < n:
                    i += 1
                    items += re.escape(pattern[i : i + 1])
                elif i + 2 < n and pattern[i + 1] == 0x2D:  # a-z (Redis swaps reversed ends)
                    lo, hi = sorted((pattern[i], pattern[i + 2]))
                    items += b"%b-%b" % (re.escape(bytes([lo])), re.escape(bytes([hi])))
                    i += 2
                else:
                    items += re.escape(pattern[i : i + 1])
                i += 1
            if not items:
                out += b"[^\\x00-\\xff]" if not negate else b"[\\x00-\\xff]"
            else:
                out += b"[" + (b"^" if negate else b"") + bytes(items) + b"]"
        else:
            out += re.escape(pattern[i : i + 1])
        i += 1
    return re.compile(bytes(out) + b"\\Z", re.DOTALL).match


def literal_prefix(pattern: bytes) -> bytes:
    """The bytes every match must start with (lets KEYS/SCAN use a prefix scan)."""
    for i, c in enumerate(pattern):
        if c in _SPECIAL:
            return pattern[:i]
    return pattern
