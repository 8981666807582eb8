"""Named failpoints at ordering-critical steps (bbolt's gofail idea).

``failpoint("before_sync_segment")`` is a no-op unless the name is enabled, either
through ``TUFFDB_FAILPOINTS="name=action,..."`` in the environment (read at import,
for subprocess crash tests) or with :func:`enable` in-process. Actions:

* ``exit``  -- ``os._exit(97)`` on the spot, as a crash would (no flush, no atexit);
* ``raise`` -- raise ``OSError(EIO)``, as a failing disk would.
"""

from __future__ import annotations

import errno
import os

_ACTIVE: dict[str, str] = {}
EXIT_CODE = 97


def _parse(spec: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in spec.split(","):
        if item.strip():
            name, _, action = item.partition("=")
            out[name.strip()] = action.strip() or "exit"
    return out


_ACTIVE.update(_parse(os.environ.get("TUFFDB_FAILPOINTS", "")))


def enable(name: str, action: str = "raise") -> None:
    _ACTIVE[name] = action


def disable(name: str | None = None) -> None:
    if name is None:
        _ACTIVE.clear()
    else:
        _ACTIVE.pop(name, None)


def failpoint(name: str) -> None:
    if not _ACTIVE:
        return
    action = _ACTIVE.get(name)
    if action is None:
        return
    if action == "exit":
        os._exit(EXIT_CODE)
    raise OSError(errno.EIO, f"failpoint {name}")
