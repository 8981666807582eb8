"""CRC-32C over bytes-like objects (spec: docs/format/README.md, "Checksums")."""

from __future__ import annotations

import google_crc32c

crc32c = google_crc32c.value
crc32c_extend = google_crc32c.extend

__all__ = ["crc32c", "crc32c_extend"]
