"""Redis keys and collections in the bytes -> bytes engine (layout: docs/format/resp.md).

Handlers never build engine keys by hand: :func:`stored` turns a user key into the key
of its metadata entry, :func:`elements` / :func:`secondary` give a collection's element
prefixes, and :func:`lookup` reads a key's metadata, checking its type (WRONGTYPE).
A command's writes are collected in a list of ops and applied with one
``db.write_batch`` (``db`` is the store, or the overlay of a MULTI/EXEC or a script), so
each command is atomic on disk.

Collection ids come from :class:`Ids`: a counter whose floor is persisted a block at a
time, in the same batch as the first id it covers, so no id is handed out twice, even
across a crash. An id names one incarnation of a collection: DEL, an overwrite or an
expiry leave the elements under an id no metadata points at (the sweeper's work).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from tuffdb._format.resp import (
    DATA_PREFIX,
    DOUBLE_BITS,
    ESCAPE_PREFIX,
    ID_BLOCK,
    ID_FLOOR_KEY,
    INDEX_PREFIX,
    INTERNAL_BYTE,
    LAYOUT_KEY,
    LAYOUT_VERSION,
    META,
    OWNER_PREFIX,
    TAG_HASH,
    TAG_LEGACY_HASH,
    TAG_LIST,
    TAG_SET,
    TAG_STREAM,
    TAG_STRING,
    TAG_ZSET,
    U64,
)
from tuffdb.kv.store import KEEP_TTL
from tuffdb.server.resp.table import WRONGTYPE, CommandError

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore

log = logging.getLogger("tuffdb.resp")

STRING_TAG = TAG_STRING
STRING_PREFIX = b"s"
TYPE_NAMES = {TAG_STRING: b"string", TAG_HASH: b"hash", TAG_LIST: b"list", TAG_SET: b"set",
              TAG_ZSET: b"zset", TAG_STREAM: b"stream"}
COLLECTION_TAGS = frozenset((TAG_HASH, TAG_LIST, TAG_SET, TAG_ZSET, TAG_STREAM))
Op = tuple[Any, ...]  # (key, value) | (key, None) | (key, value, ttl or KEEP_TTL)

_unpack_u64 = U64.unpack_from
_pack_u64 = U64.pack
_pack_double = DOUBLE_BITS.pack
_unpack_double = DOUBLE_BITS.unpack
_SET_TOP = [bytes((b | 0x80,)) for b in range(256)]  # sortable: a first byte, sign set
_CLEAR_TOP = [bytes((b & 0x7F,)) for b in range(256)]  # unsortable: the sign cleared
_INVERT = bytes(range(255, -1, -1))  # every bit of every byte inverted


# -- keys -------------------------------------------------------------------------------
def stored(key: bytes) -> bytes:
    """The engine key of ``key``'s metadata (user keys starting with 0xFF are escaped)."""
    if key[:1] == b"\xff":
        return ESCAPE_PREFIX + key
    return key


def user_key(engine_key: bytes) -> bytes | None:
    """The user key a metadata entry belongs to; None for internal entries."""
    if engine_key[:1] != b"\xff":
        return engine_key
    if engine_key[:2] == ESCAPE_PREFIX:
        return engine_key[2:]
    return None


def user_ranges(prefix: bytes) -> list[tuple[bytes, bytes | None, bytes | None]]:
    """(engine prefix, start, end) ranges holding every user key that starts with
    ``prefix``, in user-key order (internal entries are skipped)."""
    if prefix[:1] == b"\xff":
        return [(ESCAPE_PREFIX + prefix, None, None)]
    if prefix:
        return [(prefix, None, None)]
    return [(b"", None, b"\xff"), (ESCAPE_PREFIX, None, None)]


def elements(cid: int) -> bytes:
    """Prefix of a collection's element entries."""
    return DATA_PREFIX + _pack_u64(cid)


def secondary(cid: int) -> bytes:
    """Prefix of a collection's secondary records (zset score index, stream groups)."""
    return INDEX_PREFIX + _pack_u64(cid)


def owner(cid: int) -> bytes:
    return OWNER_PREFIX + _pack_u64(cid)


def cid_of(raw: bytes) -> int:
    """The collection id in a collection's metadata value."""
    return int(_unpack_u64(raw, 1)[0])


# -- metadata -----------------------------------------------------------------------------
def type_name(raw: bytes | None) -> bytes:
    if raw is None:
        return b"none"
    return TYPE_NAMES.get(raw[0], b"none")


def lookup(db: Any, key: bytes, tag: int) -> bytes | None:
    """``key``'s metadata if it holds a ``tag`` collection, None if absent.

    :raises CommandError: WRONGTYPE when it holds another type.
    """
    raw: bytes | None = db.get(stored(key))
    if raw is not None and raw[0] != tag:
        raise CommandError(WRONGTYPE)
    return raw


def meta_op(skey: bytes, value: bytes, existed: bool) -> Op:
    """The put of a collection's new metadata: an existing key keeps its TTL."""
    return (skey, value, KEEP_TTL) if existed else (skey, value)


def rewrite_op(key: bytes, value: bytes) -> Op:
    """The put of an entry the command read as present (a member's new score, a field's
    new value): written with ``KEEP_TTL``, which tells the engine the key is being
    rewritten, so its ordered view need not change (``KVStore.write_batch``)."""
    return (key, value, KEEP_TTL)


def new_collection(ops: list[Op], ids: Ids, key: bytes) -> int:
    """Allocate an id for a collection about to be created at ``key``; queue its owner
    record in ``ops``."""
    cid = ids.next()
    ops.append((owner(cid), key))
    return cid


def drop_ops(ops: list[Op], cid: int) -> None:
    """A collection emptied by this command (every element deleted in ``ops``): its owner
    record goes too, nothing is left for the sweeper."""
    ops.append((owner(cid), None))


def hash_meta(cid: int, size: int) -> bytes:
    return META.pack(TAG_HASH, cid, size)


# -- scores: order-preserving 8-byte encoding ----------------------------------------------
def sortable(score: float) -> bytes:
    """8 bytes whose byte order is the numeric order of ``score`` (-inf first, +inf
    last); -0.0 is stored as +0.0 (Redis treats them as equal).

    The IEEE 754 bits, big-endian, with the sign bit set for a positive number and every
    bit inverted for a negative one. Done on the packed bytes (a table for the first
    byte, ``bytes.translate`` for the inversion) rather than as a 64-bit integer: past
    2**62 that integer is a heap object in compiled code too, and the integer version
    cost ~350 ns a call against ~100 here (a ZADD update encodes two scores and decodes
    one)."""
    if score == 0.0:
        score = 0.0
    raw = _pack_double(score)
    first = raw[0]
    if first < 0x80:  # noqa: PLR2004 - the sign bit
        return _SET_TOP[first] + raw[1:]
    return raw.translate(_INVERT)


def unsortable(raw: bytes, offset: int = 0) -> float:
    """The score :func:`sortable` encoded at ``raw[offset:]``.

    :raises struct.error: fewer than 8 bytes there."""
    enc = raw[offset : offset + 8]
    if len(enc) == 8 and enc[0] >= 0x80:  # noqa: PLR2004 - a positive number
        enc = _CLEAR_TOP[enc[0]] + enc[1:]
    else:
        enc = enc.translate(_INVERT)
    return float(_unpack_double(enc)[0])


# -- ids ------------------------------------------------------------------------------------
class Ids:
    """Collection ids: unique for the life of the data directory."""

    __slots__ = ("_floor", "_next", "_store")

    def __init__(self, store: KVStore) -> None:
        self._store = store
        raw = store.get(ID_FLOOR_KEY)
        self._next = 1 if raw is None else int(_unpack_u64(raw)[0])
        self._floor = self._next  # ids below this were reserved by an earlier run

    def next(self) -> int:
        cid = self._next
        self._next += 1
        if cid >= self._floor:
            # IMPORTANT: the new floor is written before the batch that uses the first id
            # of its block (the log keeps write order), so no batch using an id is durable
            # without its reservation, and a command that fails after taking an id loses
            # nothing. Written to the store itself, never to a script's overlay.
            self._floor = cid + ID_BLOCK
            self._store.put(ID_FLOOR_KEY, _pack_u64(self._floor), sync=False)
        return cid


# -- opening: convert data written by the layout before this one ---------------------------
_decode_legacy = msgspec.msgpack.Decoder(list[bytes]).decode
MIGRATE_BATCH_KEYS = 1024
LAYOUT_MAGIC = b"tuffdb-resp-layout "
LAYOUT_RECORD = LAYOUT_MAGIC + b"%d" % LAYOUT_VERSION
CONVERTING_RECORD = LAYOUT_RECORD + b" converting"


def open_layout(store: KVStore) -> Ids:
    """Check the layout record, converting layout 0 (before collections: a hash was one
    msgpack value, user keys starting with 0xFF were stored as they are) once.

    Step 1 moves layout 0's 0xFF user keys under the escape prefix and writes the
    "converting" record, in one atomic batch; step 2 converts each hash in its own batch
    (a hash already converted has another tag, so redoing it is harmless); the final
    layout record comes last. A crash in between is finished by the next open.
    """
    raw = store.get(LAYOUT_KEY)
    if raw == LAYOUT_RECORD:
        return Ids(store)
    if raw is None and store.is_empty():  # a fresh store: nothing to convert, no scan
        store.write_batch([(LAYOUT_KEY, LAYOUT_RECORD)], sync=True)
        return Ids(store)
    if raw is not None and raw != CONVERTING_RECORD and raw.startswith(LAYOUT_MAGIC):
        from tuffdb.errors import VersionMismatchError  # noqa: PLC0415  (rare path)

        raise VersionMismatchError(
            f"the RESP data layout is {raw.decode('ascii', 'replace')!r}; this tuffdb "
            f"reads layout {LAYOUT_VERSION}")
    if raw != CONVERTING_RECORD:
        ops: list[Op] = []
        for engine_key, value in list(store.scan(b"\xff")):
            ttl = store.ttl(engine_key) if engine_key in store else None
            ops.append((ESCAPE_PREFIX + engine_key, value, ttl))
            ops.append((engine_key, None))
        ops.append((LAYOUT_KEY, CONVERTING_RECORD))  # last: it wins over a moved user key
        store.write_batch(ops)
    ids = Ids(store)
    converted = 0
    batch: list[bytes] = []
    for engine_key in store.scan_keys(b"", None, b"\xff"):
        batch.append(engine_key)
        if len(batch) >= MIGRATE_BATCH_KEYS:
            converted += _convert_hashes(store, ids, batch)
            batch = []
    converted += _convert_hashes(store, ids, batch)
    converted += _convert_hashes(store, ids, list(store.scan_keys(ESCAPE_PREFIX)))
    store.write_batch([(LAYOUT_KEY, LAYOUT_RECORD)], sync=True)
    if converted:
        log.info("converted %d hashes to RESP layout %d", converted, LAYOUT_VERSION)
    return ids


def _convert_hashes(store: KVStore, ids: Ids, keys: list[bytes]) -> int:
    n = 0
    for engine_key, value in zip(keys, store.get_many(keys), strict=True):
        if value is None or value[0] != TAG_LEGACY_HASH:
            continue
        try:
            flat = _decode_legacy(memoryview(value)[1:])
            if len(flat) % 2:
                raise msgspec.DecodeError("an odd number of items")
        except msgspec.DecodeError as exc:
            from tuffdb.errors import CorruptionError  # noqa: PLC0415  (rare path)

            raise CorruptionError(
                f"RESP data: key {engine_key!r} has a layout-0 hash tag but its value is "
                f"not one ({exc}); this store was not written by the RESP face, or is "
                "damaged") from None
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        ops: list[Op] = []
        key = user_key(engine_key)
        assert key is not None
        cid = new_collection(ops, ids, key)
        prefix = elements(cid)
        ops.extend((prefix + f, v) for f, v in fields.items())
        ops.append((engine_key, hash_meta(cid, len(fields)), KEEP_TTL))
        store.write_batch(ops)
        n += 1
    return n


def is_collection(raw: bytes | None) -> bool:
    return raw is not None and raw[0] in COLLECTION_TAGS


def internal(engine_key: bytes) -> bool:
    return engine_key[:1] == b"\xff" and engine_key[:2] != ESCAPE_PREFIX


assert INTERNAL_BYTE == 0xFF
assert (TAG_LIST, TAG_SET, TAG_ZSET) == (0x4C, 0x53, 0x5A)
