"""CPU per by-id update and read through the ekoDB app, in process (not a benchmark: see
bench/ycsb.py).

    python bench/profile_ekodb_update.py
    TUFFDB_NATIVE_BUILD=<build> taskset -c 0 python bench/profile_ekodb_update.py

Opens the real face on a fresh directory (engine durability none), inserts 2,000 YCSB-like
records (ten 100-byte fields), reads each once (so the read cache holds them), then calls
``App.handle`` directly: 30,000 updates of one random field to a random record, then
30,000 reads, in blocks of 10,000, and prints the best block's thread CPU per call. No
sockets or HTTP parsing: what an update and a read cost in the app, for A/B runs of the
update path between builds (pin both to one core and alternate them).
"""

# Profiling support, not library code.
# ruff: noqa: INP001, CPY001, T201, S311
from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from tuffdb.server.config import ServeConfig
from tuffdb.server.ekodb_http import EkoDBFace
from tuffdb.server.ekodb_proto import Request

RECORDS = 2000
BLOCK = 10_000


def main() -> None:
    d = Path(tempfile.mkdtemp(prefix="profile-ekodb-update-"))
    face = EkoDBFace(ServeConfig(data_dir=d, host="127.0.0.1", http_port=0,
                                 durability="none", extra={"http": {}}))
    try:
        app = face.app
        admin = (d / "ekodb_admin_key").read_text().strip()
        login = Request("POST", b"/api/auth/token", {"content-type": "application/json"},
                        json.dumps({"api_key": admin}).encode())
        token = json.loads(app.handle(login).body)["token"]
        h = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        for i in range(RECORDS):
            rec = {"id": f"user{i}", **{f"field{j}": "x" * 100 for j in range(10)}}
            app.handle(Request("POST", b"/api/insert/usertable", h, json.dumps(rec).encode()))
            app.handle(Request("GET", f"/api/find/usertable/user{i}".encode(), h, b""))
        rng = random.Random(1)
        letters = "abcdefghijklmnopqrstuvwxyz"
        updates = [Request("PUT", f"/api/update/usertable/user{rng.randrange(RECORDS)}".encode(),
                           h, json.dumps({f"field{rng.randrange(10)}": "".join(
                               rng.choice(letters) for _ in range(100))}).encode())
                   for _ in range(3 * BLOCK)]
        reads = [Request("GET", f"/api/find/usertable/user{rng.randrange(RECORDS)}".encode(), h,
                         b"") for _ in range(3 * BLOCK)]
        for name, reqs in (("update", updates), ("read", reads)):
            best = float("inf")
            for k in range(3):
                t = time.thread_time()
                for q in reqs[k * BLOCK:(k + 1) * BLOCK]:
                    app.handle(q)
                best = min(best, (time.thread_time() - t) / BLOCK * 1e6)
            print(f"{name}: {best:.2f} us of CPU per call (best of 3 blocks of {BLOCK:,})")
    finally:
        face.db.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
