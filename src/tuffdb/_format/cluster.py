"""A cluster node's acked file, ``<data_dir>/cluster/acked`` (spec: docs/format/cluster.md).

Two slots, ``ACKED_SLOT_SPAN`` bytes apart, in a file of ``ACKED_FILE_SIZE`` zero bytes made
once; each slot holds one record: a sequence number (the newer slot has the larger), the
``gen`` of the ``state.json`` it follows, the acknowledged LSN, and the CRC-32C of those
24 bytes.
"""

from __future__ import annotations

import struct

ACKED_SLOT = struct.Struct("<QQQI")  # sequence, gen, lsn, crc
ACKED_SLOT_SIZE = ACKED_SLOT.size
ACKED_SLOT_SPAN = 4096  # a page each (direct I/O writes whole blocks); a torn write spoils one
ACKED_FILE_SIZE = 2 * ACKED_SLOT_SPAN
SEQUENCE_OFFSET = 0
GEN_OFFSET = 8
LSN_OFFSET = 16
CRC_OFFSET = 24
