"""Segment file header (spec: docs/format/segment.md).

Every tuffdb file starts with this 36-byte header, so a sealed file is
self-describing: what it is, which format version wrote it, where it sits in its log's
address space, and which encryption key (by id) its payloads need.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from tuffdb._format import FORMAT_VERSION, MAGIC, MAGIC_PREFIX
from tuffdb._format.checksum import crc32c
from tuffdb.errors import CorruptionError, VersionMismatchError

SEGMENT_HEADER = struct.Struct("<8sBBHQQII")
MAGIC_OFFSET = 0
FILE_KIND_OFFSET = MAGIC_OFFSET + 8
FLAGS_OFFSET = FILE_KIND_OFFSET + 1
RESERVED_OFFSET = FLAGS_OFFSET + 1
BASE_ADDRESS_OFFSET = RESERVED_OFFSET + 2
CREATED_MS_OFFSET = BASE_ADDRESS_OFFSET + 8
KEY_ID_OFFSET = CREATED_MS_OFFSET + 8
HEADER_CRC_OFFSET = KEY_ID_OFFSET + 4
SEGMENT_HEADER_SIZE = HEADER_CRC_OFFSET + 4
assert SEGMENT_HEADER.size == SEGMENT_HEADER_SIZE == 36


class FileKind(IntEnum):
    KV_LOG = 1  # hot-tier log of KV batches
    KV_DATA = 2  # sealed cold KV segment: compressed blocks, block index, footer
    KV_HINT = 3  # key -> location snapshot of one KV_DATA segment
    KV_TIER = 4  # stub of a KV_DATA segment whose bytes live in an archive (tiering)
    EVENT_LOG = 16
    EVENT_INDEX = 17
    DOCUMENT = 32


class SegmentHeader(NamedTuple):
    file_kind: int
    flags: int
    base_address: int
    created_ms: int
    key_id: int  # 0 = payloads not encrypted; else the id of the key (see storage/codec.py)
    version: int = FORMAT_VERSION

    def pack(self) -> bytes:
        head = SEGMENT_HEADER.pack(
            MAGIC, self.file_kind, self.flags, 0, self.base_address, self.created_ms,
            self.key_id, 0,
        )
        return head[:HEADER_CRC_OFFSET] + struct.pack("<I", crc32c(head[:HEADER_CRC_OFFSET]))


def unpack_header(buf: bytes | memoryview, path: str | None = None) -> SegmentHeader:
    """Parse and validate a segment header; raise CorruptionError / VersionMismatchError."""
    if len(buf) < SEGMENT_HEADER_SIZE:
        raise CorruptionError(f"short segment header ({len(buf)} bytes)", path=path, offset=0)
    magic, kind, flags, _, base, created, key_id, crc = SEGMENT_HEADER.unpack_from(buf, 0)
    if magic[:7] != MAGIC_PREFIX:
        raise CorruptionError("bad magic: not a tuffdb file", path=path, offset=0)
    if crc32c(bytes(buf[:HEADER_CRC_OFFSET])) != crc:
        raise CorruptionError("segment header checksum mismatch", path=path, offset=0)
    if magic[7] != FORMAT_VERSION:
        raise VersionMismatchError(
            f"{path or 'file'} has format version {magic[7]}; this tuffdb reads "
            f"version {FORMAT_VERSION}: open it with a matching tuffdb release"
        )
    return SegmentHeader(kind, flags, base, created, key_id, magic[7])
