"""Payload codec: optional zstd compression, then optional AES-256-GCM encryption.

Order is compress-then-encrypt (ciphertext does not compress). Each frame records
what was applied in its flags (``Flag.ZSTD``, ``Flag.AES_GCM``), so any reader can
decode any frame. An encrypted payload is ``nonce (12) | ciphertext | tag (16)``;
nonces are random 96-bit values, safe for far more frames than one key will see.
The key id stored in segment headers is 32 bits of HMAC-SHA256(key, "tuffdb key id"),
so opening with a wrong key fails fast with WrongKeyError instead of returning garbage.
Compression, encryption and CRC of large payloads release the GIL, so callers run
them on background threads (flusher, spiller) off the acknowledge path.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import threading
from pathlib import Path

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tuffdb._format.record import AES_GCM, ZSTD
from tuffdb.errors import CorruptionError, ProgrammingError, WrongKeyError

NONCE_SIZE = 12
TAG_SIZE = 16
KEY_SIZE = 32
ZSTD_LEVEL = 1  # cold blocks: level 1 is ~2x faster than 3 for <2% more bytes on our data
LOG_ZSTD_LEVEL = -1  # hot-tier log batches: fastest, short-lived
# Store a payload raw unless compression saves at least 1/32 of it.
MIN_SAVING_SHIFT = 5
ENV_KEY = "TUFFDB_ENCRYPTION_KEY"


def key_id(key: bytes) -> int:
    digest = hmac.new(key, b"tuffdb key id", hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "little") or 1


def parse_key(text: str | bytes) -> bytes:
    """A 32-byte key from raw bytes, hex (64 chars) or base64 text; else ProgrammingError."""
    if isinstance(text, bytes) and len(text) == KEY_SIZE:
        return text
    s = text.decode() if isinstance(text, bytes) else text
    s = s.strip()
    for decode in (bytes.fromhex, base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(s)
        except (ValueError, binascii.Error):
            continue
        if len(raw) == KEY_SIZE:
            return raw
    raise ProgrammingError(
        "an encryption key must be 32 bytes (AES-256), given raw, as 64 hex digits or base64"
    )


def load_key(key_file: Path | None = None) -> bytes | None:
    """The key from ``key_file`` if given, else from $TUFFDB_ENCRYPTION_KEY, else None."""
    if key_file is not None:
        return parse_key(Path(key_file).read_bytes())
    env = os.environ.get(ENV_KEY)
    return parse_key(env) if env else None


_local = threading.local()


def _compressor(level: int = ZSTD_LEVEL) -> zstandard.ZstdCompressor:
    cs = getattr(_local, "cs", None)
    if cs is None:
        cs = _local.cs = {}
    c = cs.get(level)
    if c is None:
        c = cs[level] = zstandard.ZstdCompressor(level=level)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "d", None)
    if d is None:
        d = _local.d = zstandard.ZstdDecompressor()
    return d


class Codec:
    """Encodes payloads for one store; thread-safe (per-thread zstd contexts)."""

    def __init__(self, *, compression: str | None = "zstd", key: bytes | None = None) -> None:
        if compression not in (None, "zstd"):
            raise ProgrammingError(f"unknown compression {compression!r}: use 'zstd' or None")
        self.compress = compression == "zstd"
        if key is not None and (not isinstance(key, bytes) or len(key) not in (16, 24, 32)):
            raise ProgrammingError("encryption_key must be 32 bytes (AES-256-GCM; 16 or 24 "
                                   "for AES-128/192), not "
                                   + (f"{len(key)} bytes" if isinstance(key, bytes)
                                      else type(key).__name__))
        self.key = key
        self.key_id = key_id(key) if key else 0
        self._aead = AESGCM(key) if key else None

    def check_key_id(self, stored: int, path: str) -> None:
        if stored != self.key_id:
            if stored == 0:
                raise WrongKeyError(f"{path} is not encrypted but a key was given; omit the key")
            if self.key_id == 0:
                raise WrongKeyError(f"{path} is encrypted: pass its encryption key")
            raise WrongKeyError(f"{path} was written with a different encryption key")

    def encode(self, payload: bytes, *, compress: bool | None = None,
               level: int = ZSTD_LEVEL) -> tuple[int, bytes]:
        """(flags, stored bytes) for ``payload``."""
        flags = 0
        data = payload
        if self.compress if compress is None else compress:
            packed = _compressor(level).compress(payload)
            if len(packed) < len(payload) - (len(payload) >> MIN_SAVING_SHIFT):
                data = packed
                flags |= ZSTD
        if self._aead is not None:
            nonce = os.urandom(NONCE_SIZE)
            data = nonce + self._aead.encrypt(nonce, data, None)
            flags |= AES_GCM
        return flags, data

    def decode(self, flags: int, data: bytes | memoryview, where: str = "") -> bytes:
        """The original payload; CorruptionError / WrongKeyError on failure."""
        if flags & AES_GCM:
            if self._aead is None:
                raise WrongKeyError(f"{where or 'data'} is encrypted: pass its encryption key")
            nonce = bytes(data[:NONCE_SIZE])
            try:
                data = self._aead.decrypt(nonce, bytes(data[NONCE_SIZE:]), None)
            except InvalidTag:
                raise CorruptionError("AES-GCM authentication failed", path=where) from None
        if flags & ZSTD:
            try:
                return _decompressor().decompress(data)
            except zstandard.ZstdError as exc:
                raise CorruptionError(f"zstd: {exc}", path=where) from None
        return data if isinstance(data, bytes) else bytes(data)
