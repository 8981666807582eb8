"""TTL parsing: duration strings (``"30s"``, ``"5m"``, ``"1h30m"``, ``"2d"``) or seconds."""

from __future__ import annotations

import re
from typing import Any

from tuffdb.errors import ProtocolError

_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_ttl(value: Any) -> float | None:
    """Seconds for a TTL given as a number, a numeric string or a duration string.

    ``None`` and ``0`` mean "no TTL".

    :raises ProtocolError: on a negative number or an unreadable string.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ProtocolError("ttl must be seconds or a duration string like '30m'")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ProtocolError(f"bad ttl {value!r}; use seconds or e.g. '30s', '5m', '1h'") from None  # noqa: E501
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    else:
        raise ProtocolError("ttl must be seconds or a duration string like '30m'")
    if seconds < 0:
        raise ProtocolError("ttl must not be negative")
    if not seconds < 1e15:  # NaN and infinity (they escaped later as ValueError)
        raise ProtocolError(f"ttl must be a finite number of seconds, not {value!r}")
    return seconds or None
