"""Backup manifests: what a backup (or an archive's base backup) holds, with checksums
(spec: docs/format/backup.md).

A manifest is JSON, written last and with a conditional create: a backup without one
is incomplete and never restored from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tuffdb._version import __version__
from tuffdb.errors import CorruptionError, VersionMismatchError
from tuffdb.storage.files import check_inside

FORMAT = "tuffdb-backup"
FORMAT_VERSION = 2
MANIFEST_KEY = "manifest.json"


#: How a file entry's ``crc32c`` was computed (docs/format/backup.md).
CHECK_CRC32C = "crc32c"  # of the object's bytes
CHECK_FRAMES = "frames"  # of its segment header, frame headers and trailer


@dataclass
class FileEntry:
    name: str  # relative to the store directory (or the data directory for extra files)
    size: int
    crc32c: int
    kind: str  # "file" (immutable) | "log" (cut at its position)
    object: str  # key relative to the backup's (or archive's) root
    check: str = CHECK_CRC32C
    trailer: int = 0  # "frames": raw bytes after the last frame (a KV segment's trailer)


@dataclass
class StoreEntry:
    kind: str  # "kv" | "events"
    key_id: int  # 0: not encrypted; else the id of the key its files were written with
    version: int  # the shipper version the snapshot stands at
    time_ns: int  # wall-clock time of the snapshot
    positions: dict[str, int]
    files: list[FileEntry]
    line: str = ""  # archive bases: the line of changes that follows this snapshot


@dataclass
class Manifest:
    kind: str  # "backup" | "base"
    started_ns: int
    finished_ns: int
    stores: dict[str, StoreEntry]
    extra: list[FileEntry] = field(default_factory=list)
    tuffdb_version: str = __version__
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def encode(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()

    @property
    def time_ns(self) -> int:
        """The latest snapshot time of its stores: the point the backup represents."""
        return max((s.time_ns for s in self.stores.values()), default=self.finished_ns)


def check_format(doc: Any, where: str, expect: str, version: int) -> None:
    """Refuse a document of another format or of a newer version, naming it."""
    if not isinstance(doc, dict) or doc.get("format") != expect:
        raise CorruptionError(f"{where} is not a {expect} document", path=where)
    got = doc.get("format_version")
    if not isinstance(got, int):
        raise CorruptionError(f"{where} has no format_version", path=where)
    if got > version:
        raise VersionMismatchError(
            f"{where} has format version {got}; this tuffdb ({__version__}) reads up to "
            f"{version}: restore with a newer tuffdb")


def decode(data: bytes, where: str) -> Manifest:
    """Parse a manifest; CorruptionError (naming ``where``) when damaged."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptionError(f"{where} is damaged: {exc}", path=where) from None
    check_format(doc, where, FORMAT, FORMAT_VERSION)
    try:
        stores = {
            check_inside(name, where, single=True):
                _store(StoreEntry(**{**s, "files": [_entry(f, where) for f in s["files"]]}),
                       where)
            for name, s in doc["stores"].items()
        }
        extra = [_entry(f, where) for f in doc.get("extra", [])]
        return Manifest(doc["kind"], doc["started_ns"], doc["finished_ns"], stores, extra,
                        doc.get("tuffdb_version", "?"), doc["format"], doc["format_version"])
    except (KeyError, TypeError) as exc:
        raise CorruptionError(f"{where} is damaged: {exc!r}", path=where) from None


def is_count(value: Any) -> bool:
    """A non-negative int that is not a bool (a size, offset, time or version)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def count(value: Any, what: str) -> int:
    """``value`` if :func:`is_count`, else TypeError naming ``what``."""
    if not is_count(value):
        raise TypeError(f"{what} is {value!r}, not a count")
    return int(value)


def _store(entry: StoreEntry, where: str) -> StoreEntry:
    """The fields restore reads, of the right types (TypeError otherwise)."""
    if (entry.kind not in ("kv", "events") or not all(map(is_count, (
            entry.key_id, entry.version, entry.time_ns))) or not isinstance(entry.line, str)
            or not isinstance(entry.positions, dict)
            or not all(map(is_count, entry.positions.values()))):
        raise TypeError(f"a store entry of kind {entry.kind!r} has fields of the wrong type")
    for name in entry.positions:
        check_inside(name, where)
    return entry


def _entry(doc: dict[str, Any], where: str) -> FileEntry:
    entry = FileEntry(**doc)  # version 1 entries have no check: "crc32c"
    check_inside(entry.name, where)  # (restore writes it under the store's directory)
    if (entry.kind not in ("file", "log") or not isinstance(entry.object, str)
            or not all(map(is_count, (entry.size, entry.crc32c, entry.trailer)))):
        raise CorruptionError(f"{where}: {entry.name} has fields of the wrong type",
                              path=where)
    if entry.check not in (CHECK_CRC32C, CHECK_FRAMES):
        raise CorruptionError(f"{where}: {entry.name} has an unknown check {entry.check!r}",
                              path=where)
    return entry
