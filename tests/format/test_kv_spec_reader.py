"""An independent reader of KV files, written from docs/format/*.md alone.

The spec is normative, so a reader that follows only its words (record.md, segment.md,
kv.md) must recover exactly what the store wrote. Nothing here imports the engine's
readers: frames, records, cold segments, block indexes, trailers and hint files are
decoded with ``struct``, ``zlib``-free CRC-32C and zstd as the documents describe them,
and the worked example in record.md is checked byte for byte.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import google_crc32c
import zstandard

from tuffdb import KVStore

HEADER = 36  # segment.md
FRAME = 10  # record.md
COMMIT, ZSTD, AES_GCM = 0x01, 0x02, 0x04  # record.md flags
KV_BATCH, KV_BLOCK, KV_BLOCK_INDEX, KV_HINT, META = 16, 17, 18, 19, 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def frames(data: bytes, pos: int) -> list[tuple[int, int, int, bytes]]:
    """(offset, kind, flags, payload) of every valid frame from ``pos`` (record.md)."""
    out = []
    while pos + FRAME <= len(data):
        crc, length, kind, flags = struct.unpack_from("<IIBB", data, pos)
        payload = data[pos + FRAME: pos + FRAME + length]
        if kind == 0 or len(payload) < length:
            break
        assert google_crc32c.value(data[pos + 4: pos + FRAME] + payload) == crc
        out.append((pos, kind, flags, payload))
        pos += FRAME + length
    return out


def plain(flags: int, payload: bytes) -> bytes:
    assert not flags & AES_GCM
    return zstandard.ZstdDecompressor().decompress(payload) if flags & ZSTD else payload


def records(body: bytes) -> list[tuple[int, bytes, bytes, int]]:
    """(op, key, value, expiry_ms) of a run of KV records (kv.md, "KV record")."""
    out = []
    pos = 0
    while pos < len(body):
        op, klen, vlen = struct.unpack_from("<BHI", body, pos)
        pos += 7
        expiry = 0
        if op & 0x80:
            (expiry,) = struct.unpack_from("<Q", body, pos)
            pos += 8
        key = body[pos: pos + klen]
        value = body[pos + klen: pos + klen + vlen]
        pos += klen + vlen
        out.append((op & 0x7F, key, value, expiry))
    assert pos == len(body)
    return out


def header(data: bytes) -> tuple[int, int, int]:
    """(file_kind, base_address, key_id) of a segment header (segment.md)."""
    magic, kind, _, _, base, _, key_id, crc = struct.unpack_from("<8sBBHQQII", data, 0)
    assert magic == b"\x89TUFDB\n\x01"
    assert google_crc32c.value(data[:32]) == crc
    return kind, base, key_id


def read_cold(path: Path) -> tuple[dict[str, Any], list[tuple[int, bytes, bytes, int]]]:
    """Meta and every record of a ``.dat`` via trailer -> footer -> block index -> blocks."""
    data = path.read_bytes()
    kind, base, _ = header(data)
    assert kind == 2
    assert path.name == f"{base:020d}.dat"
    footer_offset, magic, crc = struct.unpack("<Q4sI", data[-16:])
    assert magic == b"TKV1"
    assert google_crc32c.value(data[-16:-4]) == crc
    [(_, kind, flags, payload)] = frames(data[:-16], footer_offset)
    assert (kind, flags & COMMIT) == (META, COMMIT)
    meta = json.loads(payload)
    [(_, kind, flags, index)] = frames(data[:footer_offset], meta["index_offset"])
    assert kind == KV_BLOCK_INDEX
    assert len(index) == 16 * meta["blocks"]
    out = []
    for i in range(meta["blocks"]):
        offset, size, raw = struct.unpack_from("<QII", index, 16 * i)
        [(_, kind, flags, payload)] = frames(data[: offset + size], offset)
        assert kind == KV_BLOCK
        block = plain(flags, payload)
        assert len(block) == raw
        out += records(block)
    assert len(out) == meta["records"]
    return meta, out


def read_hint(path: Path) -> list[tuple[int, bytes, int, int, int, int]]:
    """(op, key, block, value_offset, vlen, expiry_ms) per entry (kv.md, "Hint file")."""
    data = path.read_bytes()
    kind, base, _ = header(data)
    assert kind == 3
    [(_, kind, flags, payload)] = frames(data, HEADER)
    assert (kind, flags & COMMIT) == (KV_HINT, COMMIT)
    body = plain(flags, payload)
    n, n_ttl = struct.unpack_from("<II", body, 0)
    pos = 8
    cols = {}
    for name, code, size in (("ops", "B", 1), ("klens", "H", 2), ("blocks", "I", 4),
                             ("voffs", "I", 4), ("vlens", "I", 4)):
        cols[name] = struct.unpack_from(f"<{n}{code}", body, pos)
        pos += n * size
    keys = []
    for klen in cols["klens"]:
        keys.append(body[pos: pos + klen])
        pos += klen
    expiry = {}
    for _ in range(n_ttl):
        index, ms = struct.unpack_from("<QQ", body, pos)
        expiry[index] = ms
        pos += 16
    assert pos == len(body), "the hint body has bytes the spec does not describe"
    return [(cols["ops"][i], keys[i], cols["blocks"][i], cols["voffs"][i], cols["vlens"][i],
             expiry.get(i, 0)) for i in range(n)]


def test_record_md_worked_example_is_byte_exact() -> None:
    from tuffdb._format.kv import OP_PUT  # noqa: PLC0415
    from tuffdb._format.record import Flag, Kind, encode_frame  # noqa: PLC0415
    from tuffdb.kv.records import encode_record  # noqa: PLC0415

    payload = bytes.fromhex("01 01 00 01 00 00 00 6b 76")
    assert encode_record(OP_PUT, b"k", b"v") == payload
    frame = encode_frame(Kind.KV_BATCH, payload, Flag.COMMIT)
    assert frame[4:10] == bytes.fromhex("09 00 00 00 10 01")
    assert len(frame) == 19
    assert frame[10:] == payload


def test_cold_segments_and_hints_read_back_from_the_spec_alone(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "kv"
    written: dict[bytes, tuple[bytes, int]] = {}
    with KVStore.open(path, durability="none", hot_bytes=64 * 1024, clock=clock) as store:
        for i in range(600):
            key = b"key-%04d" % i
            value = (b"%d|" % i) * (i % 50)  # some empty, some compressible
            ttl = 3600 if i % 7 == 0 else None
            store.put(key, value, ttl=ttl)
            written[key] = (value, int(clock.now * 1000) + 3_600_000 if ttl else 0)
        store.delete(b"key-0001")
        del written[b"key-0001"]
    dats = sorted(path.glob("*.dat"))
    assert len(dats) >= 2
    seen: dict[bytes, tuple[bytes, int] | None] = {}
    for dat in sorted(dats, key=lambda p: read_cold(p)[0]["seq"]):
        meta, recs = read_cold(dat)
        hint = read_hint(dat.with_suffix(".hint"))
        assert [(op, key) for op, key, *_ in hint] == [(op, key) for op, key, _, _ in recs]
        for (op, key, value, expiry), (_, _, _, _, vlen, hint_expiry) in zip(recs, hint,
                                                                            strict=True):
            assert vlen == len(value)
            assert hint_expiry == expiry
            seen[key] = (value, expiry) if op == 1 else None
        assert meta["records"] == len(recs)
    assert {k: v for k, v in seen.items() if v is not None} == written


def test_hot_log_reads_back_from_the_spec_alone(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "kv"
    store = KVStore.open(path, durability="always", hot_bytes=1 << 20, clock=clock,
                         compression=None)
    try:
        store.put(b"a", b"1")
        store.put(b"b", b"2", ttl=60)
        store.put_many([(b"c", b"3"), (b"d", b"")])
        store.delete(b"a")
        [log] = sorted(path.glob("*.log"))
        data = log.read_bytes()
        kind, _, key_id = header(data)
        assert (kind, key_id) == (1, 0)
        got = []
        for _, kind, flags, payload in frames(data, HEADER):
            assert kind == KV_BATCH
            assert flags & COMMIT
            got += records(plain(flags, payload))
        assert got == [(1, b"a", b"1", 0), (1, b"b", b"2", int(clock.now * 1000) + 60_000),
                       (1, b"c", b"3", 0), (1, b"d", b"", 0), (2, b"a", b"", 0)]
    finally:
        store.close()
