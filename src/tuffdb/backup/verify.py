"""What a restore checks before it puts a data directory in place, without replaying it.

Every fetched object has already been compared byte for byte with the manifest (size and
CRC-32C): the directory is exactly what the store held at the backup's instant. This
pass checks the structure that makes those bytes a store, from the files' own
checksums: every segment header; a KV cold segment's trailer, footer and block index;
every frame of hints, logs and event index files, and nothing after a log's last frame
but unwritten (zero) space. The bulk (KV blocks, sealed event segments) is covered by
the manifest's CRC here; its frame checksums are verified again whenever a block is
read, and in full by ``restore --check`` or ``tuffdb check`` (which open the stores and
parse every record in Python: tens of seconds per GB, where this pass reads a few
percent of the bytes). Nothing is decoded, decompressed, decrypted or replayed.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

from tuffdb._format.checksum import crc32c, crc32c_extend
from tuffdb._format.record import check_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, unpack_header
from tuffdb.backup.datadir import STORES, Keys
from tuffdb.errors import CorruptionError, Error
from tuffdb.kv.cold import parse_segment
from tuffdb.storage.codec import Codec

def verify_frames(path: Path, trailer: int) -> int:
    """Verify every frame's CRC of a file checked by its frames (a segment header, whole
    frames, then ``trailer`` raw bytes) and return its digest (``frames_digest``).

    :raises CorruptionError: a damaged frame, or frames that do not end ``trailer``
        bytes before the end.
    """
    with _mapped(path) as m:
        stop = len(m) - trailer
        pos, error, digest = check_frames(m, SEGMENT_HEADER_SIZE, stop,
                                         crc32c(m[:SEGMENT_HEADER_SIZE]))
        if pos != stop:
            raise CorruptionError(f"{error or 'no frame'} at offset {pos}", path=str(path),
                                  offset=pos)
        result: int = crc32c_extend(digest, m[stop:])
        return result


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < SEGMENT_HEADER_SIZE:
            raise CorruptionError(f"too short for a tuffdb file ({size} bytes)", path=str(path))
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as m:
            yield m
    finally:
        os.close(fd)


def verify_file(path: Path, where: str, *, kind: str, codec: Codec) -> None:
    """Check one file. ``kind``: ``"segment"`` (a KV cold segment: header, trailer, footer
    and block index, as opening it does), ``"sealed"`` (an event log segment: its
    header), ``"one"`` (frames to the very end: hints, event index files) or ``"log"``
    (frames, then only unwritten space).

    :raises CorruptionError: naming the file and the offset.
    """
    try:
        with _mapped(path) as m:
            size = len(m)
            if kind == "segment":
                parse_segment(lambda n, off: m[off : off + n], size, where, codec)
                return
            unpack_header(m[:SEGMENT_HEADER_SIZE], where)
            if kind == "sealed":
                return
            end, error, _ = check_frames(m, SEGMENT_HEADER_SIZE, size)
            if end < size and not (kind == "log" and m[end:] == bytes(size - end)):
                raise CorruptionError(f"{error or 'unexpected bytes'} at offset {end}",
                                      path=where, offset=end)
    except OSError as exc:
        raise CorruptionError(f"unreadable: {exc}", path=where) from None
    except CorruptionError as exc:
        raise CorruptionError(exc.reason, path=where, offset=exc.offset) from None


def _kind_of(store_kind: str, rel: str, active: str) -> str | None:
    if store_kind == "kv":
        return {"dat": "segment", "hint": "one", "log": "log"}.get(rel.rpartition(".")[2])
    if rel.startswith("log/") and rel.endswith(".log"):
        return "log" if rel == active else "sealed"
    return "one" if rel.startswith("index/") and rel.endswith(".idx") else None


def verify_data_dir(data_dir: Path, keys: Keys) -> int:
    """Check every store file under ``data_dir`` (``keys``: each store's key, needed to
    read a KV segment's block index); return how many files were checked.

    :raises CorruptionError: naming the first damaged file.
    """
    checked = 0
    for name, store_kind in STORES.items():
        root = data_dir / name
        if not root.is_dir():
            continue
        codec = Codec(key=keys.for_store(name))
        paths = sorted(p for p in root.rglob("*") if p.is_file())
        rels = [p.relative_to(root).as_posix() for p in paths]
        active = max((r for r in rels if r.startswith("log/")), default="")
        for path, rel in zip(paths, rels, strict=True):
            kind = _kind_of(store_kind, rel, active)
            if kind is None:
                continue
            try:
                verify_file(path, f"{name}/{rel}", kind=kind, codec=codec)
            except Error as exc:
                raise CorruptionError(f"the restored {name} store is damaged: {exc}",
                                      path=f"{name}/{rel}") from None
            checked += 1
    return checked
