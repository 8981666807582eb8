"""The ekoDB app of a real face over a real store, called in process (no sockets):
``App.handle`` with byte-exact requests, as an admin unless told otherwise; and the
transport an ``HttpProtocol`` writes to in such tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuffdb.server.config import ServeConfig
from tuffdb.server.ekodb.server import EkoDBFace
from tuffdb.server.ekodb.proto import Request, Response


class App:
    def __init__(self, tmp_path: Path) -> None:
        cfg = ServeConfig(data_dir=tmp_path, host="127.0.0.1", http_port=0, durability="none",
                          extra={"http": {}})
        self.face = EkoDBFace(cfg)
        self.app = self.face.app
        admin = (tmp_path / "ekodb_admin_key").read_text().strip()
        self.token = self.login(admin)

    def login(self, key: str) -> str:
        r = self.call("POST", "/api/auth/token", {"api_key": key}, token=None)
        return str(r["token"])

    def call(self, method: str, path: str, body: Any = None, *, token: str | None = "",
             raw: bool = False, mp: bool = False) -> Any:
        """The 200 reply's body, decoded from JSON unless ``raw``; ``mp`` asks for
        MessagePack (then give ``raw``)."""
        headers = {"content-type": "application/json"}
        if mp:
            headers["accept"] = "application/msgpack"
        tok = self.token if token == "" else token
        if tok:
            headers["authorization"] = f"Bearer {tok}"
        data = b"" if body is None else json.dumps(body).encode()
        resp = self.app.handle(Request(method, path.encode(), headers, data))
        assert isinstance(resp, Response)
        assert resp.status == 200, resp.body
        return bytes(resp.body) if raw else json.loads(resp.body)

    def call_as(self, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON body) of a request made with ``token``, whatever the
        status (for tests of what another key is refused)."""
        headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        resp = self.app.handle(Request(method, path.encode(), headers,
                                       b"" if body is None else json.dumps(body).encode()))
        assert isinstance(resp, Response)
        return resp.status, json.loads(resp.body)

    def close(self) -> None:
        self.face.db.close()


class Transport:
    """What ``HttpProtocol`` needs of a transport: keeps what it is sent in ``out``."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, _name: str) -> tuple[str, int]:
        return ("127.0.0.1", 1)

    def close(self) -> None:
        self.closed = True
