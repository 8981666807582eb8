"""The events face as ``tuffdb serve`` runs it (host, config, data_dir/events), with the real
``umadb`` client: append, read, subscribe, errors, health, and restart keeps the data."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import umadb

from tuffdb.testing.etcd import free_port


class Serve:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuffdb", "serve", "--data-dir", str(data_dir),
             "--grpc-port", str(port), "--resp-port", "0", "--http-port", "0",
             "--admin-port", "0"],
            stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # JSON lines; "ready" is the synchronisation point
            try:
                event = json.loads(line).get("event")
            except ValueError:
                continue
            if event == "ready":
                break
        else:
            raise RuntimeError(f"tuffdb serve exited with {self.proc.wait()}")
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> int:
        self.proc.terminate()
        rc = self.proc.wait(60)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return rc


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    yield tmp_path / "data", free_port()


def test_events_face_under_tuffdb_serve(serve: tuple[Path, int]) -> None:
    data_dir, port = serve
    s = Serve(data_dir, port)
    try:
        c = umadb.Client(url=s.url)
        assert c.check_health() == umadb.ServingStatus.SERVING
        assert c.head() is None
        sub = c.subscribe()
        got: list[int] = []
        t = threading.Thread(target=lambda: got.extend(next(sub).position for _ in range(2)))
        t.start()
        assert c.append([umadb.Event(event_type="A", data=b"1", tags=["x"]),
                         umadb.Event(event_type="B", data=b"2")]) == 2
        t.join(30)
        assert got == [1, 2]
        sub.cancel()
        cond = umadb.AppendCondition(
            fail_if_events_match=umadb.Query(items=[umadb.QueryItem(tags=["x"])]), after=0)
        with pytest.raises(umadb.IntegrityError):
            c.append([umadb.Event(event_type="C", data=b"3")], condition=cond)
        c.close()
    finally:
        assert s.stop() == 0
    assert (data_dir / "events" / "log").is_dir()
    s = Serve(data_dir, port)
    try:
        c = umadb.Client(url=s.url)
        assert [(e.position, e.event.data) for e in c.read()] == [(1, b"1"), (2, b"2")]
        c.close()
    finally:
        assert s.stop() == 0
