"""Single-writer process lock on a data directory (``LOCK`` file, ``flock``)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from tuffdb.errors import LockTimeout

LOCK_NAME = "LOCK"


class DirLock:
    """Exclusive, non-blocking lock; released on :meth:`release` or process exit."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockTimeout(
                f"{directory} is locked by another process (pid in {self.path}); "
                "close that store first, or open a different directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
