"""Event-log frame kinds and payload headers (spec: docs/format/events-log.md).

Frame kinds 32-47 are reserved for events in ``tuffdb._format.record.Kind``.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from tuffdb._format.segment import FileKind


class FrameKind(IntEnum):
    EVENTS = 32  # EVENTS_HEADER | entries (see codec.py)
    TRACKING = 33  # position u64 | source (UTF-8, the rest of the payload)
    INDEX = 34  # the body of a sealed segment's .idx file (see sealed_index.py)


EVENTS_HEADER = struct.Struct("<QI")  # first_position, count
FIRST_POSITION_OFFSET = 0
COUNT_OFFSET = FIRST_POSITION_OFFSET + 8
EVENTS_HEADER_SIZE = COUNT_OFFSET + 4
assert EVENTS_HEADER.size == EVENTS_HEADER_SIZE == 12

TRACKING_POSITION = struct.Struct("<Q")

LOG_FILE_KIND = FileKind.EVENT_LOG
INDEX_FILE_KIND = FileKind.EVENT_INDEX
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".idx"
