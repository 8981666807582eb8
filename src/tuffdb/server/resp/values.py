"""How Redis-typed values sit in the bytes -> bytes engine.

One engine entry per Redis key, so TYPE, DEL, RENAME, EXPIRE, SCAN and FLUSHDB act on
one entry whatever the type. The first byte of the stored value is the type tag:

====  ======  ==========================================================
tag   type    payload
====  ======  ==========================================================
``s``  string  the string's bytes, unchanged (GET = one ``get`` + one slice)
``h``  hash    msgpack array ``[field0, value0, field1, value1, ...]``
====  ======  ==========================================================

Trade-off (chosen for correctness and the common case): a hash write re-encodes the
whole hash, so HSET is O(fields). That is cheap for the small hashes Redis users keep
(YCSB records have 10 fields) and costly past a few thousand fields; see
docs/guides/redis.md. A per-field layout would make TYPE/RENAME/EXPIRE multi-entry
operations without an engine transaction.
"""

from __future__ import annotations

import msgspec

STRING_TAG = 0x73  # "s"
HASH_TAG = 0x68  # "h"
STRING_PREFIX = b"s"
HASH_PREFIX = b"h"

_encode = msgspec.msgpack.Encoder().encode
_decode_list = msgspec.msgpack.Decoder(list[bytes]).decode

TYPE_NAMES = {STRING_TAG: b"string", HASH_TAG: b"hash"}


def encode_string(value: bytes) -> bytes:
    return STRING_PREFIX + value


def encode_hash(fields: dict[bytes, bytes]) -> bytes:
    flat: list[bytes] = []
    for k, v in fields.items():
        flat.append(k)
        flat.append(v)
    return HASH_PREFIX + _encode(flat)


def decode_hash(raw: bytes) -> dict[bytes, bytes]:
    flat = _decode_list(memoryview(raw)[1:])
    it = iter(flat)
    return dict(zip(it, it, strict=True))


def type_name(raw: bytes | None) -> bytes:
    if raw is None:
        return b"none"
    return TYPE_NAMES.get(raw[0], b"none")
