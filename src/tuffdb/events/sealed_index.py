"""Per-segment index: built by scanning a log segment, or loaded from its sealed ``.idx`` file.

A sealed segment's index file (spec: docs/format/events-index.md) lets recovery skip
scanning every segment but the last. Index files are derived and disposable: a missing,
stale or corrupt one is rebuilt from its log segment, never fatal.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tuffdb._format.record import (
    AES_GCM,
    COMMIT,
    FRAME_SIZE,
    ZSTD,
    Frame,
    encode_frame,
    scan_frames,
)
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, SegmentHeader, unpack_header
from tuffdb.errors import CorruptionError
from tuffdb.events import codec
from tuffdb.events.format import (
    EVENTS_HEADER,
    EVENTS_HEADER_SIZE,
    INDEX_FILE_KIND,
    INDEX_SUFFIX,
    TRACKING_POSITION,
    FrameKind,
)
from tuffdb.storage.codec import Codec
from tuffdb.storage.files import segment_name, write_file_durably

ENCODED_FLAGS = ZSTD | AES_GCM

# Index body header: first_position, count, n_types, n_tags, n_tracking, segment_size,
# n_frames, reserved (0).
INDEX_HEADER = struct.Struct("<QIIIIQII")
INDEX_HEADER_SIZE = INDEX_HEADER.size
assert INDEX_HEADER_SIZE == 40
_LEN16 = struct.Struct("<H")
_ENTRY = struct.Struct("<HI")  # tag length, posting count


@dataclass
class SegmentIndex:
    """Everything the in-memory indexes need from one segment."""

    first: int  # first position (count == 0: the position the next segment starts at)
    count: int
    addr: np.ndarray  # int64 absolute byte address of each entry
    lens: np.ndarray  # int64 entry lengths
    type_names: list[str]
    type_ids: np.ndarray  # uint32, local ids into type_names
    postings: dict[str, np.ndarray]  # tag -> ascending absolute positions
    tracking: dict[str, int] = field(default_factory=dict)
    size: int = 0  # bytes of the segment (after its header) this index covers
    frames: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    # ^ absolute address of each EVENTS frame header (reads of encrypted stores need them)


def scan_segment(
    frames: list[Frame], base_address: int, path: str, expect_first: int,
    cipher: Codec | None = None,
) -> SegmentIndex:
    """Build a segment's index from its committed frames (the recovery / rebuild path).

    Entry addresses are *virtual* when payloads are encoded: frame address + frame header +
    offset in the decoded payload (AES-GCM only grows a payload, so they stay inside it).
    """
    frame_to_addr = base_address - SEGMENT_HEADER_SIZE
    to_addr = frame_to_addr + FRAME_SIZE + EVENTS_HEADER_SIZE
    frame_addrs: list[int] = []
    addrs: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    names: dict[str, int] = {}
    ids: list[int] = []
    postings: dict[str, list[int]] = {}
    tracking: dict[str, int] = {}
    head = expect_first - 1
    for f in frames:
        payload = f.payload
        if f.flags & ENCODED_FLAGS:
            if cipher is None:
                raise CorruptionError("encoded frame in a store opened without a key", path=path)
            payload = cipher.decode(f.flags, payload, path)
        if f.kind == FrameKind.TRACKING:
            (pos,) = TRACKING_POSITION.unpack_from(payload)
            tracking[payload[8:].decode()] = pos
            continue
        if f.kind != FrameKind.EVENTS:
            continue
        first, count = EVENTS_HEADER.unpack_from(payload)
        if first != head + 1:
            raise CorruptionError(
                f"events frame starts at position {first}, expected {head + 1}",
                path=path, offset=f.offset,
            )
        body = payload[EVENTS_HEADER_SIZE:]
        try:
            offs, rows = codec.entries_for_index(body)
        except Exception as exc:
            raise CorruptionError(f"undecodable events frame: {exc}", path=path,
                                  offset=f.offset) from None
        if len(rows) != count or len(offs) != count + 1 or (count and rows[0][0] != first):
            raise CorruptionError("events frame count mismatch", path=path, offset=f.offset)
        o = np.asarray(offs, np.int64)
        frame_addrs.append(frame_to_addr + f.offset)
        addrs.append(o[:-1] + (to_addr + f.offset))
        lens.append(np.diff(o))
        codec.fold_rows(rows, names, ids, postings)
        head += count
    empty = np.empty(0, np.int64)
    return SegmentIndex(
        expect_first, head - expect_first + 1,
        np.concatenate(addrs) if addrs else empty,
        np.concatenate(lens) if lens else empty,
        list(names), np.asarray(ids, np.uint32),
        {k: np.asarray(v, np.int64) for k, v in postings.items()},
        tracking,
        frames=np.asarray(frame_addrs, np.int64),
    )


def index_path(directory: Path, base_address: int) -> Path:
    return directory / segment_name(base_address, INDEX_SUFFIX)


def encode(ix: SegmentIndex, base_address: int, codec: Codec | None = None) -> bytes:
    """The whole ``.idx`` file: segment header + one committed frame (encrypted like the log)."""
    tags = sorted(ix.postings)  # sorted dictionary: prefix lookup by bisection
    parts = [
        INDEX_HEADER.pack(ix.first, ix.count, len(ix.type_names), len(tags), len(ix.tracking),
                          ix.size, len(ix.frames), 0),
        (ix.frames - base_address).astype("<u4").tobytes(),
        (ix.addr - base_address).astype("<u4").tobytes(),
        ix.lens.astype("<u4").tobytes(),
        ix.type_ids.astype("<u4").tobytes(),
    ]
    for name in ix.type_names:
        b = name.encode()
        parts += (_LEN16.pack(len(b)), b)
    for tag in tags:
        b = tag.encode()
        post = ix.postings[tag]
        parts += (_ENTRY.pack(len(b), len(post)), b, (post - ix.first).astype("<u4").tobytes())
    for src, pos in ix.tracking.items():
        b = src.encode()
        parts += (_LEN16.pack(len(b)), b, struct.pack("<Q", pos))
    payload = b"".join(parts)
    flags = 0
    if codec is not None:
        flags, payload = codec.encode(payload)
    head = SegmentHeader(INDEX_FILE_KIND, 0, base_address, 0, codec.key_id if codec else 0).pack()
    return head + encode_frame(FrameKind.INDEX, payload, flags | COMMIT)


def decode(data: bytes, base_address: int, path: str, codec: Codec | None = None) -> SegmentIndex:
    """Parse an ``.idx`` file; CorruptionError on any inconsistency."""
    hdr = unpack_header(data[:SEGMENT_HEADER_SIZE], path)
    if hdr.file_kind != INDEX_FILE_KIND or hdr.base_address != base_address:
        raise CorruptionError("index header does not match its segment", path=path)
    if hdr.key_id != (codec.key_id if codec else 0):
        raise CorruptionError("index written with another key", path=path)
    res = scan_frames(data, SEGMENT_HEADER_SIZE)
    if res.error or len(res.frames) != 1 or res.frames[0].kind != FrameKind.INDEX:
        raise CorruptionError(res.error or "index file must hold one INDEX frame", path=path)
    f = res.frames[0]
    p = f.payload
    if f.flags & ENCODED_FLAGS:
        if codec is None:
            raise CorruptionError("encoded index in a store opened without a key", path=path)
        p = codec.decode(f.flags, p, path)
    first, count, n_types, n_tags, n_tracking, size, n_frames, _ = INDEX_HEADER.unpack_from(p)
    at = INDEX_HEADER_SIZE

    def u32s(n: int) -> np.ndarray:
        nonlocal at
        a = np.frombuffer(p, "<u4", n, at)
        at += 4 * n
        return a

    frames = u32s(n_frames).astype(np.int64) + base_address
    addr = u32s(count).astype(np.int64) + base_address
    lens = u32s(count).astype(np.int64)
    type_ids = u32s(count).astype(np.uint32)
    names = []
    for _ in range(n_types):
        (n,) = _LEN16.unpack_from(p, at)
        names.append(p[at + 2 : at + 2 + n].decode())
        at += 2 + n
    postings = {}
    for _ in range(n_tags):
        n, k = _ENTRY.unpack_from(p, at)
        tag = p[at + 6 : at + 6 + n].decode()
        at += 6 + n
        postings[tag] = u32s(k).astype(np.int64) + first
    tracking = {}
    for _ in range(n_tracking):
        (n,) = _LEN16.unpack_from(p, at)
        src = p[at + 2 : at + 2 + n].decode()
        (pos,) = struct.unpack_from("<Q", p, at + 2 + n)
        tracking[src] = pos
        at += 10 + n
    if at != len(p) or (count and int(type_ids.max()) >= n_types):
        raise CorruptionError("index body has inconsistent lengths", path=path)
    return SegmentIndex(first, count, addr, lens, names, type_ids, postings, tracking, size, frames)


def write(
    directory: Path, ix: SegmentIndex, base_address: int, codec: Codec | None = None
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_file_durably(index_path(directory, base_address), encode(ix, base_address, codec))
