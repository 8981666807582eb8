"""Protected mode (security/protected.py): a ``tuffdb serve`` bound to every address with no
secret set serves its own host only. A client from another host (here: from an address of
this host that is not a loopback one, tuffdb.testing.addresses) gets Redis's -DENIED on
the RESP face, UNAUTHENTICATED on the gRPC face and 403 on ``POST /backup``, each saying
how to let it in; ``/health`` stays open. With a secret set, or ``--protected-mode no``
(or ``CONFIG SET protected-mode no`` from this host), the client is served. Before, such a
server let the whole network read, write and copy every store."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
import umadb

from tests.compat.test_serve_host import Server, free_port
from tuffdb.testing.addresses import other_host_address

WAIT_S = 30


@pytest.fixture(scope="module")
def outside() -> Iterator[str]:
    with other_host_address() as addr:
        yield addr


def serve(data: Path, *extra: str) -> tuple[Server, dict[str, int]]:
    ports = {n: free_port() for n in ("admin", "resp", "grpc", "http")}
    args = ["--data-dir", str(data), "--host", "0.0.0.0"]  # noqa: S104 - what is tested
    for n, p in ports.items():
        args += [f"--{n}-port", str(p)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUFFDB_")}
    server = Server([*args, *extra], env, launcher=False)
    server.wait_for("ready")
    return server, ports


def stop(server: Server) -> None:
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0


def backup(host: str, ports: dict[str, int], dest: Path, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"http://{host}:{ports['admin']}/backup", json={"dest": str(dest)},
                      headers=headers, timeout=WAIT_S)


def test_without_a_secret_only_this_host_is_served(tmp_path: Path, outside: str) -> None:
    server, ports = serve(tmp_path / "data")
    try:
        # From this host: served.
        assert redis.Redis(port=ports["resp"]).set("k", "v")
        assert umadb.Client(url=f"http://127.0.0.1:{ports['grpc']}").head() is None
        assert backup("127.0.0.1", ports, tmp_path / "local").status_code == 200
        # From another host: refused, with how to let it in.
        with pytest.raises(redis.exceptions.ResponseError, match="^DENIED .*protected mode"):
            redis.Redis(host=outside, port=ports["resp"]).get("k")
        with pytest.raises(Exception, match="protected mode") as refused:
            umadb.Client(url=f"http://{outside}:{ports['grpc']}").head()
        assert "--api-key" in str(refused.value)
        r = backup(outside, ports, tmp_path / "remote")
        assert r.status_code == 403 and "protected mode" in r.json()["error"]
        assert not (tmp_path / "remote").exists()
        assert httpx.get(f"http://{outside}:{ports['admin']}/health",
                         timeout=WAIT_S).status_code == 200
        # The ekoDB face always has keys: a client from anywhere authenticates as usual.
        key = (tmp_path / "data" / "ekodb_admin_key").read_text().strip()
        token = httpx.post(f"http://{outside}:{ports['http']}/api/auth/token",
                           json={"api_key": key}, timeout=WAIT_S)
        assert token.status_code == 200
        # Turned off from this host, as Redis lets you: the RESP face serves everyone.
        local = redis.Redis(port=ports["resp"])
        assert local.config_get("protected-mode") == {"protected-mode": "yes"}
        assert local.config_set("protected-mode", "no")
        assert redis.Redis(host=outside, port=ports["resp"]).get("k") == b"v"
    finally:
        stop(server)


def test_a_secret_or_protected_mode_off_lets_other_hosts_in(
        tmp_path: Path, outside: str) -> None:
    server, ports = serve(tmp_path / "a", "--requirepass", "pw", "--api-key", "key")
    try:
        assert redis.Redis(host=outside, port=ports["resp"], password="pw").set("k", "v")
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(host=outside, port=ports["resp"]).get("k")
        # (the umadb client sends a key over TLS only: without one, the key decides, not
        # protected mode)
        with pytest.raises(Exception, match="API key") as refused:
            umadb.Client(url=f"http://{outside}:{ports['grpc']}").head()
        assert "protected mode" not in str(refused.value)
        assert backup(outside, ports, tmp_path / "bk", token="pw").status_code == 200
        assert backup(outside, ports, tmp_path / "no").status_code == 401
    finally:
        stop(server)
    server, ports = serve(tmp_path / "b", "--protected-mode", "no")
    try:
        assert redis.Redis(host=outside, port=ports["resp"]).set("k", "v")
        assert umadb.Client(url=f"http://{outside}:{ports['grpc']}").head() is None
        assert backup(outside, ports, tmp_path / "bk2").status_code == 200
        assert redis.Redis(port=ports["resp"]).config_get("protected-mode") == {
            "protected-mode": "no"}
    finally:
        stop(server)
