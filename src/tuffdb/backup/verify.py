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

import os
from pathlib import Path

from tuffdb._format.checksum import crc32c, crc32c_extend
from tuffdb._format.record import FRAME, FRAME_SIZE, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, unpack_header
from tuffdb.backup.datadir import STORES, Keys
from tuffdb.errors import CorruptionError, Error
from tuffdb.kv.cold import parse_segment
from tuffdb.storage.codec import Codec
from tuffdb.storage.files import pread_exact

#: Bytes scanned per read (a frame larger than this is read whole).
WINDOW = 16 << 20
_ZEROS = bytes(1 << 16)


def scan_file(fd: int, start: int, stop: int, digest: int = 0) -> tuple[int, str | None, int]:
    """Walk the frames of ``fd`` in ``[start, stop)``, verifying each one's CRC; return
    (offset just past the last valid frame, why the walk stopped early or None, CRC-32C
    of the walked frames' headers extending ``digest``)."""
    pos = start
    while pos < stop:
        want = min(WINDOW, stop - pos)
        if stop - pos >= FRAME_SIZE:  # one frame larger than the window: read it whole
            _, length, _, _ = FRAME.unpack(pread_exact(fd, FRAME_SIZE, pos))
            want = max(want, min(FRAME_SIZE + length, stop - pos))
        buf = pread_exact(fd, want, pos)
        res = scan_frames(buf)
        digest = crc32c_extend(digest, b"".join(
            buf[f.offset : f.offset + FRAME_SIZE] for f in res.frames))
        cut = pos + len(buf) < stop and res.end > 0  # the window ended inside a frame
        if res.error and not (cut and res.error.startswith("torn")):
            return pos + res.end, res.error, digest
        pos += res.end  # a frame the window cut starts the next read
    return pos, None, digest


def verify_frames(path: Path, trailer: int) -> int:
    """Verify every frame's CRC of a file checked by its frames (a segment header, whole
    frames, then ``trailer`` raw bytes) and return its digest (``frames_digest``).

    :raises CorruptionError: a damaged frame, or frames that do not end ``trailer``
        bytes before the end.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        head = pread_exact(fd, SEGMENT_HEADER_SIZE, 0)
        stop = size - trailer
        end, error, digest = scan_file(fd, SEGMENT_HEADER_SIZE, stop, crc32c(head))
        if end != stop:
            raise CorruptionError(f"{error or 'no frame'} at offset {end}", path=str(path),
                                  offset=end)
        return crc32c_extend(digest, pread_exact(fd, trailer, stop))
    finally:
        os.close(fd)


def _zero_from(fd: int, pos: int, size: int) -> bool:
    """Whether bytes ``[pos, size)`` are all zero (unwritten space ahead of a log's end)."""
    while pos < size:
        buf = pread_exact(fd, min(len(_ZEROS), size - pos), pos)
        if buf != _ZEROS[: len(buf)]:
            return False
        pos += len(buf)
    return True


def verify_file(path: Path, where: str, *, kind: str, codec: Codec) -> None:
    """Check one file. ``kind``: ``"segment"`` (a KV cold segment: header, trailer, footer
    and block index, as opening it does), ``"sealed"`` (an event log segment: its
    header), ``"one"`` (frames to the very end: hints, event index files) or ``"log"``
    (frames, then only unwritten space).

    :raises CorruptionError: naming the file and the offset.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if kind == "segment":
            parse_segment(lambda n, off: pread_exact(fd, n, off), size, where, codec)
            return
        unpack_header(pread_exact(fd, SEGMENT_HEADER_SIZE, 0), where)
        if kind == "sealed":
            return
        end, error, _ = scan_file(fd, SEGMENT_HEADER_SIZE, size)
        if end < size and not (kind == "log" and _zero_from(fd, end, size)):
            raise CorruptionError(f"{error or 'unexpected bytes'} at offset {end}", path=where,
                                  offset=end)
    except OSError as exc:
        raise CorruptionError(f"unreadable: {exc}", path=where) from None
    finally:
        os.close(fd)


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
