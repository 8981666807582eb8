"""An fsync that fails under a running server: the real error path, on every face.

Story: the fault injectors patch ``os.fsync``/``os.fdatasync`` inside one process, and the
ekoDB face syncs through Linux AIO, which never meets them; no test made a running server
see a failed fsync. Here ``tuffdb serve`` runs one face over powerfs
(tests/crash/powerfs.py); while clients write under that face's durable mode, powerfs makes
every fsync fail with EIO, as a dying disk does (the kernel answers an AIO fsync the same
way). Then:

- every writer's waiting write gets an error on the wire (RESP ``-MISCONF``, gRPC
  ``INTERNAL`` with an ``IO`` ErrorResponse, HTTP 503), never an acknowledgement;
- ``/health`` on the admin port says ``degraded`` and names the face;
- later writes are refused, even once fsync works again, until the server restarts;
- after a power cut and a restart on what the disk holds, every write that was
  acknowledged is there with its exact content (nothing unsynced was acknowledged), and
  writes are accepted again.

Mutation runs (2026-12-03): with the error of a failed AIO fsync dropped (``error = None``
for ``_fsync_error(reaped)`` in ``LoopRounds._completed``, server/loop_rounds.py) the
``http`` case fails: writes were acknowledged that the cut then lost. With the RESP
connection replying to a batch whose round failed (``elif exc is not None:`` made
``elif False:`` in ``Conn._after_wait``, server/resp/conn.py) the ``resp`` case fails the
same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tuffdb.events import umadb_v1_pb2 as pb
from tuffdb.testing.etcd import free_port

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from powerfs import Mount


WAIT_S = 60.0  # an upper bound on a shared machine; a passing test never waits this long
WRITERS = 3
ACKS_BEFORE_FAULT = 150


class Served:
    """``tuffdb serve`` with one face and the admin endpoint, on free loopback ports."""

    def __init__(self, data_dir: Path, face: str) -> None:
        self.data_dir = data_dir
        self.admin, self.port = free_port(), free_port()
        ports = dict.fromkeys(("resp", "grpc", "http"), 0) | {face: self.port}
        config = data_dir.parent / f"{data_dir.name}.toml"
        config.write_text("[http]\ndurable_operations = true\n")
        cmd = [sys.executable, "-m", "tuffdb", "serve", "--config", str(config),
               "--data-dir", str(data_dir), "--admin-port", str(self.admin),
               "--durability", "always", *(a for name, port in ports.items()
                                           for a in (f"--{name}-port", str(port)))]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,  # noqa: S603
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # JSON lines: the "ready" one is the synchronisation
            self.lines.append(line)
            if '"event":"ready"' in line:
                break
        else:
            raise RuntimeError(f"serve exited with {self.proc.wait()}: {''.join(self.lines)}")
        self._drain = threading.Thread(target=self.lines.extend, args=(self.proc.stderr,),
                                       daemon=True)
        self._drain.start()

    def health(self) -> tuple[int, dict[str, Any]]:
        r = httpx.get(f"http://127.0.0.1:{self.admin}/health", timeout=WAIT_S)
        return r.status_code, r.json()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(WAIT_S)


# -- one client per face: write(worker, i) -> ack; check(acked) after the restart ----------
class Resp:
    face = "resp"

    def __init__(self, server: Served) -> None:
        self.c = redis.Redis(port=server.port, socket_timeout=WAIT_S, retry=Retry(NoBackoff(), 0))

    def write(self, w: int, i: int) -> Any:
        assert self.c.set(f"k{w}:{i}", f"v{w}:{i}") is True
        return f"k{w}:{i}"

    @staticmethod
    def refused(exc: Exception) -> bool:
        return isinstance(exc, redis.ResponseError) and str(exc).startswith("MISCONF ")

    def check(self, acked: list[tuple[int, int, Any]]) -> None:
        got = self.c.mget([key for _, _, key in acked])
        assert [g for g, (w, i, _) in zip(got, acked, strict=True)
                if g != f"v{w}:{i}".encode()] == []


class Events:
    face = "grpc"

    def __init__(self, server: Served) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        self.append = self.channel.unary_unary("/umadb.v1.DCB/Append")

    def write(self, w: int, i: int) -> Any:
        req = pb.AppendRequest(events=[pb.Event(event_type="t", data=f"{w}:{i}".encode(),
                                                tags=[f"w{w}"])])
        return pb.AppendResponse.FromString(
            self.append(req.SerializeToString(), timeout=WAIT_S)).position

    @staticmethod
    def refused(exc: Exception) -> bool:
        if not isinstance(exc, grpc.RpcError) or exc.code() != grpc.StatusCode.INTERNAL:  # type: ignore[attr-defined]
            return False
        md = dict(exc.trailing_metadata() or ())  # type: ignore[attr-defined]
        detail = pb.ErrorResponse.FromString(md["grpc-status-details-bin"])
        return detail.error_type == pb.ErrorResponse.IO and detail.message.startswith("io error: ")

    def check(self, acked: list[tuple[int, int, Any]]) -> None:
        body = b"".join(self.channel.unary_stream("/umadb.v1.DCB/Read")(b"", timeout=WAIT_S))
        got = {se.position: se.event.data for se in pb.ReadResponse.FromString(body).events}
        assert [p for w, i, p in acked if got.get(p) != f"{w}:{i}".encode()] == []


class Documents:
    face = "http"

    def __init__(self, server: Served) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S)
        key = (server.data_dir / "ekodb_admin_key").read_text().strip()
        token = self.http.post("/api/auth/token", json={"api_key": key}).json()["token"]
        self.http.headers["Authorization"] = f"Bearer {token}"

    def write(self, w: int, i: int) -> Any:
        r = self.http.post("/api/insert/c", json={"w": w, "i": i})
        if r.status_code != 200:
            raise HttpError(r)
        return r.json()["id"]

    @staticmethod
    def refused(exc: Exception) -> bool:
        # 500 for the writes whose round's fsync failed, 503 once the store refuses writes
        if not isinstance(exc, HttpError) or exc.response.status_code not in (500, 503):
            return False
        message = exc.response.json()["message"]
        return "not made durable" in message or "no further writes are accepted" in message

    def check(self, acked: list[tuple[int, int, Any]]) -> None:
        rows = {r["id"]: r for r in self.http.post("/api/find/c", json={}).json()}
        want = {rid: {"id": rid, "w": {"type": "Integer", "value": w},
                      "i": {"type": "Integer", "value": i}} for w, i, rid in acked}
        assert [rid for rid, row in want.items() if rows.get(rid) != row] == []


class HttpError(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}: {response.text}")
        self.response = response


FACES = {c.face: c for c in (Resp, Events, Documents)}


@pytest.fixture
def serve() -> Iterator[Callable[[Path, str], Served]]:
    """``serve(data_dir, face)`` starts a server; every one is killed when the test ends."""
    started: list[Served] = []

    def start(data_dir: Path, face: str) -> Served:
        started.append(Served(data_dir, face))
        return started[-1]

    yield start
    for server in started:
        server.kill()


@pytest.mark.once
@pytest.mark.parametrize("face", sorted(FACES))
def test_failed_fsync_is_an_error_on_the_wire_and_later_writes_wait_for_a_restart(
    disk: Mount, serve: Callable[[Path, str], Served], face: str
) -> None:
    client = FACES[face]
    acked: list[tuple[int, int, Any]] = []
    errors: dict[int, Exception] = {}
    progress = threading.Condition()

    def writer(w: int, server: Served) -> None:
        c = client(server)
        i = 0
        while True:
            try:
                token = c.write(w, i)
            except Exception as exc:  # noqa: BLE001 (what the error is, is asserted below)
                with progress:
                    errors[w] = exc
                    progress.notify_all()
                return
            with progress:
                acked.append((w, i, token))
                progress.notify_all()
            i += 1

    server = serve(disk.mountpoint / "data", face)
    threads = [threading.Thread(target=writer, args=(w, server)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    with progress:
        assert progress.wait_for(lambda: len(acked) >= ACKS_BEFORE_FAULT or errors, WAIT_S)
    assert errors == {}, "a write failed before any fsync did"
    disk.fsync_error(True)
    for t in threads:
        t.join(WAIT_S)
    assert not any(t.is_alive() for t in threads), "a writer was never answered"
    # Every writer's last write was refused on the wire, with the face's own error.
    assert sorted(errors) == list(range(WRITERS))
    assert [repr(e) for e in errors.values() if not client.refused(e)] == []
    assert disk.stats()["failed"] > 0

    status, health = server.health()
    assert (status, health["status"]) == (503, "degraded")
    assert health["faces"][face]["status"] == "degraded"

    disk.fsync_error(False)  # the disk "works" again: the store stays refused
    late = client(server)
    with pytest.raises(Exception) as refused:  # noqa: PT011 (checked just below)
        late.write(99, 0)
    assert client.refused(refused.value), repr(refused.value)
    server.kill()
    disk.crash()

    again = serve(disk.backing / "data", face)
    c = client(again)
    c.check(acked)  # every acknowledged write survived the failed fsyncs and the cut
    c.write(100, 0)  # writes are accepted again after the restart
    assert again.health()[0] == 200
