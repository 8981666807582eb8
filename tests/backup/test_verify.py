"""A backup checks a store's big immutable files by their own frames (``check:
"frames"``: a digest of the segment header, frame headers and trailer, no payload read);
the restore verifies every frame's CRC against the bytes it fetched. A flipped payload
byte, which such a digest never read, must still be caught and named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb.backup.datadir import Keys, locked_sources
from tuffdb.backup.restore import restore
from tuffdb.backup.take import take_backup
from tuffdb.errors import CorruptionError
from tuffdb.events.api import Event
from tuffdb.events.store import EventStore
from tuffdb.storage.objstore import open_target


def backed_up(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    data = tmp_path / "data"
    with KVStore.open(data / "kv", hot_bytes=16 << 10) as kv:
        for i in range(400):
            kv.put(f"k{i}".encode(), f"value {i} ".encode() * 20)
    with EventStore.open(data / "events", segment_bytes=4096) as es:
        for i in range(0, 200, 4):
            es.append([Event("E", f"{j}".encode() * 10, ["t"]) for j in range(i, i + 4)])
    sources, held = locked_sources(data)
    try:
        take_backup(sources, open_target(tmp_path / "bk"), data / ".staging")
    finally:
        for h in held:
            h.release()
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    entries = {f["name"]: f for st in manifest["stores"].values() for f in st["files"]}
    return tmp_path / "bk", entries


def test_segments_are_checked_by_their_frames_and_a_payload_flip_is_named(tmp_path: Path) -> None:
    bk, entries = backed_up(tmp_path)
    checks = {name: (e["check"], e["trailer"]) for name, e in entries.items()}
    dat = next(n for n in checks if n.endswith(".dat"))
    sealed = next(n for n, e in entries.items() if n.startswith("log/") and e["kind"] == "file")
    assert checks[dat] == ("frames", 16) and checks[sealed] == ("frames", 0)
    assert all(c == ("crc32c", 0) for n, c in checks.items() if n.endswith((".hint", ".idx")))
    restore(str(bk), tmp_path / "ok", keys=Keys())  # intact: restores
    for name in (dat, sealed):
        path = bk / entries[name]["object"]
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x40  # inside a payload: not in the backup's digest
        path.write_bytes(raw)
        with pytest.raises(CorruptionError, match=f"{entries[name]['object']} is damaged.*"
                                                  "checksum mismatch"):
            restore(str(bk), tmp_path / f"bad-{len(raw)}", keys=Keys())
        raw[len(raw) // 2] ^= 0x40
        path.write_bytes(raw)
