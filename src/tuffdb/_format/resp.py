"""How the RESP face lays Redis keys out in the KV engine (spec: docs/format/resp.md).

Every Redis key has one *metadata* entry under its own name (escaped when it starts with
0xFF). A string is that entry alone (tag ``s`` + the bytes). A collection's metadata holds
its type, its id and its size; each element is one more engine entry under a key that
starts with a key-space prefix and the collection's id, so deleting, overwriting or
expiring a collection touches only the metadata: the elements become unreachable at once
and the sweeper removes them later. Integers in keys are big-endian so that byte order is
numeric order; the metadata values use big-endian too, for one rule across the layout.

Key spaces (the first two bytes of an engine key)::

    <user key>            metadata (keys not starting with 0xFF)
    ff ff <user key>      metadata of a user key that starts with 0xFF (escaped)
    ff 00 id u64 sub      one element: hash field, set member, list position, zset
                          member, stream entry id
    ff 01 id u64 sub      secondary records: zset score index, stream groups/consumers/PEL
    ff 02 id u64          owner record: the user key that holds collection ``id``
    ff 03 name            server records (layout version, id floor, function libraries)
"""

from __future__ import annotations

import struct

INTERNAL_BYTE = 0xFF
ESCAPE_PREFIX = b"\xff\xff"
DATA_PREFIX = b"\xff\x00"
INDEX_PREFIX = b"\xff\x01"
OWNER_PREFIX = b"\xff\x02"
SYSTEM_PREFIX = b"\xff\x03"
INTERNAL_END = ESCAPE_PREFIX  # internal keys sort in [b"\xff", b"\xff\xff")

LAYOUT_KEY = SYSTEM_PREFIX + b"layout"
ID_FLOOR_KEY = SYSTEM_PREFIX + b"id-floor"
FUNCTIONS_KEY = SYSTEM_PREFIX + b"functions"  # FUNCTION LOAD's libraries: msgpack name -> code
LAYOUT_VERSION = 1
ID_BLOCK = 1 << 20  # ids reserved per write of the floor

# Type tags: the first byte of a metadata value.
TAG_STRING = 0x73  # "s": the rest of the value is the string
TAG_LEGACY_HASH = 0x68  # "h": a hash as one msgpack value (layout 0, converted on open)
TAG_HASH = 0x48  # "H"
TAG_LIST = 0x4C  # "L"
TAG_SET = 0x53  # "S"
TAG_ZSET = 0x5A  # "Z"
TAG_STREAM = 0x58  # "X"

# Metadata of a hash, set or zset: tag u8 | id u64 | size u64.
META = struct.Struct(">BQQ")
META_SIZE = META.size
assert META_SIZE == 17
ID_OFFSET = 1
SIZE_OFFSET = 9

# Metadata of a list: the common part, then head u64 | tail u64. Element i (0-based)
# lives at position head + i; positions [head, tail) are occupied, tail - head == size.
LIST_META = struct.Struct(">BQQQQ")
LIST_META_SIZE = LIST_META.size
assert LIST_META_SIZE == 33
LIST_START = 1 << 63  # head and tail of a new list: pushes go both ways from the middle

# Metadata of a stream: the common part (size = length), then the last generated id, the
# largest deleted id (ms and seq each u64) and the number of entries ever added.
STREAM_META = struct.Struct(">BQQQQQQQ")
STREAM_META_SIZE = STREAM_META.size
assert STREAM_META_SIZE == 57

U64 = struct.Struct(">Q")
U64_PAIR = struct.Struct(">QQ")  # a stream entry id: ms, seq
DOUBLE_BITS = struct.Struct(">d")
SIGN_BIT = 1 << 63
ALL_BITS = (1 << 64) - 1
