"""A running ``tuffdb serve`` with every face: an online backup (``tuffdb backup --server``
-> ``POST /backup``) while real clients write through RESP, gRPC and HTTP, then restore;
and ``--archive`` to moto's S3 with the server killed mid-upload (SIGKILL at the step
between a chunk and the head that would list it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis
import umadb

from tests.backup.conftest import s3_env
from tests.compat.ekodb_harness import Client
from tests.compat.test_serve_host import Server, free_port
from tuffdb import KVStore
from tuffdb.documents.database import Database
from tuffdb.events.store import EventStore

pytestmark = pytest.mark.once


def serve(data: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[Server, dict]:
    ports = {n: free_port() for n in ("admin", "resp", "grpc", "http")}
    args = ["--data-dir", str(data), "--durability", "always"]
    for n, p in ports.items():
        args += [f"--{n}-port", str(p)]
    full = {k: v for k, v in os.environ.items() if not k.startswith("TUFFDB_")}
    server = Server([*args, *extra], {**full, **(env or {})}, launcher=False)
    return server, ports


def tuffdb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuffdb", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300, check=False)


class Writers:
    """One thread per face, each writing numbered records and counting acknowledgements."""

    def __init__(self, ports: dict[str, int], data: Path) -> None:
        self.acked = {"kv": 0, "events": 0, "documents": 0}
        self.stop = threading.Event()
        self.cv = threading.Condition()
        r = redis.Redis(port=ports["resp"])
        ev = umadb.Client(url=f"http://127.0.0.1:{ports['grpc']}")
        docs = Client(f"http://127.0.0.1:{ports['http']}",
                      (data / "ekodb_admin_key").read_text().strip())
        self.ops = {
            "kv": lambda i: r.set(f"k{i}", f"v{i}"),
            "events": lambda i: ev.append([umadb.Event(event_type="E", data=f"{i}".encode())]),
            "documents": lambda i: docs.json("POST", "/api/insert/c", {"n": i}).raise_for_status(),
        }
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in self.ops]
        for t in self.threads:
            t.start()

    def _run(self, name: str) -> None:
        op = self.ops[name]
        i = 0
        while not self.stop.is_set():
            op(i)
            i += 1
            with self.cv:
                self.acked[name] = i
                self.cv.notify_all()

    def wait(self, n: int) -> dict[str, int]:
        with self.cv:
            assert self.cv.wait_for(lambda: min(self.acked.values()) >= n, 120), self.acked
            return dict(self.acked)

    def finish(self) -> dict[str, int]:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        return dict(self.acked)


def restored_counts(dest: Path, before: dict[str, int], after: dict[str, int]) -> None:
    """Every write acknowledged before the backup began is there; none begun after it
    returned; the restored events are exactly a prefix."""
    with KVStore.open(dest / "kv") as kv:
        # (the RESP face stores a string with a one-byte type tag in front)
        assert all((kv.get(f"k{i}".encode()) or b"").endswith(f"v{i}".encode())
                   for i in range(before["kv"]))
        assert kv.get(f"k{after['kv'] + 1}".encode()) is None
    with EventStore.open(dest / "events") as es:
        head = es.head() or 0
        assert before["events"] <= head <= after["events"] + 1
        assert [e.event.data for e in es.read()] == [f"{i}".encode() for i in range(head)]
    db = Database.open(dest / "documents", encryption_key=(dest / "documents.key").read_bytes())
    ns = {r["n"] for r in db.collection("c").find({"type": "Condition", "content": {
        "field": "n", "operator": "Gte", "value": 0}})}
    db.close()
    assert set(range(before["documents"])) <= ns
    assert max(ns) <= after["documents"]


def test_online_backup_while_every_face_takes_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server, ports = serve(data)
    try:
        server.wait_for("ready")
        w = Writers(ports, data)
        try:
            w.wait(50)
            before = dict(w.acked)
            r = tuffdb("backup", "--server", f"http://127.0.0.1:{ports['admin']}",
                       str(tmp_path / "bk"))
            after = dict(w.acked)
            assert r.returncode == 0, r.stderr
            assert set(json.loads(r.stdout)["stores"]) == {"kv", "events", "documents"}
            w.wait(min(after.values()) + 30)  # writes go on after the backup
            # pace is a boolean (the default true: the backup above was paced)
            bad = urllib.request.Request(
                f"http://127.0.0.1:{ports['admin']}/backup", method="POST",
                data=json.dumps({"dest": str(tmp_path / "bk2"), "pace": "yes"}).encode())
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(bad, timeout=60)
            assert refused.value.code == 400
            assert '"pace": false' in json.loads(refused.value.read())["error"]
            assert not (tmp_path / "bk2").exists()
        finally:
            w.finish()
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.finish() == 0
    dest = tmp_path / "r"
    r = tuffdb("restore", str(tmp_path / "bk"), str(dest), "--documents-key-file",
               str(data / "documents.key"))
    assert r.returncode == 0, r.stderr
    assert tuffdb("check", str(dest)).returncode == 0
    restored_counts(dest, before, after)


def test_sigkill_mid_archive_upload_leaves_a_restorable_archive(
    tmp_path: Path, bucket: str, moto_port: int,
) -> None:
    env = {**s3_env(moto_port), "TUFFDB_S3_TIMEOUT_S": "5"}
    url = f"s3://{bucket}/arch"
    data = tmp_path / "data"
    server, ports = serve(data, "--archive", url, "--archive-interval", "0.2",
                          env={**env, "TUFFDB_FAILPOINTS": "archive_before_head=exit"})
    server.wait_for("base backup archived")
    # The first writes make the first chunk; the server dies right after uploading it,
    # before the head lists it. Writes acknowledged until then must survive.
    acked = 0
    rc = redis.Redis(port=ports["resp"])
    with pytest.raises(redis.ConnectionError):
        for i in range(100_000):
            rc.set(f"k{i}", f"v{i}")
            acked = i + 1
    assert server.finish() == 97
    r = tuffdb("restore", url, str(tmp_path / "r1"), "--documents-key-file",
               str(data / "documents.key"), env=env)
    assert r.returncode == 0, r.stderr
    assert tuffdb("check", str(tmp_path / "r1")).returncode == 0
    # The second server claims a newer epoch and archives everything acknowledged.
    server, ports = serve(data, "--archive", url, "--archive-interval", "0.2", env=env)
    claimed: dict[str, Any] = server.wait_for("archive claimed")
    assert claimed["epoch"] == 2
    server.wait_for("base backup archived")
    rc = redis.Redis(port=ports["resp"])
    for i in range(acked, acked + 100):
        rc.set(f"k{i}", f"v{i}")
    server.proc.send_signal(signal.SIGTERM)  # stopping ships what is pending
    assert server.finish() == 0
    listing = json.loads(tuffdb("archive", "list", url, env=env).stdout)
    assert listing["epoch"] == 2 and len(listing["base_backups"]) >= 2
    r = tuffdb("restore", url, str(tmp_path / "r2"), "--documents-key-file",
               str(data / "documents.key"), env=env)
    assert r.returncode == 0, r.stderr
    with KVStore.open(tmp_path / "r2" / "kv") as kv:
        assert all((kv.get(f"k{i}".encode()) or b"").endswith(f"v{i}".encode())
                   for i in range(acked + 100))


def test_a_server_with_a_secret_backs_up_only_for_its_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server, ports = serve(data, "--requirepass", "pw", "--grpc-port", "0", "--http-port", "0")
    try:
        server.wait_for("ready")
        redis.Redis(port=ports["resp"], password="pw").set("k", "v")
        url = f"http://127.0.0.1:{ports['admin']}"
        clean = {k: "" for k in ("TUFFDB_API_KEY", "TUFFDB_REQUIREPASS")}
        refused = tuffdb("backup", "--server", url, str(tmp_path / "no"), env=clean)
        assert refused.returncode == 1
        assert "401" in refused.stderr and "Bearer" in refused.stderr
        assert not (tmp_path / "no").exists()
        inside = tuffdb("backup", "--server", url, str(data / "kv" / "bk"),
                        env={**clean, "TUFFDB_REQUIREPASS": "pw"})
        assert inside.returncode == 1 and "400" in inside.stderr
        assert "overlaps the data directory" in inside.stderr
        assert not (data / "kv" / "bk").exists()
        done = tuffdb("backup", "--server", url, str(tmp_path / "bk"),
                      env={**clean, "TUFFDB_REQUIREPASS": "pw"})
        assert done.returncode == 0, done.stderr
        assert set(json.loads(done.stdout)["stores"]) == {"kv"}
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.finish() == 0
