"""Cold segments: sealed, immutable, self-describing files of compressed blocks.

Layout (spec: docs/format/kv.md)::

    segment header (kind KV_DATA, base address = segment id)
    KV_BLOCK frame * n          records, zstd-compressed unless incompressible, optionally encrypted
    KV_BLOCK_INDEX frame        per block: frame offset u64, frame size u32, raw size u32
    META frame (COMMIT)         JSON: seq, blocks, records, value_bytes, supersedes
    trailer (16 bytes)          footer frame offset, magic, CRC-32C

Each segment has a hint file (``.hint``): the key -> location table of its records, so
open reads hints instead of data. A missing or damaged hint is rebuilt from the data.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import add, mul
from pathlib import Path
from typing import Any

import numpy as np

from tuffdb._format.checksum import crc32c
from tuffdb._format.kv import (
    BLOCK_BITS,
    BLOCK_INDEX_DTYPE,
    BLOCK_SHIFT,
    HINT_HEAD,
    MAX_BLOCKS_PER_SEGMENT,
    OFFSET_BITS,
    OP_DELETE,
    OP_PUT,
    OP_TTL,
    RECORD_SIZE,
    RECORD_TTL,
    RECORD_TTL_SIZE,
    SEGMENT_SHIFT,
    TRAILER,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    VALUE_BITS,
)
from tuffdb._format.record import (
    COMMIT,
    FRAME_SIZE,
    Kind,
    decode_single_frame,
    frame_header,
    scan_frames,
)
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, FileKind, SegmentHeader, unpack_header
from tuffdb.errors import CorruptionError
from tuffdb.kv.hot_tier import holds
from tuffdb.kv.records import interleave, iter_records, record_headers
from tuffdb.storage.codec import Codec
from tuffdb.storage.descriptors import ImmutableFile
from tuffdb.storage.files import (
    fsync_dir,
    fsync_fd,
    pread_exact,
    segment_name,
    write_all,
    write_file_durably,
    writev_all,
)

BLOCK_TARGET_SIZE = 16 << 10  # the default; a store may choose another (KVStore block_bytes)
MIN_BLOCK_SIZE, MAX_BLOCK_SIZE = 1 << 10, 512 << 10  # value offsets in a block stay < 2^20
DATA_SUFFIX = ".dat"
HINT_SUFFIX = ".hint"
STUB_SUFFIX = ".tier"  # a tiered segment's stub (kv/tier.py)
_VALUE_MASK = (1 << VALUE_BITS) - 1
_OFFSET_MASK = (1 << OFFSET_BITS) - 1
_U64_BLOCKS = 1 << (64 - BLOCK_SHIFT)  # block numbers under this fit a u64 location part


@dataclass
class Entries:
    """Columnar key table of one segment: what a hint file stores."""

    keys: list[bytes]
    ops: np.ndarray  # u8: OP_PUT / OP_DELETE
    blocks: np.ndarray  # u32
    voffs: np.ndarray  # u32
    vlens: np.ndarray  # u32
    ttl: dict[int, int] = field(default_factory=dict)  # entry index -> expiry ms
    klens: np.ndarray | None = None  # key lengths, when the writer had them (hint_bytes)

    def locations(self, seg_id: int) -> list[int]:
        """Location ints (see tuffdb._format.kv) with C-level maps, no per-entry bytecode."""
        within = ((self.voffs.astype(np.uint64) << np.uint64(VALUE_BITS))
                  | self.vlens.astype(np.uint64))
        if not len(within) or int(self.blocks.max()) < _U64_BLOCKS:
            # Block, offset and length fit 64 bits: one C-level add of the segment's part.
            within |= self.blocks.astype(np.uint64) << np.uint64(BLOCK_SHIFT)
            return list(map((seg_id << SEGMENT_SHIFT).__add__, within.tolist()))
        gids = ((np.uint64(seg_id) << np.uint64(BLOCK_BITS)) | self.blocks.astype(np.uint64)).tolist()
        return list(map(add, map(mul, gids, repeat(1 << BLOCK_SHIFT)), within.tolist()))


def split_location(loc: int) -> tuple[int, int, int, int]:
    """(segment id, block no, value offset, value length) of a location int."""
    return (
        loc >> SEGMENT_SHIFT,
        (loc >> BLOCK_SHIFT) & (MAX_BLOCKS_PER_SEGMENT - 1),
        (loc >> VALUE_BITS) & _OFFSET_MASK,
        loc & _VALUE_MASK,
    )


# -- writing -------------------------------------------------------------------------------
def write_segment(
    directory: Path,
    seg_id: int,
    seq: int,
    keys: list[bytes],
    values: list[bytes | None],
    expiry: dict[bytes, int],
    codec: Codec,
    supersedes: tuple[int, ...] = (),
    blocks_out: list[bytes] | None = None,
    block_size: int = BLOCK_TARGET_SIZE,
) -> tuple[ColdSegment, Entries]:
    """Write a cold segment and its hint durably; ``values[i] is None`` is a tombstone.

    ``blocks_out``, if given, receives each block's decoded bytes in block order (what a
    read of that block returns), for the caller to put in its block cache. A block closes
    once its records reach ``block_size`` bytes (a writer's choice: readers take any)."""
    n = len(keys)
    # (holds: by identity; ``None in values`` compares every bytes value with None)
    tombs = [i for i, v in enumerate(values) if v is None] if holds(values, None) else []
    vals = [b"" if v is None else v for v in values] if tombs else values
    klens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    vlens = np.fromiter(map(len, vals), dtype=np.int64, count=n)  # type: ignore[arg-type]
    ops = np.full(n, OP_PUT, dtype=np.uint8)
    if tombs:
        ops[tombs] = OP_DELETE
    hdrs = record_headers(ops, klens, vlens)
    hsz = np.full(n, RECORD_SIZE, dtype=np.int64)
    ttl: dict[int, int] = {}
    if expiry:
        for i, k in enumerate(keys):
            exp = expiry.get(k)
            if exp:
                ttl[i] = exp
                hdrs[i] = RECORD_TTL.pack(int(ops[i]) | OP_TTL, int(klens[i]), int(vlens[i]), exp)
                hsz[i] = RECORD_TTL_SIZE
    sizes = hsz + klens + vlens
    starts = np.cumsum(sizes) - sizes
    # Block numbers: starts only grow, so a block begins wherever start // block_size
    # changes (no sort, as np.unique would).
    bid = starts // block_size
    opens = np.ones(n, dtype=bool)
    np.not_equal(bid[1:], bid[:-1], out=opens[1:])
    firsts = np.flatnonzero(opens)
    block_no = np.cumsum(opens, dtype=np.int64) - 1
    nblocks = len(firsts)
    if nblocks > MAX_BLOCKS_PER_SEGMENT:
        raise ValueError("segment too large for its block numbering")  # callers cap input
    voffs = starts - starts[firsts][block_no] + hsz + klens
    parts = interleave(hdrs, keys, vals)  # type: ignore[arg-type]
    bounds = [*firsts.tolist(), n]
    entries = Entries(
        keys, ops, block_no.astype(np.uint32), voffs.astype(np.uint32), vlens.astype(np.uint32), ttl,
        klens,
    )
    path = directory / segment_name(seg_id, DATA_SUFFIX)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        head = SegmentHeader(FileKind.KV_DATA, 0, seg_id, int(time.time() * 1000), codec.key_id)
        out = [head.pack()]
        pos = SEGMENT_HEADER_SIZE
        index = np.zeros(nblocks, dtype=BLOCK_INDEX_DTYPE)
        for b in range(nblocks):
            raw = b"".join(parts[3 * bounds[b] : 3 * bounds[b + 1]])
            flags, data = codec.encode(raw)
            if blocks_out is not None:
                blocks_out.append(raw)
            fh = frame_header(Kind.KV_BLOCK, data, flags)
            out.append(fh)
            out.append(data)
            index[b] = (pos, FRAME_SIZE + len(data), len(raw))
            pos += FRAME_SIZE + len(data)
        flags, data = codec.encode(index.tobytes(), compress=False)
        out += [frame_header(Kind.KV_BLOCK_INDEX, data, flags), data]
        pos += FRAME_SIZE + len(data)
        meta = {
            "seq": seq, "blocks": nblocks, "records": n, "index_offset": pos - FRAME_SIZE - len(data),
            "value_bytes": int(vlens.sum()), "supersedes": list(supersedes),
            "tombstones": len(tombs),
        }
        mdata = json.dumps(meta, separators=(",", ":")).encode()
        out += [frame_header(Kind.META, mdata, COMMIT), mdata]
        trailer_head = TRAILER.pack(pos, TRAILER_MAGIC, 0)[:12]
        out.append(trailer_head + crc32c(trailer_head).to_bytes(4, "little"))
        writev_all(fd, out)
        fsync_fd(fd)
    finally:
        os.close(fd)
    hint = hint_path(directory, seg_id)
    _write_synced(hint.with_name(hint.name + ".tmp"), hint_bytes(seg_id, entries, codec))
    os.replace(hint.with_name(hint.name + ".tmp"), hint)
    os.replace(tmp, path)
    fsync_dir(directory)  # one directory fsync makes both renames durable
    return ColdSegment.open(path, codec), entries


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        fsync_fd(fd)
    finally:
        os.close(fd)


def write_hint(directory: Path, seg_id: int, e: Entries, codec: Codec) -> None:
    """Write (or rewrite) a hint file atomically and durably."""
    write_file_durably(hint_path(directory, seg_id), hint_bytes(seg_id, e, codec))


def hint_bytes(seg_id: int, e: Entries, codec: Codec) -> bytes:
    n = len(e.keys)
    ttl_rows = np.array(sorted(e.ttl.items()), dtype=np.uint64).reshape(-1, 2)
    body = b"".join([
        HINT_HEAD.pack(n, len(ttl_rows)),
        e.ops.astype(np.uint8).tobytes(),
        (np.fromiter(map(len, e.keys), dtype=np.uint16, count=n) if e.klens is None
         else e.klens.astype(np.uint16)).tobytes(),
        e.blocks.astype(np.uint32).tobytes(),
        e.voffs.astype(np.uint32).tobytes(),
        e.vlens.astype(np.uint32).tobytes(),
        b"".join(e.keys),
        ttl_rows.tobytes(),
    ])
    flags, data = codec.encode(body)
    head = SegmentHeader(FileKind.KV_HINT, 0, seg_id, int(time.time() * 1000), codec.key_id)
    return head.pack() + frame_header(Kind.KV_HINT, data, flags | COMMIT) + data


def load_hint(path: Path, seg_id: int, codec: Codec) -> Entries:
    """Parse a hint file; CorruptionError if it is damaged in any way."""
    raw = path.read_bytes()
    hdr = unpack_header(raw[:SEGMENT_HEADER_SIZE], str(path))
    if hdr.file_kind != FileKind.KV_HINT or hdr.base_address != seg_id:
        raise CorruptionError("hint header does not match its name", path=str(path))
    codec.check_key_id(hdr.key_id, str(path))
    res = scan_frames(raw, SEGMENT_HEADER_SIZE)
    if res.error or len(res.frames) != 1 or res.frames[0].kind != Kind.KV_HINT:
        raise CorruptionError(res.error or "hint frame missing", path=str(path))
    body = codec.decode(res.frames[0].flags, res.frames[0].payload, str(path))
    try:
        n, n_ttl = HINT_HEAD.unpack_from(body, 0)
        pos = HINT_HEAD.size
        ops = np.frombuffer(body, np.uint8, n, pos)
        pos += n
        klens = np.frombuffer(body, np.uint16, n, pos)
        pos += 2 * n
        blocks = np.frombuffer(body, np.uint32, n, pos)
        voffs = np.frombuffer(body, np.uint32, n, pos + 4 * n)
        vlens = np.frombuffer(body, np.uint32, n, pos + 8 * n)
        pos += 12 * n
        keys = _split_keys(body, pos, klens)
        pos += int(klens.sum(dtype=np.int64))
        rows = np.frombuffer(body, np.uint64, 2 * n_ttl, pos).reshape(-1, 2)
        if pos + 16 * n_ttl != len(body):
            raise ValueError("trailing bytes")
    except (ValueError, IndexError) as exc:
        raise CorruptionError(f"malformed hint body: {exc}", path=str(path)) from None
    return Entries(keys, ops, blocks, voffs, vlens, {int(i): int(x) for i, x in rows.tolist()})


def _split_keys(body: bytes, pos: int, klens: np.ndarray) -> list[bytes]:
    n = len(klens)
    if n == 0:
        return []
    if int(klens.min()) == int(klens.max()):
        k = int(klens[0])
        blob = body[pos : pos + n * k]
        return [blob[i : i + k] for i in range(0, n * k, k)] if k else [b""] * n
    ends = (np.cumsum(klens, dtype=np.int64) + pos).tolist()
    starts = [pos, *ends[:-1]]
    return list(map(body.__getitem__, map(slice, starts, ends)))


# -- reading -------------------------------------------------------------------------------
def parse_segment(read: Callable[[int, int], bytes], size: int, where: str,
                  codec: Codec) -> tuple[int, dict[str, Any], np.ndarray]:
    """(segment id, footer meta, block index) of a cold segment of ``size`` bytes, whose
    bytes ``read(n, offset)`` returns: header, trailer, footer and block index validated.

    :raises CorruptionError: anything incomplete or damaged.
    """
    try:
        if size < SEGMENT_HEADER_SIZE + TRAILER_SIZE:
            raise CorruptionError("cold segment too short (incomplete write?)", path=where)
        hdr = unpack_header(read(SEGMENT_HEADER_SIZE, 0), where)
        if hdr.file_kind != FileKind.KV_DATA:
            raise CorruptionError("not a KV data segment", path=where)
        codec.check_key_id(hdr.key_id, where)
        tr = read(TRAILER_SIZE, size - TRAILER_SIZE)
        footer_off, magic, crc = TRAILER.unpack(tr)
        if magic != TRAILER_MAGIC or crc32c(tr[:12]) != crc or footer_off >= size:
            raise CorruptionError("bad trailer (incomplete write?)", path=where, offset=size - 16)
        tail = read(size - TRAILER_SIZE - footer_off, footer_off)
        res = scan_frames(tail)
        if res.error or len(res.frames) != 1 or res.frames[0].kind != Kind.META:
            raise CorruptionError(res.error or "bad footer", path=where, offset=footer_off)
        meta = json.loads(res.frames[0].payload)
        ioff = meta["index_offset"]
        ires = scan_frames(read(footer_off - ioff, ioff))
        if ires.error or len(ires.frames) != 1 or ires.frames[0].kind != Kind.KV_BLOCK_INDEX:
            raise CorruptionError(ires.error or "bad block index", path=where, offset=ioff)
        f = ires.frames[0]
        index = np.frombuffer(codec.decode(f.flags, f.payload, where), dtype=BLOCK_INDEX_DTYPE)
        if len(index) != meta["blocks"]:
            raise CorruptionError("block index length mismatch", path=where, offset=ioff)
    except (ValueError, KeyError, struct.error) as exc:
        raise CorruptionError(f"bad footer: {exc}", path=where) from None
    return hdr.base_address, meta, index


LIVE_UNKNOWN = 1 << 62


class ColdSegment:
    """An open, validated cold segment. Reads are positional and thread-safe."""

    def __init__(self, path: Path, fd: int | None, seg_id: int, meta: dict[str, Any],
                 index: np.ndarray, codec: Codec, file_size: int) -> None:
        self.path = path
        self.id = seg_id
        self.seq: int = meta["seq"]
        self.meta = meta
        self.supersedes: list[int] = meta.get("supersedes", [])
        self.value_bytes: int = meta["value_bytes"]
        self.live_bytes = self.value_bytes  # refined by the store's accounting
        # Records the keydir points at, refined the same way. It starts at the segment's
        # puts and only ever falls when a pointer leaves it, so it is never under the
        # true count: 0 means nothing in the file is live (a merge need not read it).
        # (A footer without a count claims every record live until the recount.)
        records = meta.get("records")
        self.live_records: int = (LIVE_UNKNOWN if records is None
                                  else records - meta.get("tombstones", 0))
        self.file_size = file_size
        self.codec = codec
        # None: no local file (a tiered segment's stub)
        self._file: ImmutableFile | None = None if fd is None else ImmutableFile(path, fd)
        self._offsets = index["offset"].tolist()
        self._sizes = index["size"].tolist()

    def adopt(self, seg: ColdSegment) -> None:
        """Take every attribute :meth:`__init__` sets from ``seg``: the same segment
        (a tiered one: kv/tier.py), named one by one because the compiled build's
        classes have no ``__dict__`` to copy."""
        self.path = seg.path
        self.id = seg.id
        self.seq = seg.seq
        self.meta = seg.meta
        self.supersedes = seg.supersedes
        self.value_bytes = seg.value_bytes
        self.live_bytes = seg.live_bytes
        self.live_records = seg.live_records
        self.file_size = seg.file_size
        self.codec = seg.codec
        self._file = seg._file
        self._offsets = seg._offsets
        self._sizes = seg._sizes

    @property
    def nblocks(self) -> int:
        return len(self._offsets)

    @property
    def tiered(self) -> bool:
        """True when the bytes live in an archive, not in a local file (kv/tier.py)."""
        return False

    @classmethod
    def open(cls, path: Path, codec: Codec) -> ColdSegment:
        """Validate header, trailer, footer and block index; CorruptionError if incomplete."""
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            seg_id, meta, index = parse_segment(lambda n, off: pread_exact(fd, n, off), size,
                                                str(path), codec)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, seg_id, meta, index, codec, size)

    def _read(self, size: int, offset: int) -> bytes:
        file = self._file
        if file is None:
            raise CorruptionError("segment closed", path=str(self.path))
        return file.pread(size, offset)

    def read_block(self, block_no: int) -> bytes:
        """The raw records of one block, checksum verified and decoded."""
        off = self._offsets[block_no]
        try:
            kind, flags, payload = decode_single_frame(self._read(self._sizes[block_no], off))
        except ValueError as exc:
            raise CorruptionError(str(exc), path=str(self.path), offset=off) from None
        if kind != Kind.KV_BLOCK:
            raise CorruptionError(f"frame kind {kind} where a block was expected",
                                  path=str(self.path), offset=off)
        return self.codec.decode(flags, payload, str(self.path))

    def block_span(self, block_no: int) -> tuple[int, int]:
        """(file offset, size) of one block's frame."""
        return self._offsets[block_no], self._sizes[block_no]

    def entries(self) -> Entries:
        """Rebuild the hint table by reading every block (used when a hint is bad)."""
        keys: list[bytes] = []
        ops, blocks, voffs, vlens = [], [], [], []
        ttl: dict[int, int] = {}
        for b in range(self.nblocks):
            for r in iter_records(self.read_block(b), str(self.path)):
                if r.expiry_ms:
                    ttl[len(keys)] = r.expiry_ms
                keys.append(r.key)
                ops.append(r.op)
                blocks.append(b)
                voffs.append(r.value_offset)
                vlens.append(len(r.value))
        return Entries(keys, np.array(ops, np.uint8), np.array(blocks, np.uint32),
                       np.array(voffs, np.uint32), np.array(vlens, np.uint32), ttl)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def hint_path(directory: Path, seg_id: int) -> Path:
    return directory / segment_name(seg_id, HINT_SUFFIX)


def data_path(directory: Path, seg_id: int) -> Path:
    return directory / segment_name(seg_id, DATA_SUFFIX)


def segment_files(directory: Path, seg_id: int) -> list[Path]:
    """Every file segment ``seg_id`` may have: data, hint, tier stub."""
    return [directory / segment_name(seg_id, suffix)
            for suffix in (DATA_SUFFIX, HINT_SUFFIX, STUB_SUFFIX)]
