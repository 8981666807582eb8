"""SIGKILL the ekoDB face under durable_operations=true: no acknowledged write is lost,
and the data files hold no plaintext of the records (encryption at rest is on by default).

Four client threads insert records as fast as the server acknowledges them; the test
kills the server with SIGKILL while requests are in flight, restarts it on the same
directory, and checks that every acknowledged id is readable with its exact body.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from ekodb_harness import EkoServer  # noqa: E402

MARKER = "PLAINTEXT-MARKER-7f3a"
THREADS = 4
KILL_AFTER = 300


def test_sigkill_loses_no_acknowledged_write_and_files_hold_no_plaintext(tmp_path: Path) -> None:
    server = EkoServer(tmp_path, durable_operations=True)
    acked: dict[str, int] = {}
    lock = threading.Lock()
    enough = threading.Event()

    def writer(n: int) -> None:
        c = server.client()
        i = 0
        while True:
            body = {"writer": n, "seq": i, "note": f"{MARKER} {n}/{i}"}
            try:
                r = c.json("POST", "/api/insert/crashy", body)
            except httpx.HTTPError:
                return  # the server died under us: this write was never acknowledged
            if r.status_code != 200:
                return
            with lock:
                acked[r.json()["id"]] = n * 1_000_000 + i
                if len(acked) >= KILL_AFTER:
                    enough.set()
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    enough.wait(120)
    server.kill()
    for t in threads:
        t.join(60)
    assert len(acked) >= KILL_AFTER

    again = EkoServer(tmp_path)
    c = again.client()
    rows = c.json("POST", "/api/find/crashy", {}).json()
    found = {r["id"]: r["writer"]["value"] * 1_000_000 + r["seq"]["value"] for r in rows}
    missing = [rid for rid in acked if rid not in found]
    assert missing == [], f"{len(missing)} acknowledged writes lost"
    assert all(found[rid] == v for rid, v in acked.items())
    c.close()
    assert again.stop() == 0

    files = [p for p in (tmp_path / "documents").rglob("*") if p.is_file()]
    for secret in (MARKER.encode(), b"crashy", next(iter(acked)).encode(), again.admin_key.encode()):
        assert [p.name for p in files if secret in p.read_bytes()] == [], secret
