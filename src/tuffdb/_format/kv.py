"""KV record, cold-segment and hint layouts (spec: docs/format/kv.md).

A KV record (inside a hot-log ``KV_BATCH`` frame or a cold ``KV_BLOCK``)::

    op u8 | klen u16 | vlen u32 | [expiry_ms u64 if op & OP_TTL] | key | value

A cold segment ends with a 16-byte trailer that locates its footer frame::

    footer_offset u64 | magic "TKV1" | crc32c(first 12 bytes) u32
"""

from __future__ import annotations

import struct

RECORD = struct.Struct("<BHI")
RECORD_SIZE = RECORD.size
assert RECORD_SIZE == 7
EXPIRY = struct.Struct("<Q")
EXPIRY_SIZE = EXPIRY.size
RECORD_TTL = struct.Struct("<BHIQ")
RECORD_TTL_SIZE = RECORD_TTL.size
assert RECORD_TTL_SIZE == RECORD_SIZE + EXPIRY_SIZE

OP_PUT = 1
OP_DELETE = 2
OP_TTL = 0x80  # flag: an expiry follows the fixed header
OP_MASK = 0x7F

MAX_KEY_SIZE = 0xFFFF  # 65,535 bytes: the u16 length
VALUE_BITS = 28
MAX_VALUE_SIZE = (1 << VALUE_BITS) - 1  # 268,435,455 bytes

TRAILER = struct.Struct("<Q4sI")
TRAILER_SIZE = TRAILER.size
assert TRAILER_SIZE == 16
TRAILER_MAGIC = b"TKV1"

# Block index entry: frame offset in file u64, frame size u32 (header + payload), raw size u32.
BLOCK_INDEX_DTYPE = [("offset", "<u8"), ("size", "<u4"), ("raw", "<u4")]
BLOCK_INDEX_ENTRY_SIZE = 16
# Hint body: n u32, n_ttl u32, then arrays ops u8[n], klens u16[n], blocks u32[n],
# value offsets u32[n], vlens u32[n], keys (sum klens), ttl rows (index u64, expiry u64)[n_ttl].
HINT_HEAD = struct.Struct("<II")

# In-memory location of a cold value, one int:
#   segment id << 80 | block no << 48 | value offset in block << 28 | value length
OFFSET_BITS = 20
BLOCK_SHIFT = 48
BLOCK_BITS = 32
MAX_BLOCKS_PER_SEGMENT = 1 << BLOCK_BITS
SEGMENT_SHIFT = BLOCK_SHIFT + BLOCK_BITS
