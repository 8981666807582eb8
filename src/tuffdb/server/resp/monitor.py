"""MONITOR: every command the server runs, as a status line to each monitoring client.

A command is reported after it ran (a queued MULTI command when EXEC runs it), in
Redis's format::

    +1733456789.123456 [0 127.0.0.1:50000] "set" "key" "value"

Scripts (EVAL, FCALL: flagged ``skip_monitor``) are reported before they run, then each
``redis.call`` with ``lua`` as its address. AUTH's arguments, and HELLO's after AUTH, read
``(redacted)``. Commands flagged ``admin`` (CONFIG, SHUTDOWN, MONITOR...) and CLIENT's
admin subcommands (LIST, KILL...) are not reported, as in Redis. While a client
monitors, pipelines of one command run one by one (the batched forms would report
nothing per command).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.table import Spec

_PLAIN = re.compile(rb'[\x20-\x7e]*\Z')  # printable, to check for " and \ apart
_ESCAPES = {0x5C: b"\\\\", 0x22: b'\\"', 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t",
            0x07: b"\\a", 0x08: b"\\b"}


def quoted(arg: bytes) -> bytes:
    """An argument as Redis's sdscatrepr writes it."""
    if _PLAIN.match(arg) and b'"' not in arg and b"\\" not in arg:
        return b'"' + arg + b'"'
    out = bytearray(b'"')
    for ch in arg:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out += esc
        elif 0x20 <= ch <= 0x7E:  # noqa: PLR2004 - isprint in the C locale
            out.append(ch)
        else:
            out += b"\\x%02x" % ch
    out += b'"'
    return bytes(out)


ADMIN_CLIENT = frozenset((b"kill", b"list", b"no-evict", b"pause", b"unpause", b"unblock"))
REDACTED = b'"(redacted)"'


def feed(c: Conn, spec: Spec, args: list[bytes]) -> None:
    """Report a command ``c`` ran (or, for a script, is about to run) to every monitoring
    client."""
    if "admin" in spec.flags or (spec.name == "client" and len(args) > 1
                                 and args[1].lower() in ADMIN_CLIENT):
        return
    words = list(map(quoted, args))
    if spec.name == "auth":
        words[1:] = [REDACTED] * (len(words) - 1)
    elif spec.name == "hello":
        lowered = [a.lower() for a in args]
        if b"auth" in lowered:
            at = lowered.index(b"auth")
            words[at + 1 : at + 3] = [REDACTED] * len(words[at + 1 : at + 3])
    now = time.time()
    ctx = c.srv.scripts.current
    source = b"lua" if ctx is not None and ctx.conn is c else c.addr.encode()
    line = b"+%d.%06d [0 %b] %b\r\n" % (int(now), int(now * 1_000_000) % 1_000_000, source,
                                        b" ".join(words))
    for m in list(c.srv.monitors):
        m.push(line)
