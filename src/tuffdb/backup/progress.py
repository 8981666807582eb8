"""Progress of long work: a bar on a terminal, a line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

LOG_EVERY_S = 5.0


class Progress:
    def __init__(self, label: str, total: int, out: TextIO | None = None,
                 every_s: float = LOG_EVERY_S) -> None:
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.out = out
        self.tty = bool(out is not None and out.isatty())
        self.every_s = every_s
        self._t0 = time.monotonic()
        self._last = time.monotonic()

    def add(self, nbytes: int) -> None:
        self.done += nbytes
        if self.out is None:
            return
        now = time.monotonic()
        if self.tty:
            if now - self._last >= 0.1:
                self._last = now
                width = 30
                fill = int(width * min(self.done, self.total) / self.total)
                self.out.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] "
                               f"{self._mb(self.done)}/{self._mb(self.total)} MB")
                self.out.flush()
        elif now - self._last >= self.every_s:
            self._last = now
            self.line()

    @staticmethod
    def _mb(n: int) -> str:
        return f"{n / 1e6:.1f}"

    def line(self) -> None:
        if self.out is not None:
            rate = self.done / max(time.monotonic() - self._t0, 1e-9) / 1e6
            print(f"{self.label}: {self._mb(self.done)} of {self._mb(self.total)} MB "
                  f"({rate:.0f} MB/s)", file=self.out, flush=True)

    def finish(self) -> None:
        if self.out is None:
            return
        if self.tty:
            self.out.write("\n")
        self.line()


def stderr_progress(label: str, total: int) -> Progress:
    return Progress(label, total, sys.stderr)
