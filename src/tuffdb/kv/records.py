"""Encode and parse runs of KV records (layout in tuffdb._format.kv)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from typing import NamedTuple

from tuffdb._format.kv import OP_DELETE, OP_MASK, OP_PUT, OP_TTL, RECORD, RECORD_SIZE, RECORD_TTL
from tuffdb.errors import CorruptionError


class Record(NamedTuple):
    op: int  # OP_PUT or OP_DELETE (TTL flag stripped)
    key: bytes
    value: bytes
    expiry_ms: int  # 0 = none
    value_offset: int  # offset of the value in the parsed buffer


def iter_records(buf: bytes, where: str = "") -> Iterator[Record]:
    """Parse a run of records; CorruptionError if the run is malformed."""
    pos = 0
    end = len(buf)
    unpack = RECORD.unpack_from
    while pos < end:
        if end - pos < RECORD_SIZE:
            raise CorruptionError("truncated KV record header", path=where, offset=pos)
        op, klen, vlen = unpack(buf, pos)
        expiry = 0
        if op & OP_TTL:
            expiry = RECORD_TTL.unpack_from(buf, pos)[3]
            pos += RECORD_TTL.size
        else:
            pos += RECORD_SIZE
        kind = op & OP_MASK
        if kind not in (1, 2) or pos + klen + vlen > end:
            raise CorruptionError(f"bad KV record (op {op}, klen {klen}, vlen {vlen})",
                                  path=where, offset=pos)
        key = buf[pos : pos + klen]
        voff = pos + klen
        pos = voff + vlen
        yield Record(kind, key, buf[voff:pos], expiry, voff)


def encode_record(op: int, key: bytes, value: bytes, expiry_ms: int = 0) -> bytes:
    if expiry_ms:
        return RECORD_TTL.pack(op | OP_TTL, len(key), len(value), expiry_ms) + key + value
    return RECORD.pack(op, len(key), len(value)) + key + value


def encode_pending(pairs: list[object], mixed: bool) -> bytes:
    """Frame a hot segment's pending (key, value) pairs as a run of records.

    Plain puts (the common case) are framed with C-level ``map``/``join`` and no per-record
    bytecode; ``mixed`` runs (deletes: value None; TTL puts: value (bytes, expiry_ms))
    take the general loop.
    """
    keys = pairs[0::2]
    vals = pairs[1::2]
    if not mixed:
        hdrs = list(map(RECORD.pack, repeat(OP_PUT, len(keys)), map(len, keys), map(len, vals)))  # type: ignore[arg-type]
        return b"".join(chain.from_iterable(zip(hdrs, keys, vals)))  # type: ignore[arg-type]
    parts: list[bytes] = []
    for k, v in zip(keys, vals):
        if v is None:
            parts += (RECORD.pack(OP_DELETE, len(k), 0), k)  # type: ignore[arg-type]
        elif type(v) is tuple:
            val, exp = v
            parts += (RECORD_TTL.pack(OP_PUT | OP_TTL, len(k), len(val), exp), k, val)  # type: ignore[arg-type]
        else:
            parts += (RECORD.pack(OP_PUT, len(k), len(v)), k, v)  # type: ignore[arg-type]
    return b"".join(parts)
