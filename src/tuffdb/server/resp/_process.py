"""Run the RESP face (or a real redis-server) in a child process, for tests and benches.

:class:`ServerProcess` starts ``python -m tuffdb.server.resp --port 0 ...`` and waits
for its ``ready`` line on stderr (no sleeps), so the kernel-chosen port is known and
no two tests race for a port. :func:`start_redis` does the same for Debian's
``redis-server`` (``--port 0`` is not allowed there, so it picks a free port and
retries on a bind race) and waits for its "Ready to accept connections" log line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

READY_RE = re.compile(r"tuffdb-resp ready host=(\S+) port=(\d+)")
START_TIMEOUT_S = 60.0


class ServerProcess:
    """A child server; ``port`` is known once the constructor returns."""

    def __init__(self, cmd: list[str], ready: re.Pattern[str], port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.cmd = cmd
        self.proc = subprocess.Popen(  # noqa: S603  (commands built by this module)
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )
        self.port = port or 0
        self.log: list[str] = []
        found = threading.Event()
        assert self.proc.stderr is not None
        stream = self.proc.stderr

        def pump() -> None:
            for line in stream:
                self.log.append(line)
                m = ready.search(line)
                if m and not found.is_set():
                    if m.groups():
                        self.port = int(m.group(m.lastindex or 1))
                    found.set()
            found.set()  # EOF: the child died; the check below reports it

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()
        found.wait(START_TIMEOUT_S)
        if self.proc.poll() is not None or not self.port:
            self.stop()
            raise RuntimeError(f"server did not start: {cmd}\n{''.join(self.log)}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (crash tests)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        """SIGTERM, then wait; returns the exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        return self.proc.returncode


def start_tuffdb(data_dir: Path, *args: str, appendfsync: str = "everysec",
                 wrap: list[str] | None = None) -> ServerProcess:
    """``wrap`` prefixes the command, e.g. ``["taskset", "-c", "0"]`` for benchmarks."""
    cmd = [*(wrap or []), sys.executable, "-m", "tuffdb.server.resp", "--port", "0", "--data-dir",
           str(data_dir), "--appendfsync", appendfsync, *args]
    return ServerProcess(cmd, READY_RE, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(*args: str, wrap: list[str] | None = None) -> ServerProcess:
    """A throw-away redis-server on a free loopback port: no RDB, no AOF unless asked."""
    exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed")
    last: Exception | None = None
    for _ in range(5):
        port = free_port()
        cmd = [*(wrap or []), exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--logfile", "", "--daemonize", "no", *args]
        try:
            # redis logs to stdout; merge it into the stream we watch.
            return _redis(cmd, port)
        except RuntimeError as exc:
            last = exc
    raise RuntimeError(f"redis-server did not start: {last}")


def _redis(cmd: list[str], port: int) -> ServerProcess:
    wrapper = ["sh", "-c", 'exec "$@" 1>&2', "redis", *cmd]
    return ServerProcess(wrapper, re.compile(r"Ready to accept connections"), port=port)
