"""HPACK (RFC 7541) for the gRPC server: a decoder with a block cache, and the few
header blocks the server sends, encoded without the dynamic table.

Decoding keeps the peer's dynamic table exactly; Huffman strings go through the
``hpack`` package's table-driven decoder (memoised: a client repeats its strings).
A client that has indexed its request headers sends the same bytes for every call
(``:method``, ``:path``, ``content-type``... as dynamic-table references), so a block
that changes no table state is cached by its bytes together with the table's generation
and decoded once per generation.

Encoding never indexes: each header is a literal without indexing (name by static index
where one exists), so our responses do not depend on, or change, the peer's decoder state.
"""

from __future__ import annotations

from hpack.exceptions import HPACKDecodingError
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

from tuffdb.errors import ProtocolError

STATIC: tuple[tuple[bytes, bytes], ...] = tuple(HeaderTable.STATIC_TABLE)
_NSTATIC = len(STATIC)  # 61
_STATIC_NAME: dict[bytes, int] = {}
for _i, (_n, _v) in enumerate(STATIC, 1):
    _STATIC_NAME.setdefault(_n, _i)
DEFAULT_TABLE_SIZE = 4096
_CACHE_LIMIT = 512


class HPACKError(ProtocolError):
    """A header block that does not decode (a connection error: COMPRESSION_ERROR)."""


Headers = tuple[tuple[bytes, bytes], ...]


class Decoder:
    """One connection's request-header decoder (RFC 7541 section 3)."""

    def __init__(self, max_table_size: int = DEFAULT_TABLE_SIZE) -> None:
        self.max_allowed = max_table_size  # what we advertised (SETTINGS_HEADER_TABLE_SIZE)
        self.max_size = max_table_size
        self.size = 0
        self.table: list[tuple[bytes, bytes]] = []  # newest first
        self.generation = 0
        self._cache: dict[bytes, tuple[int, Headers]] = {}
        self._huff: dict[bytes, bytes] = {}

    def decode(self, block: bytes) -> Headers:
        hit = self._cache.get(block)
        if hit is not None and hit[0] == self.generation:
            return hit[1]
        gen = self.generation
        try:
            headers = self._decode(block)
        except (IndexError, HPACKDecodingError) as exc:
            raise HPACKError(f"bad header block: {exc}") from None
        if self.generation == gen:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[block] = (gen, headers)
        return headers

    # -- the representations ----------------------------------------------------------------
    def _decode(self, data: bytes) -> Headers:
        out: list[tuple[bytes, bytes]] = []
        pos = 0
        end = len(data)
        first = True
        while pos < end:
            b = data[pos]
            if b & 0x80:  # indexed field
                idx, pos = _integer(data, pos, 7)
                out.append(self._entry(idx))
            elif b & 0x40:  # literal with incremental indexing
                name, value, pos = self._literal(data, pos, 6)
                out.append((name, value))
                self._insert(name, value)
            elif b & 0x20:  # dynamic table size update: only at the start of a block
                if not first:
                    raise HPACKError("table size update after a header field")
                size, pos = _integer(data, pos, 5)
                if size > self.max_allowed:
                    raise HPACKError(f"table size {size} above the advertised {self.max_allowed}")
                self.max_size = size
                self._evict()
                self.generation += 1
                continue
            else:  # literal without indexing (0000) or never indexed (0001)
                name, value, pos = self._literal(data, pos, 4)
                out.append((name, value))
            first = False
        return tuple(out)

    def _entry(self, idx: int) -> tuple[bytes, bytes]:
        if idx <= 0:
            raise HPACKError("header index 0")
        if idx <= _NSTATIC:
            return STATIC[idx - 1]
        i = idx - _NSTATIC - 1
        if i >= len(self.table):
            raise HPACKError(f"header index {idx} beyond the table")
        return self.table[i]

    def _literal(self, data: bytes, pos: int, bits: int) -> tuple[bytes, bytes, int]:
        idx, pos = _integer(data, pos, bits)
        if idx:
            name = self._entry(idx)[0]
        else:
            name, pos = self._string(data, pos)
        value, pos = self._string(data, pos)
        return name, value, pos

    def _string(self, data: bytes, pos: int) -> tuple[bytes, int]:
        huff = data[pos] & 0x80
        n, pos = _integer(data, pos, 7)
        end = pos + n
        if end > len(data):
            raise HPACKError("string runs past the header block")
        raw = data[pos:end]
        if not huff:
            return raw, end
        s = self._huff.get(raw)
        if s is None:
            s = decode_huffman(raw)
            if len(self._huff) >= _CACHE_LIMIT:
                self._huff.clear()
            self._huff[raw] = s
        return s, end

    def _insert(self, name: bytes, value: bytes) -> None:
        self.generation += 1
        size = len(name) + len(value) + 32
        if size > self.max_size:  # an entry larger than the table empties it
            self.table.clear()
            self.size = 0
            return
        self.table.insert(0, (name, value))
        self.size += size
        self._evict()

    def _evict(self) -> None:
        table = self.table
        while self.size > self.max_size and table:
            name, value = table.pop()
            self.size -= len(name) + len(value) + 32


def _integer(data: bytes, pos: int, bits: int) -> tuple[int, int]:
    mask = (1 << bits) - 1
    value = data[pos] & mask
    pos += 1
    if value < mask:
        return value, pos
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value += (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise HPACKError("integer too large")


# -- encoding ------------------------------------------------------------------------------
def _enc_integer(value: int, bits: int, first: int) -> bytes:
    mask = (1 << bits) - 1
    if value < mask:
        return bytes([first | value])
    out = bytearray([first | mask])
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(headers: list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...]) -> bytes:
    """A header block of literals without indexing (no Huffman, no table state)."""
    parts: list[bytes] = []
    for name, value in headers:
        if name == b":status" and value == b"200":
            parts.append(b"\x88")  # static entry 8
            continue
        idx = _STATIC_NAME.get(name)
        if idx is not None:
            parts.append(_enc_integer(idx, 4, 0x00))
        else:
            parts.append(b"\x00" + _enc_integer(len(name), 7, 0x00) + name)
        parts.append(_enc_integer(len(value), 7, 0x00) + value)
    return b"".join(parts)


__all__ = ["DEFAULT_TABLE_SIZE", "Decoder", "HPACKError", "Headers", "encode"]
