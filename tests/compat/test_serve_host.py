"""``tuffdb serve`` as a real process: ready line, admin endpoint, signals, face lifecycle.

Synchronisation is by the server's own JSON log lines on stderr (``ready``,
``stopped``), never by sleeping. Face lifecycle tests swap stand-in face modules
into ``tuffdb.server.app.FACE_MODULES`` through a two-line launcher, so the host's
ordering and error handling are checked without depending on the real faces; one
test also runs the three real faces on free ports and requires each of them to start.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import redis

from tuffdb.kv.store import KVStore
from tuffdb.testing.etcd import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

WAIT_S = 60.0  # an upper bound on a shared, loaded machine; no test waits this long if it passes

LAUNCHER = """
import json, os, sys
sys.path.insert(0, os.environ["FAKE_FACE_DIR"])
import tuffdb.server.app as app
app.FACE_MODULES.clear(); app.FACE_MODULES.update(json.loads(os.environ["FAKE_FACES"]))
from tuffdb.__main__ import main
sys.exit(main(sys.argv[1:]))
"""

FAKE_FACE = """
import asyncio, os
from tuffdb.errors import OperationalError
from tuffdb.log import get_logger
NAME = {name!r}
log = get_logger("fake")

class FakeFace:
    name = NAME
    def __init__(self, config):
        self.port = getattr(config, NAME + "_port")
        self.host = config.host
        self.extra = config.extra.get(NAME, {{}})
        self.server = None
    async def start(self):
        self.server = await asyncio.start_server(lambda r, w: w.close(), self.host, self.port)
        if os.environ.get("FAKE_HANG_ON_START") == NAME:
            log.info("fake start hangs", face=NAME)
            await asyncio.Event().wait()
        log.info("fake started", face=NAME, extra=self.extra)
    async def stop(self):
        log.info("fake stopping", face=NAME)
        if os.environ.get("FAKE_HANG_ON_STOP") == NAME:
            await asyncio.Event().wait()
        if self.server is not None:
            self.server.close()
        log.info("fake stopped", face=NAME)
    def health(self):
        return {{"status": os.environ.get("FAKE_STATUS_" + NAME, "ok"), "clients": 0}}

def create(config):
    if os.environ.get("FAKE_CREATE_FAILS") == NAME:
        raise OperationalError("store is locked by another process: stop it first")
    return FakeFace(config)
"""


class Server:
    """A ``tuffdb serve`` child process whose stderr JSON lines are collected."""

    def __init__(self, args: list[str], env: dict[str, str], launcher: bool) -> None:
        cmd = [sys.executable, "-c", LAUNCHER] if launcher else [sys.executable, "-m", "tuffdb"]
        self.proc = subprocess.Popen([*cmd, "serve", *args], env=env, stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True)
        self.lines: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                line = {"event": "<not json>", "raw": raw}
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, event: str, **fields: Any) -> dict[str, Any]:
        """Return the first (not yet seen) line with this event and fields."""
        while True:
            try:
                line = self._queue.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"no {event!r} line within {WAIT_S}s; got {self.lines}")
            if line is None:
                pytest.fail(f"server exited before {event!r}: {self.lines}")
            self.lines.append(line)
            if line.get("event") == event and all(line.get(k) == v for k, v in fields.items()):
                return line

    def finish(self) -> int:
        code = self.proc.wait(timeout=WAIT_S)
        while (line := self._queue.get(timeout=WAIT_S)) is not None:
            self.lines.append(line)
        return code

    def events(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == event]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(*args: str, env: dict[str, str] | None = None,
              fakes: dict[str, str] | None = None) -> Server:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TUFFDB_", "FAKE_"))}
        full_env.update(env or {})
        if fakes is not None:
            fake_dir = tmp_path / "fakes"
            fake_dir.mkdir(exist_ok=True)
            modules = {}
            for name, kind in fakes.items():
                # "ok": a working stand-in; "missing": no such module; else: module source.
                module = f"fake_{name}" if kind != "missing" else f"tuffdb_no_such_face_{name}"
                if kind != "missing":
                    text = FAKE_FACE.format(name=name) if kind == "ok" else kind
                    (fake_dir / f"{module}.py").write_text(textwrap.dedent(text))
                modules[name] = module
            full_env.update(FAKE_FACE_DIR=str(fake_dir), FAKE_FACES=json.dumps(modules))
        server = Server(["--data-dir", str(tmp_path / "data"), *args], full_env, fakes is not None)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def no_faces(admin_port: int) -> list[str]:
    return ["--admin-port", str(admin_port), "--resp-port", "0", "--grpc-port", "0",
            "--http-port", "0"]


def test_serve_is_ready_serves_health_and_metrics_and_stops_on_sigterm(start: Any) -> None:
    port = free_port()
    server = start(*no_faces(port), env={"TUFFDB_REQUIREPASS": "hunter2"})
    ready = server.wait_for("ready")
    assert ready["admin"] == f"127.0.0.1:{port}"
    config = server.events("config")[0]
    assert config["requirepass"] == "***"
    assert server.events("listening") == [
        {**server.events("listening")[0], "face": "admin", "address": f"127.0.0.1:{port}"}
    ]
    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=WAIT_S)
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S)
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE tuffdb_fsyncs_total counter" in metrics.text
    assert "tuffdb_process_uptime_seconds " in metrics.text
    assert httpx.get(f"http://127.0.0.1:{port}/nope", timeout=WAIT_S).status_code == 404
    assert httpx.post(f"http://127.0.0.1:{port}/health", timeout=WAIT_S).status_code == 405
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert server.events("stopped") == [{**server.events("stopped")[0], "exit_code": 0}]
    assert "hunter2" not in json.dumps(server.lines)


def test_sigint_also_stops_cleanly(start: Any) -> None:
    server = start(*no_faces(free_port()))
    server.wait_for("ready")
    server.proc.send_signal(signal.SIGINT)
    assert server.finish() == 0
    assert server.events("signal received")[0]["signal"] == "SIGINT"
    assert len(server.events("stopped")) == 1


def test_admin_port_in_use_fails_with_a_clear_message(start: Any) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = start(*no_faces(port))
        assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert f"admin endpoint cannot listen on 127.0.0.1:{port}" in failed["error"]


def test_faces_start_in_order_stop_in_reverse_and_report_health(start: Any) -> None:
    admin, resp, grpc, http = (free_port() for _ in range(4))
    server = start("--admin-port", str(admin), "--resp-port", str(resp), "--grpc-port",
                   str(grpc), "--http-port", str(http), env={"FAKE_STATUS_grpc": "degraded"},
                   fakes={"resp": "ok", "grpc": "ok", "http": "ok"})
    assert server.wait_for("ready")["faces"] == ["resp", "grpc", "http"]
    listening = {line["face"]: line["address"] for line in server.events("listening")}
    assert listening == {"admin": f"127.0.0.1:{admin}", "resp": f"127.0.0.1:{resp}",
                         "grpc": f"127.0.0.1:{grpc}", "http": f"127.0.0.1:{http}"}
    health = httpx.get(f"http://127.0.0.1:{admin}/health", timeout=WAIT_S)
    assert health.status_code == 503
    assert health.json()["status"] == "degraded"
    assert health.json()["faces"]["resp"] == {"status": "ok", "clients": 0}
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert [line["face"] for line in server.events("fake stopping")] == ["http", "grpc", "resp"]
    assert [line["face"] for line in server.events("face stopped")] == ["http", "grpc", "resp"]


def test_port_zero_disables_a_face(start: Any) -> None:
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", "0", "--http-port", "0",
                   fakes={"resp": "ok", "grpc": "ok", "http": "ok"})
    assert server.wait_for("ready")["faces"] == ["resp"]
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert {line["face"] for line in server.events("face disabled")} == {"grpc", "http"}
    assert [line["face"] for line in server.events("fake started")] == ["resp"]


def test_enabled_face_whose_module_does_not_exist_is_fatal(start: Any) -> None:
    """Every face exists: one that cannot be imported is a broken build, never skipped
    (a face is left out by setting its port to 0)."""
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", str(free_port()), "--http-port", "0",
                   fakes={"resp": "ok", "grpc": "missing"})
    assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert failed["error"].startswith("face grpc: importing tuffdb_no_such_face_grpc failed")
    assert [line["face"] for line in server.events("fake stopped")] == ["resp"]
    assert server.events("ready") == []


def test_import_error_inside_a_face_is_fatal(start: Any) -> None:
    broken = "import tuffdb_missing_dependency_xyz\n"
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", "0", "--http-port", "0", fakes={"resp": broken})
    assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert "tuffdb_missing_dependency_xyz" in failed["error"]


def test_create_error_is_fatal_before_any_face_listens(start: Any) -> None:
    """Every face's store opens before any face starts: one that cannot open stops the
    server with no face having listened (the faces already created are closed)."""
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", str(free_port()), "--http-port", "0",
                   env={"FAKE_CREATE_FAILS": "grpc"}, fakes={"resp": "ok", "grpc": "ok"})
    assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert "face grpc: create() failed: store is locked" in failed["error"]
    assert server.events("fake started") == []
    assert [line["face"] for line in server.events("fake stopped")] == ["resp"]
    assert [line["face"] for line in server.events("listening")] == ["admin"]
    assert server.events("ready") == []


def test_face_bind_failure_is_fatal(start: Any) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = start("--admin-port", str(free_port()), "--resp-port", str(port),
                       "--grpc-port", "0", "--http-port", "0", fakes={"resp": "ok"})
        assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert f"face resp cannot start on 127.0.0.1:{port}" in failed["error"]


def test_second_signal_exits_immediately(start: Any) -> None:
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", "0", "--http-port", "0",
                   env={"FAKE_HANG_ON_STOP": "resp"}, fakes={"resp": "ok"})
    server.wait_for("ready")
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for("fake stopping", face="resp")  # stop() now hangs forever
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 128 + signal.SIGTERM
    assert server.events("forced exit")[0]["signal"] == "SIGTERM"
    assert server.events("stopped") == []


def test_real_faces_all_start_report_ok_and_stop_cleanly(start: Any) -> None:
    """Integration with the three real face modules on free ports: each must start."""
    admin = free_port()
    server = start("--admin-port", str(admin), "--resp-port", str(free_port()),
                   "--grpc-port", str(free_port()), "--http-port", str(free_port()))
    assert server.wait_for("ready")["faces"] == ["resp", "grpc", "http"]
    health = httpx.get(f"http://127.0.0.1:{admin}/health", timeout=WAIT_S)
    assert health.status_code == 200
    assert {name: face["status"] for name, face in health.json()["faces"].items()} == {
        "resp": "ok", "grpc": "ok", "http": "ok"}
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0, server.lines
    assert [line["face"] for line in server.events("face stopped")] == ["http", "grpc", "resp"]


def test_toml_face_table_reaches_the_face_and_flags_still_win(start: Any, tmp_path: Path) -> None:
    resp = free_port()
    toml = tmp_path / "serve.toml"
    toml.write_text("resp_port = 1\ngrpc_port = 0\nhttp_port = 0\n[resp]\ndatabases = 4\n")
    server = start("--config", str(toml), "--admin-port", "0", "--resp-port", str(resp),
                   fakes={"resp": "ok"})
    server.wait_for("ready")
    (started,) = server.events("fake started")
    assert started["extra"] == {"databases": 4}
    assert {line["face"]: line["address"] for line in server.events("listening")} == {
        "resp": f"127.0.0.1:{resp}"
    }
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0


def test_real_faces_write_only_json_lines_to_stderr(start: Any) -> None:
    """Issue 2: logs are structured, one JSON line per event, whichever module writes them."""
    server = start("--admin-port", "0", "--resp-port", str(free_port()),
                   "--grpc-port", str(free_port()), "--http-port", str(free_port()))
    server.wait_for("ready")
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert [line["raw"] for line in server.events("<not json>")] == []


def test_sigterm_persists_acknowledged_writes_with_durability_none(
    start: Any, tmp_path: Path
) -> None:  # integration: host + RESP face + KV engine
    """With durability=none only close() makes writes durable: SIGTERM must reach it."""
    resp = free_port()
    server = start("--admin-port", "0", "--resp-port", str(resp), "--grpc-port", "0",
                   "--http-port", "0", "--durability", "none")
    server.wait_for("ready")
    client = redis.Redis(port=resp, socket_timeout=WAIT_S)
    for i in range(200):
        client.set(f"key{i}", f"value{i}")
    client.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0, server.lines
    with KVStore.open(tmp_path / "data" / "kv") as store:
        # The RESP face's keys (its own records live under 0xFF: docs/format/resp.md).
        assert store.count(end=b"\xff") == 200
    again = start("--admin-port", "0", "--resp-port", str(resp), "--grpc-port", "0",
                  "--http-port", "0")
    again.wait_for("ready")
    client = redis.Redis(port=resp, socket_timeout=WAIT_S)
    assert client.get("key0") == b"value0"
    assert client.get("key199") == b"value199"
    client.close()
    again.proc.send_signal(signal.SIGTERM)
    assert again.finish() == 0


def test_resp_shutdown_stops_every_face_as_sigterm_does(start: Any) -> None:
    """SHUTDOWN on the RESP port asks the host to stop: every face stops in reverse order,
    exit code 0, and the log says who asked."""
    resp = free_port()
    server = start("--admin-port", "0", "--resp-port", str(resp), "--grpc-port",
                   str(free_port()), "--http-port", str(free_port()))
    server.wait_for("ready")
    client = redis.Redis(port=resp, socket_timeout=WAIT_S)
    with pytest.raises(redis.ConnectionError):
        client.execute_command("SHUTDOWN")
    assert server.finish() == 0, server.lines
    assert server.events("shutdown requested")[0]["by"] == "RESP SHUTDOWN"
    assert [line["face"] for line in server.events("face stopped")] == ["http", "grpc", "resp"]


def test_lifecycle_lines_are_written_even_at_log_level_error(start: Any) -> None:
    server = start("--admin-port", "0", "--resp-port", str(free_port()), "--grpc-port", "0",
                   "--http-port", "0", "--log-level", "error", fakes={"resp": "ok"})
    assert server.wait_for("ready")["faces"] == ["resp"]
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert len(server.events("stopped")) == 1
    assert server.events("fake started") == []  # an info line of another logger: filtered


def test_health_says_starting_and_sigterm_interrupts_a_hanging_start(start: Any) -> None:
    admin = free_port()
    server = start("--admin-port", str(admin), "--resp-port", str(free_port()),
                   "--grpc-port", str(free_port()), "--http-port", "0",
                   env={"FAKE_HANG_ON_START": "grpc"}, fakes={"resp": "ok", "grpc": "ok"})
    server.wait_for("fake start hangs", face="grpc")
    health = httpx.get(f"http://127.0.0.1:{admin}/health", timeout=WAIT_S)
    assert (health.status_code, health.json()["status"]) == (503, "starting")
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    assert server.events("startup interrupted")[0]["started"] == ["resp", "grpc"]
    assert [line["face"] for line in server.events("fake stopped")] == ["grpc", "resp"]
    assert server.events("ready") == []


def test_an_archive_inside_the_data_directory_is_refused_at_start(
        start: Any, tmp_path: Path) -> None:
    """Its files would land among the stores it ships (backup/datadir.refuse_overlap)."""
    server = start("--admin-port", str(free_port()), "--resp-port", str(free_port()),
                   "--grpc-port", "0", "--http-port", "0",
                   "--archive", str(tmp_path / "data" / "kv" / "archive"))
    assert server.finish() == 1
    (failed,) = server.events("startup failed")
    assert "overlaps the data directory" in failed["error"]
    assert not (tmp_path / "data" / "kv" / "archive").exists()
    assert server.events("ready") == []
