"""Start the ekoDB face in a subprocess on a free port and talk to it over real HTTP.

The server is started with ``--port 0`` and prints ``ekodb_http ready on HOST:PORT`` to
stderr once it accepts connections; the harness waits for that line (no sleeps).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import msgspec

READY = "ekodb_http ready on "


class EkoServer:
    def __init__(self, data_dir: Path, **settings: Any) -> None:
        self.data_dir = data_dir
        args = [sys.executable, "-m", "tuffdb.server.ekodb", "--port", "0",
                "--data-dir", str(data_dir)]
        for k, v in settings.items():
            args += ["--http-setting", f"{k}={msgspec.json.encode(v).decode()}"]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True,  # noqa: S603
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        atexit.register(self.__exit__)
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if line.startswith(READY):
                self.port = int(line.rsplit(":", 1)[1])
                break
        else:
            raise RuntimeError("server exited before it was ready:\n" + "".join(self.lines))
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        self.base = f"http://127.0.0.1:{self.port}"
        self.admin_key = (data_dir / "ekodb_admin_key").read_text().strip()

    def _read_rest(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def client(self, key: str | None = None) -> Client:
        return Client(self.base, key or self.admin_key)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def __enter__(self) -> EkoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        """Never leave a server behind, even when the test failed half-way."""
        if self.proc.poll() is None:
            self.kill()


class Client:
    """A thin ekoDB client speaking JSON or the MessagePack forms ekodb-client uses."""

    def __init__(self, base: str, api_key: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)
        self.api_key = api_key
        self.token = self.fetch_token()

    def fetch_token(self) -> str:
        r = self.http.post("/api/auth/token", json={"api_key": self.api_key})
        assert r.status_code == 200, r.text
        return str(r.json()["token"])

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.http.request(method, path, json=body, headers=self.auth, **kw)

    def mp(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {**self.auth, "Content-Type": "application/msgpack", "Accept": "application/msgpack"}
        content = b"" if body is None else msgspec.msgpack.encode(body)
        return self.http.request(method, path, content=content, headers=headers)

    def call(self, mode: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request in ``mode`` ("json" | "msgpack"); returns (status, decoded body)."""
        r = self.mp(method, path, body) if mode == "msgpack" else self.json(method, path, body)
        if r.status_code == 200 and mode == "msgpack":
            return r.status_code, msgspec.msgpack.decode(r.content)
        return r.status_code, r.json()

    def close(self) -> None:
        self.http.close()
