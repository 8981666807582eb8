"""Structured logging: one JSON object per line on stderr.

Every line has ``ts`` (UTC, ISO 8601, milliseconds), ``level`` and ``event`` first,
then the event's fields. ``event`` is a short stable phrase ("listening", "ready",
"face stopped"); the fields carry the variable parts, so tools can filter on
``event`` without parsing prose.

Use it through :func:`get_logger`::

    log = get_logger(__name__)
    log.info("listening", face="resp", address="127.0.0.1:6379")

Plain :mod:`logging` calls made by other modules (and :mod:`warnings`, once
:func:`configure` has run) come out in the same format, with ``event`` set to the
message and ``logger`` to the logger's name, so a face that uses
``logging.getLogger(__name__)`` needs no changes.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

LEVELS = ("debug", "info", "warning", "error")
_FIELDS_ATTR = "tuffdb_fields"
_HANDLER_NAME = "tuffdb-jsonl"


class JsonLinesFormatter(logging.Formatter):
    """Formats a :class:`logging.LogRecord` as one compact JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        secs = int(record.created)
        millis = int((record.created - secs) * 1000)
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{millis:03d}Z"
        line: dict[str, Any] = {
            "ts": ts,
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, _FIELDS_ATTR, None)
        if fields is None:
            # A plain logging call from code that does not use get_logger().
            line["logger"] = record.name
        else:
            for key, value in fields.items():
                # The three leading keys are reserved; a clashing field keeps its value.
                line[f"field_{key}" if key in ("ts", "level", "event") else key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exc"] = self.formatException(record.exc_info)
        # default=str: Paths, exceptions and other odd values are logged, never crash a log call.
        return json.dumps(line, separators=(",", ":"), default=str, ensure_ascii=False)


class Logger:
    """A thin wrapper that turns keyword arguments into JSON fields."""

    __slots__ = ("_logger",)

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def _log(self, level: int, event: str, /, fields: dict[str, Any], exc_info: bool) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(level, event, extra={_FIELDS_ATTR: fields}, exc_info=exc_info)

    def debug(self, event: str, /, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields, exc_info=False)

    def info(self, event: str, /, **fields: Any) -> None:
        self._log(logging.INFO, event, fields, exc_info=False)

    def warning(self, event: str, /, **fields: Any) -> None:
        self._log(logging.WARNING, event, fields, exc_info=False)

    def error(self, event: str, /, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields, exc_info=False)

    def exception(self, event: str, /, **fields: Any) -> None:
        """Log at error level with the traceback of the exception being handled."""
        self._log(logging.ERROR, event, fields, exc_info=True)


def get_logger(name: str) -> Logger:
    """Return a structured logger; ``name`` is usually the module's ``__name__``."""
    return Logger(logging.getLogger(name))


QUIET_LIBRARIES = ("httpx", "httpcore")


def configure(level: str = "info", stream: IO[str] | None = None) -> None:
    """Send every log record of this process to ``stream`` (stderr) as JSON lines.

    Idempotent: a second call replaces the handler installed by the first, so the
    level can be changed after the configuration has been loaded.

    :raises ValueError: when ``level`` is not one of :data:`LEVELS`.
    """
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    # StreamHandler writes each record with one write() under its own lock and flushes,
    # so lines from threads never interleave and a reader sees each line promptly.
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonLinesFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)
    # Libraries that log every request at INFO (the etcd client's httpx): their news is
    # ours to report, as errors, not a line per request.
    for chatty in QUIET_LIBRARIES:
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
