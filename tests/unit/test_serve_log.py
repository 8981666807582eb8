"""Structured logging: every record is one parseable JSON line with ts, level, event.

Tests and supervisors wait for server events by reading these lines, so a record
that is not valid JSON, or a multi-line record, breaks them.
"""

from __future__ import annotations

import io
import json
import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tuffdb.log import configure, get_logger

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    out = io.StringIO()
    configure("info", stream=out)
    yield out
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logging.captureWarnings(False)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_fields_follow_ts_level_event(stream: io.StringIO) -> None:
    get_logger("t").info("listening", face="resp", port=6379, path=Path("/x"))
    (line,) = lines(stream)
    assert list(line)[:3] == ["ts", "level", "event"]
    assert line["ts"].endswith("Z")
    assert line["level"] == "info"
    assert line["event"] == "listening"
    assert (line["face"], line["port"], line["path"]) == ("resp", 6379, "/x")


def test_levels_below_the_configured_one_are_dropped(stream: io.StringIO) -> None:
    log = get_logger("t")
    log.debug("hidden")
    log.warning("shown")
    assert [line["event"] for line in lines(stream)] == ["shown"]


def test_plain_logging_and_warnings_come_out_as_json_lines(stream: io.StringIO) -> None:
    logging.getLogger("some.face").warning("client %s dropped", "c1")
    warnings.warn("tail truncated", UserWarning, stacklevel=1)
    first, second = lines(stream)
    assert (first["event"], first["logger"]) == ("client c1 dropped", "some.face")
    assert "tail truncated" in second["event"]


def test_exception_text_stays_on_one_line(stream: io.StringIO) -> None:
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        get_logger("t").exception("face stop failed", face="resp")
    assert len(stream.getvalue().splitlines()) == 1
    (line,) = lines(stream)
    assert "RuntimeError: boom" in line["exc"]


def test_reserved_keys_are_not_overwritten_by_fields(stream: io.StringIO) -> None:
    get_logger("t").info("real", event="fake", level="x")
    (line,) = lines(stream)
    assert (line["event"], line["level"]) == ("real", "info")
    assert (line["field_event"], line["field_level"]) == ("fake", "x")


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError, match="log level must be one of"):
        configure("verbose")
