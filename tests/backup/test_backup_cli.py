"""``tuffdb backup`` / ``tuffdb restore`` / ``tuffdb check`` on a data directory with all
three stores, to a directory and to moto's S3, through the real command line."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backup.conftest import all_objects, put_raw
from tuffdb import KVStore
from tuffdb.documents.database import Database
from tuffdb.events.api import Event
from tuffdb.events.store import EventStore


def tuffdb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuffdb", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120, check=False)


def make_data_dir(d: Path) -> bytes:
    d.mkdir()
    key = secrets.token_bytes(32)
    (d / "documents.key").write_bytes(key)
    (d / "ekodb_config.json").write_text('{"default_ttl": 0}')
    with KVStore.open(d / "kv", hot_bytes=8 << 10) as kv:
        for i in range(500):
            kv.put(f"k{i}".encode(), f"v{i}".encode() * 10)
    db = Database.open(d / "documents", encryption_key=key)
    for i in range(30):
        db.collection("people").insert({"n": i, "name": f"p{i}"})
    db.close()
    with EventStore.open(d / "events", segment_bytes=4096) as es:
        for i in range(0, 120, 3):
            es.append([Event("E", f"{j}".encode(), ["t"]) for j in range(i, i + 3)])
    return key


def test_backup_and_restore_round_trip_every_face(target_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_data_dir(data)
    r = tuffdb("backup", str(data), target_url)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert set(summary["stores"]) == {"kv", "events", "documents"}
    assert "documents.key" in r.stderr  # the reminder: keys are never in a backup
    assert not any(k.endswith("documents.key") for k in all_objects(target_url))
    dest = tmp_path / "restored"
    r = tuffdb("restore", target_url, str(dest), "--documents-key-file",
               str(data / "documents.key"))
    assert r.returncode == 0, r.stderr
    r = tuffdb("check", str(dest))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": ok") == 3
    with KVStore.open(dest / "kv") as kv:
        assert [kv.get(f"k{i}".encode()) for i in range(500)] == [
            f"v{i}".encode() * 10 for i in range(500)]
    db = Database.open(dest / "documents", encryption_key=(dest / "documents.key").read_bytes())
    people = db.collection("people").find({"type": "Condition", "content": {
        "field": "n", "operator": "Gte", "value": 0}})
    assert sorted(p["n"] for p in people) == list(range(30))
    db.close()
    with EventStore.open(dest / "events") as es:
        assert [e.event.data for e in es.read()] == [f"{j}".encode() for j in range(120)]
    assert (dest / "ekodb_config.json").read_text() == '{"default_ttl": 0}'
    # A second restore into the now non-empty directory is refused.
    r = tuffdb("restore", target_url, str(dest))
    assert r.returncode == 1 and "not empty" in r.stderr
    # A backup is one point in time: PITR options need an archive.
    r = tuffdb("restore", target_url, str(tmp_path / "x"), "--to-time", "1")
    assert r.returncode == 1 and "archive" in r.stderr
    # A backup never lands on a non-empty destination.
    r = tuffdb("backup", str(data), target_url)
    assert r.returncode == 1 and "not empty" in r.stderr


@pytest.mark.once
def test_bad_backups_give_clear_errors(target_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    key = make_data_dir(data)
    keyfile = str(data / "documents.key")
    assert tuffdb("backup", str(data), target_url).returncode == 0
    objects = all_objects(target_url)
    victim = next(k for k in objects if k.startswith("data/kv/") and k.endswith(".dat"))
    put_raw(target_url, victim, objects[victim][:-1] + b"!")
    r = tuffdb("restore", target_url, str(tmp_path / "r1"), "--documents-key-file", keyfile)
    assert r.returncode == 1 and victim in r.stderr and "damaged" in r.stderr
    assert not (tmp_path / "r1").exists()
    put_raw(target_url, victim, None)
    r = tuffdb("restore", target_url, str(tmp_path / "r2"), "--documents-key-file", keyfile)
    assert r.returncode == 1 and victim in r.stderr and "missing" in r.stderr
    put_raw(target_url, victim, objects[victim])
    r = tuffdb("restore", target_url, str(tmp_path / "r3"))
    assert r.returncode == 1 and "documents" in r.stderr and "key" in r.stderr
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(bytes(32) if key != bytes(32) else b"\x01" * 32)
    r = tuffdb("restore", target_url, str(tmp_path / "r4"), "--documents-key-file", str(wrong))
    assert r.returncode == 1 and "different encryption key" in r.stderr
    manifest = json.loads(objects["manifest.json"])
    manifest["format_version"] = 99
    put_raw(target_url, "manifest.json", json.dumps(manifest).encode())
    r = tuffdb("restore", target_url, str(tmp_path / "r5"), "--documents-key-file", keyfile)
    assert r.returncode == 1 and "format version 99" in r.stderr
    put_raw(target_url, "manifest.json", None)
    r = tuffdb("restore", target_url, str(tmp_path / "r6"), "--documents-key-file", keyfile)
    assert r.returncode == 1 and "no tuffdb backup" in r.stderr


@pytest.mark.once
def test_a_backup_killed_before_its_manifest_is_never_restored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_data_dir(data)
    dest = tmp_path / "dest"
    r = tuffdb("backup", str(data), str(dest),
               env={"TUFFDB_FAILPOINTS": "backup_before_manifest=exit"})
    assert r.returncode == 97
    assert any(dest.rglob("*.dat")), "the files were copied before the kill"
    r = tuffdb("restore", str(dest), str(tmp_path / "r"))
    assert r.returncode == 1 and "no tuffdb backup" in r.stderr
    assert not (tmp_path / "r").exists()
    # The killed backup left its staging links behind; the next backup clears them.
    assert tuffdb("backup", str(data), str(tmp_path / "dest2")).returncode == 0
    assert not (data / ".backup-staging").exists()


def test_a_backup_into_the_data_directory_is_refused(tmp_path: Path) -> None:
    """A destination inside the data directory (or one holding it) is refused before
    anything is written: a backup into ``data/kv/b`` once went through and left the KV
    store with a directory it does not know (``tuffdb check`` then failed)."""
    data = tmp_path / "data"
    make_data_dir(data)
    for dest in (data / "kv" / "b", data / "b", data / "events" / ".." / "c", tmp_path):
        r = tuffdb("backup", str(data), str(dest))
        assert r.returncode == 1, (dest, r.stdout)
        assert "overlaps the data directory" in r.stderr, r.stderr
    assert sorted(p.name for p in data.iterdir()) == [
        "documents", "documents.key", "ekodb_config.json", "events", "kv"]
    r = tuffdb("check", str(data))
    assert r.returncode == 0 and r.stdout.count(": ok") == 3, r.stdout + r.stderr


@pytest.mark.parametrize("where", ["file", "store", "extra", "absolute", "dot"])
def test_a_manifest_naming_files_outside_the_data_directory_is_refused(
        tmp_path: Path, where: str) -> None:
    """A backup is restored from storage someone else may control (a bucket). A manifest
    whose names leave the data directory (``..``, an absolute path) is refused as damaged
    before anything is fetched, and nothing appears outside the new data directory.
    Before, the restore wrote such a file wherever the name pointed, and said it
    succeeded."""
    data, bk = tmp_path / "data", tmp_path / "bk"
    make_data_dir(data)
    assert tuffdb("backup", str(data), str(bk)).returncode == 0
    manifest = json.loads((bk / "manifest.json").read_text())
    victim = tmp_path / "outside"
    escape = "../" * 8 + str(victim).lstrip("/")
    kv = manifest["stores"]["kv"]
    if where == "file":
        kv["files"][0]["name"] = escape
    elif where == "store":
        manifest["stores"]["../../../" + "x" * 3] = manifest["stores"].pop("kv")
    elif where == "extra":
        manifest["extra"][0]["name"] = escape
    elif where == "absolute":
        kv["files"][0]["name"] = str(victim)
    else:
        kv["files"][0]["name"] = "./" + kv["files"][0]["name"]
    (bk / "manifest.json").write_text(json.dumps(manifest))
    r = tuffdb("restore", str(bk), str(tmp_path / "r"), "--documents-key-file",
               str(data / "documents.key"))
    assert r.returncode == 1, r.stdout
    assert "manifest.json" in r.stderr and "outside" in r.stderr, r.stderr
    assert not victim.exists() and not (tmp_path / "xxx").exists()
    assert not (tmp_path / "r").exists()
