"""SIGKILL at random moments: of a running ``tuffdb backup``, and of a server archiving
to S3 (moto) while a client writes. The failpoint tests stop a process at one chosen
step; here the kill lands wherever the process happens to be (copying, fsyncing, in a
PUT, between a chunk and the head that would list it).

Whatever the moment, a restore must either refuse (nothing complete to trust) or give
exactly a state the store had: every write acknowledged before the archive's stored
head is there with its value, nothing after a gap, nothing that was never written. The
moments come from a seeded RNG (``TUFFDB_TEST_SEED`` replays a run; the seed is in
every failure message).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.backup.conftest import s3_env
from tests.backup.test_backup_server import serve
from tuffdb import KVStore
from tuffdb.backup.archive import read_head
from tuffdb.storage.objstore import open_target

pytestmark = pytest.mark.once

SEED = int(os.environ.get("TUFFDB_TEST_SEED") or random.randrange(1 << 30))
WAIT_S = 60
VALUE = 1024


def tuffdb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuffdb", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300, check=False)


def kv_value(i: int) -> bytes:
    return random.Random(i).randbytes(VALUE - 16) + f"{i:016d}".encode()


def wait_until(pred: Any, what: str) -> None:
    """Poll a condition on the file system or a process (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {WAIT_S}s (seed {SEED})")
        time.sleep(0.002)


def test_sigkill_during_a_backup_leaves_nothing_a_restore_trusts(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data = tmp_path / "data"
    n = 24_000  # ~24 MB in several cold segments: a backup takes a good fraction of a second
    with KVStore.open(data / "kv", hot_bytes=4 << 20) as kv:
        for i in range(0, n, 1000):
            kv.put_many((f"k{j}".encode(), kv_value(j)) for j in range(i, i + 1000))
    outcomes = []
    for attempt in range(4):
        dest = tmp_path / f"dest{attempt}"
        proc = subprocess.Popen([sys.executable, "-m", "tuffdb", "backup", str(data), str(dest)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill once copying has begun (an object file exists), a random moment later.
        wait_until(lambda: proc.poll() is not None or any(dest.rglob("*.dat")),
                   "the backup's first copy")
        delay = 0.0 if attempt == 0 else rng.uniform(0, 0.4)
        time.sleep(delay)  # the random kill moment (not a synchronisation)
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT_S)
        complete = (dest / "manifest.json").exists()
        outcomes.append(complete)
        target = tmp_path / f"restored{attempt}"
        r = tuffdb("restore", str(dest), str(target))
        where = f"attempt {attempt}, kill {delay:.3f}s after the first copy (seed {SEED})"
        if not complete:
            assert r.returncode == 1 and "no tuffdb backup" in r.stderr, where
            assert not target.exists(), where
            continue
        assert r.returncode == 0, f"{where}: {r.stderr}"
        with KVStore.open(target / "kv") as restored:
            assert [restored.get(f"k{i}".encode()) for i in range(n)] == [
                kv_value(i) for i in range(n)], where
    assert not all(outcomes), f"no kill landed inside a backup (seed {SEED})"
    # The killed backups left the store as it was: one more backup is complete and exact.
    assert tuffdb("backup", str(data), str(tmp_path / "final")).returncode == 0
    assert tuffdb("restore", str(tmp_path / "final"), str(tmp_path / "rf")).returncode == 0
    with KVStore.open(tmp_path / "rf" / "kv") as restored:
        assert restored.get(f"k{n - 1}".encode()) == kv_value(n - 1)


class Writer:
    """SET k<i> over RESP in order, recording each acknowledgement's wall time, until
    the server goes away."""

    def __init__(self, port: int, first: int, acks: list[int]) -> None:
        self.next = first
        self.acks = acks  # acks[i]: time_ns when k<i> was acknowledged
        self.thread = threading.Thread(target=self._run, args=(port,))
        self.thread.start()

    def _run(self, port: int) -> None:
        client = redis.Redis(port=port, socket_timeout=WAIT_S)
        try:
            while True:
                client.set(f"k{self.next}", kv_value(self.next))
                self.acks.append(time.time_ns())
                self.next += 1
        except redis.ConnectionError:
            return  # the server was killed


def archived_through_ns(url: str) -> int:
    """The time of the last KV change the archive's stored head lists (in the line a
    restore to now replays: the newest base's)."""
    got = read_head(open_target(url))
    assert got is not None
    head = got[0]
    base = max(head.bases, key=lambda b: b["time_ns"])
    return int(head.lines[f"kv/{base['lines']['kv']}"]["through_ns"])


def test_sigkill_of_an_archiving_server_never_yields_a_wrong_restore(
    tmp_path: Path, bucket: str, moto_port: int,
) -> None:
    rng = random.Random(SEED)
    env = {**s3_env(moto_port), "TUFFDB_S3_TIMEOUT_S": "5"}
    url = f"s3://{bucket}/arch"
    data = tmp_path / "data"
    acks: list[int] = []
    for round_no in range(3):
        server, ports = serve(data, "--archive", url, "--archive-interval", "0.05", env=env)
        server.wait_for("base backup archived")
        writer = Writer(ports["resp"], len(acks), acks)
        wait_until(lambda: len(acks) > 0, "a first acknowledged write")  # noqa: B023
        delay = rng.uniform(0.05, 0.8)
        time.sleep(delay)  # the random kill moment, while writes and uploads go on
        server.proc.send_signal(signal.SIGKILL)
        assert server.finish() == -signal.SIGKILL
        writer.thread.join(WAIT_S)
        where = f"round {round_no}, SIGKILL after {delay:.3f}s of writes (seed {SEED})"
        through_ns = archived_through_ns(url)
        target = tmp_path / f"r{round_no}"
        r = tuffdb("restore", url, str(target), "--documents-key-file",
                   str(data / "documents.key"), env=env)
        assert r.returncode == 0, f"{where}: {r.stderr}"
        assert tuffdb("check", str(target)).returncode == 0, where
        with KVStore.open(target / "kv") as kv:
            # (the RESP face stores a string behind a one-byte type tag)
            got = [kv.get(f"k{i}".encode()) for i in range(len(acks) + 1)]
        present = [g is not None for g in got]
        held = present.index(False)
        assert not any(present[held:]), f"{where}: a gap after k{held}"
        assert all(got[i].endswith(kv_value(i)) for i in range(held)), where  # type: ignore[union-attr]
        durable = sum(1 for t in acks if t <= through_ns)
        assert held >= durable, (f"{where}: {durable} writes were acknowledged before the "
                                 f"archive's head, the restore has {held}")
    listing = json.loads(tuffdb("archive", "list", url, env=env).stdout)
    assert listing["epoch"] == 3  # each restart claimed the archive anew
