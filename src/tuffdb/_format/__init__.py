"""Constants shared by every reader and writer of tuffdb files (spec: docs/format/README.md).

All integers on disk are little-endian. Checksums are CRC-32C (Castagnoli), the
polynomial with hardware support on x86-64 and arm64 (``google_crc32c``).
"""

from __future__ import annotations

ENDIAN = "<"
FORMAT_VERSION = 1
# PNG-style: a high-bit byte (catches 7-bit transfers), a name, a newline (catches
# newline conversion), then the format version byte.
MAGIC_PREFIX = b"\x89TUFDB\n"
MAGIC = MAGIC_PREFIX + bytes([FORMAT_VERSION])
assert len(MAGIC) == 8
