"""Record framing for every append-only file (spec: docs/format/record.md).

A frame is a 10-byte header followed by ``length`` payload bytes::

    +---------+---------+------+-------+----------------+
    | crc u32 | len u32 | kind | flags | payload (len)  |
    +---------+---------+------+-------+----------------+

``crc`` is CRC-32C of bytes 4..10 of the header followed by the payload, so a damaged
length, kind or flags byte fails the check as surely as a damaged payload.
A frame with the COMMIT flag ends a batch: readers act on a batch only once they have
seen its committing frame, and recovery truncates everything after the last one.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum, IntFlag
from typing import NamedTuple

from tuffdb._format.checksum import crc32c, crc32c_extend

FRAME = struct.Struct("<IIBB")
CRC_OFFSET = 0
LENGTH_OFFSET = CRC_OFFSET + 4
KIND_OFFSET = LENGTH_OFFSET + 4
FLAGS_OFFSET = KIND_OFFSET + 1
FRAME_SIZE = FLAGS_OFFSET + 1
assert FRAME.size == FRAME_SIZE == 10
_TAIL = struct.Struct("<IBB")  # the checksummed part of the header
_CRC = struct.Struct("<I")
MAX_PAYLOAD_SIZE = 1 << 30


class Flag(IntFlag):
    COMMIT = 0x01  # last frame of a batch
    ZSTD = 0x02  # payload is a zstd frame
    AES_GCM = 0x04  # payload is nonce(12) | ciphertext | tag(16)


KNOWN_FLAGS = int(Flag.COMMIT | Flag.ZSTD | Flag.AES_GCM)
# The same bits as plain ints, for the paths that test or set them per frame: ``int & Flag``
# runs IntFlag's Python-level ``__rand__`` (a Flag is an int subclass that overrides it),
# about a microsecond a time; these stay in C.
COMMIT, ZSTD, AES_GCM = int(Flag.COMMIT), int(Flag.ZSTD), int(Flag.AES_GCM)


class Kind(IntEnum):
    """Frame kinds. 1-15 storage core, 16-31 KV, 32-47 events, 48-63 documents."""

    INVALID = 0  # never written; a zero-filled region decodes as kind 0 and is rejected
    META = 1  # small self-describing metadata (JSON), e.g. a footer or manifest
    KV_BATCH = 16  # hot-tier log: a batch of KV records
    KV_BLOCK = 17  # cold segment: a block of KV records
    KV_BLOCK_INDEX = 18  # cold segment: the block index
    KV_HINT = 19  # hint file body
    KV_SEGMENT_TAIL = 20  # tier stub: a tiered segment's header and tail (block index on)


class Frame(NamedTuple):
    offset: int  # offset of the frame header in the buffer
    kind: int
    flags: int
    payload: bytes


def frame_header(kind: int, payload: bytes, flags: int = 0) -> bytes:
    """The 10 header bytes for ``payload``; write them followed by the payload."""
    tail = _TAIL.pack(len(payload), kind, flags)
    return _CRC.pack(crc32c_extend(crc32c(tail), payload)) + tail


def encode_frame(kind: int, payload: bytes, flags: int = 0) -> bytes:
    """Header and payload in one bytes object (copies the payload)."""
    return frame_header(kind, payload, flags) + payload


class ScanResult(NamedTuple):
    frames: list[Frame]
    end: int  # offset just past the last valid frame
    committed_end: int  # offset just past the last valid frame carrying COMMIT
    error: str | None  # why scanning stopped before the end of the buffer, if it did


def _bad_header(kind: int, flags: int, length: int, room: int) -> str | None:
    """Why a frame header with ``room`` bytes after it is invalid, or None."""
    if kind == 0:
        return "zero-filled or invalid frame (kind 0)"
    if length > MAX_PAYLOAD_SIZE:
        return f"bad length {length}"
    if length > room:
        return f"torn frame (needs {length} payload bytes, {room} present)"
    if flags & ~KNOWN_FLAGS:
        return f"unknown flags 0x{flags:02x}"
    return None


def _frame_at(buf: bytes | mmap.mmap, pos: int, end: int) -> tuple[str | None, int, int, bytes]:
    """The frame at ``buf[pos:]`` (not past ``end``): ``(None, kind, flags, payload)``, or
    ``(why it is invalid, 0, 0, b"")``. The one check :func:`scan_frames` and
    :func:`check_frames` make of each frame."""
    if end - pos < FRAME_SIZE:
        return f"torn frame header ({end - pos} of {FRAME_SIZE} bytes)", 0, 0, b""
    crc, length, kind, flags = FRAME.unpack_from(buf, pos)
    body = pos + FRAME_SIZE
    error = _bad_header(kind, flags, length, end - body)
    if error is not None:
        return error, 0, 0, b""
    payload = buf[body : body + length]
    if crc32c_extend(crc32c(buf[pos + LENGTH_OFFSET : body]), payload) != crc:
        return "checksum mismatch", 0, 0, b""
    return None, kind, flags, payload


def scan_frames(buf: bytes, start: int = 0, end: int | None = None) -> ScanResult:
    """Decode frames in ``buf[start:end]`` up to the first invalid one (payloads are copies).

    Never raises on bad input: the first frame that is short, oversized, of kind 0,
    with unknown flags or a checksum mismatch stops the scan, and ``error`` says why.
    """
    mv = bytes(buf) if not isinstance(buf, bytes) else buf
    if end is None:
        end = len(mv)
    frames: list[Frame] = []
    append = frames.append
    pos = start
    committed = start
    error = None
    while pos < end:
        error, kind, flags, payload = _frame_at(mv, pos, end)
        if error is not None:
            break
        append(Frame(pos, kind, flags, payload))
        pos += FRAME_SIZE + len(payload)
        if flags & COMMIT:
            committed = pos
    return ScanResult(frames, pos, committed, error)


def check_frames(buf: bytes | mmap.mmap, pos: int, stop: int,
                 digest: int = 0) -> tuple[int, str | None, int]:
    """What :func:`scan_frames` checks, keeping nothing: verify every frame's CRC in
    ``buf[pos:stop]`` in order; return (offset just past the last valid frame, why the
    walk stopped early or None, CRC-32C of the valid frames' 10-byte headers extending
    ``digest``: :func:`header_digest`'s value when every frame is valid). Works on an
    mmap without copying it (only each payload, which ``google_crc32c`` needs as bytes)."""
    heads = []
    error = None
    while pos < stop:
        error, _, _, payload = _frame_at(buf, pos, stop)
        if error is not None:
            break
        body = pos + FRAME_SIZE
        heads.append(buf[pos:body])
        pos = body + len(payload)
    return pos, error, crc32c_extend(digest, b"".join(heads))


def header_digest(buf: bytes | mmap.mmap, start: int, end: int,
                  crc: int = 0) -> tuple[int, int]:
    """CRC-32C (extending ``crc``) of the 10-byte headers of the frames that lie whole in
    ``buf[start:end]``, in order, walking by their lengths without reading a payload;
    returns (crc, offset just past the last whole frame). The headers carry their
    payloads' CRCs, so this digest stands for every byte of those frames (backup.md,
    ``check: "frames"``)."""
    unpack = FRAME.unpack_from
    heads: list[bytes] = []
    append = heads.append
    pos = start
    while pos + FRAME_SIZE <= end:
        _, length, kind, _ = unpack(buf, pos)
        nxt = pos + FRAME_SIZE + length
        if kind == 0 or nxt > end:
            break
        append(buf[pos : pos + FRAME_SIZE])
        pos = nxt
    return crc32c_extend(crc, b"".join(heads)), pos


def unwritten_tail(data: bytes, stop: int) -> int:
    """How many zero bytes end ``data`` after the frame a scan stopped at (``stop``):
    unwritten space, e.g. of a log zero-filled ahead of its writes (record.md).

    A zero header at ``stop`` means unwritten from there; a damaged frame claims its
    header's length (or, torn inside its header, everything that is left)."""
    if stop >= len(data):
        return 0
    frame_end = len(data)
    if len(data) - stop >= FRAME_SIZE:
        _, length, kind, _ = FRAME.unpack_from(data, stop)
        frame_end = stop if kind == 0 else min(len(data), stop + FRAME_SIZE + length)
    return min(len(data) - len(data.rstrip(b"\0")), len(data) - frame_end)


def decode_single_frame(buf: bytes) -> tuple[int, int, bytes]:
    """(kind, flags, payload) of a buffer holding exactly one frame, or ValueError.

    The hot read path of cold blocks: no list, no scan, one CRC.
    """
    if len(buf) < FRAME_SIZE:
        raise ValueError(f"torn frame header ({len(buf)} of {FRAME_SIZE} bytes)")
    crc, length, kind, flags = FRAME.unpack_from(buf, 0)
    if kind == 0 or FRAME_SIZE + length != len(buf) or flags & ~KNOWN_FLAGS:
        raise ValueError(f"bad frame header (kind {kind}, length {length}, flags {flags})")
    payload = buf[FRAME_SIZE:]
    if crc32c_extend(crc32c(buf[LENGTH_OFFSET:FRAME_SIZE]), payload) != crc:
        raise ValueError("checksum mismatch")
    return kind, flags, payload


def read_frame_at(buf: bytes, pos: int) -> Frame:
    """Decode exactly one frame at ``pos`` or raise ``ValueError`` saying why."""
    res = scan_frames(buf, pos, None)
    if not res.frames or res.frames[0].offset != pos:
        raise ValueError(res.error or "no frame")
    return res.frames[0]
