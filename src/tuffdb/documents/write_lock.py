"""The database write lock: re-entrant, and durable waits happen after it is released.

A durable write (``durability="always"``, or ``sync=True``) must not return before its
records are fsynced, but it must not wait *inside* the lock either: the lock would then
be held across the fsync, every other writer would queue behind it, and each write would
pay an fsync of its own. Instead ``Database.apply`` writes without waiting, takes a KV
write ticket and hands it to :meth:`WriteLock.owe`; when the owning thread leaves its
outermost ``with db.lock`` block, the lock is released first and the thread then waits
for that ticket. Writers that overlap share one group commit (one fsync).

Until the wait returns, the write is visible to readers but not yet acknowledged to its
writer (the KV engine behaves the same for its own ``put``); an acknowledged write is
always durable. The wait runs even when the block raises, so a write that was made is
durable by the time the exception reaches the caller, as before.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class WriteLock:
    """A re-entrant lock that settles the owner's durability debt on its last release.

    ``depth`` and ``owed`` are only touched by the thread that holds the lock.
    """

    __slots__ = ("_lock", "_settle", "depth", "owed")

    def __init__(self, settle: Callable[[int], None]) -> None:
        self._lock = threading.RLock()
        self._settle = settle
        self.depth = 0
        self.owed: int | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            self.depth += 1
        return got

    def release(self) -> None:
        self.depth -= 1
        owed = None
        if self.depth == 0:
            owed, self.owed = self.owed, None
        self._lock.release()
        if owed is not None:
            self._settle(owed)

    def owe(self, ticket: int) -> None:
        """Wait for ``ticket`` after the outermost release (call while holding the lock)."""
        if self.owed is None or ticket > self.owed:
            self.owed = ticket

    def __enter__(self) -> bool:
        self._lock.acquire()
        self.depth += 1
        return True

    def __exit__(self, *exc: object) -> None:
        self.release()
