"""Child processes a fault test can crash, freeze and bring back: one way of doing it.

:class:`ManagedProcess` is the behaviour (spawn, SIGKILL, SIGSTOP/SIGCONT, stop, restart,
the log kept in a file); :class:`Process` runs any command line with it, and
:class:`tuffdb.testing.etcd.EtcdMember` builds etcd's. A ``prefix`` runs the command
through another program, e.g. ``("ip", "netns", "exec", NS)`` to start it in a network
namespace (``ip netns exec`` execs the command, so the pid signalled is the program's).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ManagedProcess", "Process"]

STOP_TIMEOUT_S = 10.0


def wait_stopped(pid: int, timeout: float = STOP_TIMEOUT_S) -> None:
    """Block until every thread of ``pid`` is in the stopped state (``T`` in
    ``/proc/PID/task/*/stat``), or the process is gone."""
    deadline = time.monotonic() + timeout
    tasks = Path(f"/proc/{pid}/task")
    while True:
        try:
            states = [(t / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
                      for t in tasks.iterdir()]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return
        if all(s in (b"T", b"t", b"Z", b"X") for s in states):
            return
        if time.monotonic() > deadline:
            msg = f"process {pid} did not stop within {timeout} s (thread states {states})"
            raise TimeoutError(msg)
        time.sleep(0.001)


class ManagedProcess:
    """Mixin: a child process restarted from the same command line; needs ``argv()``,
    ``log_path`` and a ``proc`` attribute (None before the first start)."""

    proc: subprocess.Popen[bytes] | None
    env: dict[str, str] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    @property
    def log_path(self) -> Path:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        """True while the process exists (paused counts as running)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the process; its stdout and stderr are appended to ``log_path``."""
        assert not self.running, f"{self} is already running"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,  # noqa: S603
                                         stdout=log, stderr=log, env=self.env)

    def kill(self) -> None:
        """SIGKILL (a crash: nothing flushed beyond what was fsynced) and reap."""
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and answers nothing (a long GC pause,
        a VM freeze: the zombie-leader case). Returns once every thread of the process
        is stopped: the signal is delivered asynchronously, and a process running on
        another core could otherwise still answer a request sent right after."""
        self._signal(signal.SIGSTOP)
        if self.running:
            assert self.proc is not None
            wait_stopped(self.proc.pid)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (a paused process is continued first), then SIGKILL past a bound."""
        if not self.running:
            return
        assert self.proc is not None
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self) -> None:
        """Kill if running, start again with the same command line."""
        if self.running:
            self.kill()
        self.spawn()

    def log_tail(self, n_bytes: int = 2000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "<no log>"
        return data[-n_bytes:].decode(errors="replace")

    def _signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)


class Process(ManagedProcess):
    """Any command line as a :class:`ManagedProcess` (started by the constructor)."""

    def __init__(self, argv: Sequence[str], log_path: Path, *, prefix: Sequence[str] = (),
                 env: dict[str, str] | None = None, start: bool = True) -> None:
        self._argv = [*prefix, *argv]
        self._log_path = log_path
        self.env = env
        self.proc = None
        if start:
            self.spawn()

    def argv(self) -> list[str]:
        return list(self._argv)

    @property
    def log_path(self) -> Path:
        return self._log_path

    def __repr__(self) -> str:
        return f"Process({self._argv!r}, pid={self.pid})"
