"""Fail-stop flag: after any failed write or fsync, every later write raises PoisonedError.

An fsync error may mean the kernel already dropped the dirty pages it could not write;
retrying would report durability that does not exist. The only safe answer is to stop
and let the operator reopen, which re-reads what is really on disk.
"""

from __future__ import annotations

from tuffdb.errors import PoisonedError


class Poison:
    __slots__ = ("cause", "reported")

    def __init__(self) -> None:
        self.cause: BaseException | None = None
        self.reported = False  # some caller has been told (check() raised at least once)

    def set(self, cause: BaseException) -> None:
        if self.cause is None:
            self.cause = cause

    def check(self) -> None:
        """Raise PoisonedError if poisoned. IMPORTANT: call it after taking the writer lock."""
        if self.cause is not None:
            self.reported = True
            raise PoisonedError(
                f"an earlier write or fsync failed ({self.cause!r}); no further writes are "
                "accepted: close the store and open it again"
            ) from self.cause

    def __bool__(self) -> bool:
        return self.cause is not None
