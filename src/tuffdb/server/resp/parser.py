"""Incremental, bounded parser for RESP requests (multibulk and inline).

Requests arrive as arrays of bulk strings (``*2\\r\\n$3\\r\\nGET\\r\\n$1\\r\\nk\\r\\n``) or
as inline lines (``GET k\\r\\n``). :meth:`RequestParser.feed` takes whatever the socket
delivered; :meth:`RequestParser.commands` returns every complete command in the buffer
and keeps the rest. Malformed input raises :class:`tuffdb.errors.ProtocolError` whose
message is the text Redis 7 sends (``Protocol error: ...``); the caller replies with it
and closes the connection.

Bounds (so a hostile client cannot make us buffer without limit):
- a multibulk header may announce at most ``MAX_MULTIBULK_LEN`` arguments;
- a bulk may announce at most ``max_bulk_len`` bytes (``proto-max-bulk-len``);
- an inline request, or a ``*``/``$`` header line, is at most ``MAX_INLINE_SIZE`` bytes.
So the buffer never holds more than one pending bulk plus one read's worth of bytes.

Large bulks are not re-concatenated on every read: while a known number of bytes is
still missing, reads are collected in a list and joined once (linear, not quadratic).
"""

from __future__ import annotations

from tuffdb.errors import ProtocolError

MAX_INLINE_SIZE = 64 * 1024  # PROTO_INLINE_MAX_SIZE in Redis
MAX_MULTIBULK_LEN = 1024 * 1024  # Redis: "invalid multibulk length" above this
DEFAULT_MAX_BULK_LEN = 512 * 1024 * 1024  # proto-max-bulk-len default
FAST_PATH_MAX_SIZE = 64 * 1024  # buffers up to this size try the split-based fast path

# Header tokens the uniform fast path recognises without parsing: "*1".."*9" and
# "$0".."$65535" (canonical digits only; anything else goes through the general path).
_COUNTS = {b"*%d" % n: n for n in range(1, 10)}
_BULK_LENS = {b"$%d" % n: n for n in range(65536)}
_HEADERS = list(_BULK_LENS)  # _HEADERS[n] is b"$n" (the same objects)

_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = b"0123456789abcdefABCDEF"


class RequestParser:
    """Turns a byte stream into commands (lists of ``bytes``); one per connection."""

    __slots__ = ("_args", "_buf", "_chunks", "_have", "_left", "_need", "_pos", "error",
                 "max_bulk_len")

    def __init__(self, max_bulk_len: int = DEFAULT_MAX_BULK_LEN) -> None:
        self.max_bulk_len = max_bulk_len
        self._buf = b""
        self._pos = 0
        self._chunks: list[bytes] = []
        self._have = 0  # bytes in _chunks
        self._need = 0  # do not parse until this many unread bytes are buffered
        self._args: list[bytes] = []  # arguments of a multibulk command in progress
        self._left = 0  # arguments still missing from that command
        # A protocol error found after some good commands: they are returned first and
        # the error is raised by the next call (Redis runs what preceded the bad bytes).
        self.error: ProtocolError | None = None

    def buffered(self) -> int:
        """Bytes received but not yet consumed by a complete command."""
        return len(self._buf) - self._pos + self._have

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._have += len(data)

    def _join(self) -> None:
        rest = self._buf[self._pos :] if self._pos < len(self._buf) else b""
        self._buf = rest + b"".join(self._chunks) if rest else b"".join(self._chunks)
        self._chunks.clear()
        self._have = 0
        self._pos = 0

    def commands(self) -> list[list[bytes]]:  # noqa: C901
        """Return every complete command buffered so far (possibly none)."""
        if self.error is not None:
            raise self.error
        if self._have and len(self._buf) - self._pos + self._have < self._need:
            return []  # still waiting for the rest of a big bulk: do not join yet
        if self._chunks:
            self._join()
        elif self._pos >= len(self._buf):
            return []
        out: list[list[bytes]] = []
        if not self._left and len(self._buf) - self._pos <= FAST_PATH_MAX_SIZE:
            toks = self._buf[self._pos :].split(b"\r\n")  # one split serves both fast paths
            self._fast(out, toks, self._uniform(out, toks))
            if self._pos >= len(self._buf):
                return out
        while True:
            try:
                cmd = (self._multibulk() if (self._left or self._starts_multibulk())
                       else self._inline())
            except ProtocolError as exc:
                if not out:
                    raise
                self.error = exc
                return out
            if cmd is None:
                return out
            if cmd:
                out.append(cmd)

    def _uniform(self, out: list[list[bytes]], toks: list[bytes]) -> int:
        """Fast path for a pipeline of commands of one arity (``-P 16`` of GETs, MSET-like
        bulk loads): after one split on CRLF the tokens repeat with period ``2n + 1``, so
        every header is checked column-wise by C code (slices, ``map``, list compare).

        Anything irregular (another arity, a bulk holding CRLF, a non-canonical or large
        length, an incomplete last command) stops here; ``_fast`` and the general parser
        continue from the first command not taken, so results and errors are the same.
        Returns how many tokens it consumed.
        """
        n = _COUNTS.get(toks[0])
        if n is None or self.max_bulk_len < 65536:
            return 0
        period = 2 * n + 1
        m = (len(toks) - 1) // period  # commands whose last CRLF has arrived
        if m < 2:
            return 0  # one command: _fast's loop is cheaper
        end = m * period
        stars = toks[0:end:period]
        if stars.count(toks[0]) != m:
            return 0
        cols = []
        header = _HEADERS.__getitem__
        for k in range(1, period, 2):
            col = toks[k + 1 : end : period]
            heads = toks[k:end:period]
            first = _BULK_LENS.get(heads[0])
            if first is None:
                return 0
            if heads.count(heads[0]) == m:  # one length for the column (a command name, a
                if list(map(len, col)).count(first) != m:  # key): count, build no headers
                    return 0
            else:
                try:
                    if heads != list(map(header, map(len, col))):
                        return 0
                except IndexError:  # a token of 64 KiB or more: not this path's
                    return 0
            cols.append(col)
        out.extend(map(list, zip(*cols, strict=True)))
        # The tokens after the last command, and the CRLF before each, are what is left:
        # the commands span the rest (one short sum, not one over every token).
        rest = len(toks) - end - 1
        self._pos = len(self._buf) - sum(map(len, toks[end:])) - 2 * rest
        return end

    def _fast(self, out: list[list[bytes]], toks: list[bytes], i: int) -> None:
        """Fast path for small buffers: one C-level split on CRLF, then check lengths.

        A bulk whose declared length differs from its token (it contains CRLF, or the
        input is malformed, oversized or incomplete) ends the fast path; the general
        parser below takes over at that command, so results and errors are the same.
        """
        pos = self._pos
        ntok = len(toks)
        max_bulk = self.max_bulk_len
        while i < ntok:
            t = toks[i]
            if not t or t[0] != 0x2A:  # "*"
                break
            count = t[1:]
            if not count.isdigit() or len(count) > 7:
                break
            n = int(count)
            end = i + 1 + 2 * n
            if n == 0 or n > MAX_MULTIBULK_LEN or end >= ntok:
                break  # (end >= ntok: the last bulk's CRLF has not arrived)
            size = len(t) + 2
            args = toks[i + 2 : end : 2]
            for j in range(i + 1, end, 2):
                h = toks[j]
                if h[:1] != b"$":
                    break
                hl = h[1:]
                if not hl.isdigit():
                    break
                k = int(hl)
                if k != len(toks[j + 1]) or k > max_bulk:
                    break
                size += len(h) + k + 4
            else:
                out.append(args)
                pos += size
                i = end
                continue
            break
        self._pos = pos

    def _starts_multibulk(self) -> bool:
        return self._pos < len(self._buf) and self._buf[self._pos] == 0x2A  # "*"

    def _multibulk(self) -> list[bytes] | None:  # noqa: C901, PLR0912, PLR0915  (hot, inlined)
        # Hot path: locals only, one find() and one int() per argument.
        buf = self._buf
        size = len(buf)
        pos = self._pos
        if not self._left:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if size - pos > MAX_INLINE_SIZE:
                    raise ProtocolError("Protocol error: too big mbulk count string")
                self._need = 0
                return None
            text = buf[pos + 1 : end]
            n = int(text) if text.isdigit() and len(text) < 10 else _to_int(text)
            if n is None or n > MAX_MULTIBULK_LEN:
                raise ProtocolError("Protocol error: invalid multibulk length")
            pos = self._pos = end + 2
            if n <= 0:
                return []
            self._left = n
            self._args = []
        args = self._args
        left = self._left
        max_bulk = self.max_bulk_len
        while left:
            if pos >= size:
                break
            if buf[pos] != 0x24:  # "$"
                got = chr(buf[pos])
                raise ProtocolError(f"Protocol error: expected '$', got '{got}'")
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if size - pos > MAX_INLINE_SIZE:
                    raise ProtocolError("Protocol error: too big bulk count string")
                break
            text = buf[pos + 1 : end]
            n = int(text) if text.isdigit() and len(text) < 11 else _to_int(text)
            if n is None or n < 0 or n > max_bulk:
                raise ProtocolError("Protocol error: invalid bulk length")
            stop = end + 2 + n
            if stop + 2 > size:
                self._need = stop + 2 - pos  # measured from the "$": _pos stays there
                self._pos = pos
                self._left = left
                return None
            args.append(buf[end + 2 : stop])
            pos = stop + 2
            left -= 1
        self._pos = pos
        self._left = left
        if left:
            self._need = 0
            return None
        self._args = []
        self._need = 0
        if pos > 65536 and pos * 2 > size:
            self._buf = buf[pos:]
            self._pos = 0
        return args

    def _inline(self) -> list[bytes] | None:
        buf = self._buf
        if self._pos >= len(buf):
            self._buf = b""
            self._pos = 0
            return None
        end = buf.find(b"\n", self._pos)
        if end < 0:
            if len(buf) - self._pos > MAX_INLINE_SIZE:
                raise ProtocolError("Protocol error: too big inline request")
            return None
        if end - self._pos > MAX_INLINE_SIZE:
            raise ProtocolError("Protocol error: too big inline request")
        line = buf[self._pos : end]
        if line.endswith(b"\r"):
            line = line[:-1]
        self._pos = end + 1
        args = split_args(line)
        if args is None:
            raise ProtocolError("Protocol error: unbalanced quotes in request")
        return args


def _to_int(text: bytes) -> int | None:
    """Slow path for a header number: negative, too long, or not a number at all."""
    if not text or len(text) > 20:
        return None
    if text[0] == 0x2D:  # "-"
        digits = text[1:]
        if not digits.isdigit():
            return None
        return -int(digits)
    if not text.isdigit():
        return None
    return int(text)


def split_args(line: bytes) -> list[bytes] | None:  # noqa: C901, PLR0912  (a small lexer)
    """Split an inline request like Redis's ``sdssplitargs``; None on bad quoting."""
    out: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in b" \t\n\r\v\f":
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        quote = 0
        while True:
            if quote == 0:
                if i >= n or line[i] in b" \t\n\r\v\f":
                    break
                c = line[i]
                if c in (0x22, 0x27):  # opening quote
                    quote = c
                else:
                    cur.append(c)
                i += 1
                continue
            if i >= n:
                return None  # unterminated quotes
            c = line[i]
            if quote == 0x22 and c == 0x5C and i + 1 < n:  # backslash inside "..."
                nxt = line[i + 1]
                if nxt == 0x78 and i + 3 < n and line[i + 2] in _HEX and line[i + 3] in _HEX:
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 4
                    continue
                cur.append(_ESCAPES.get(nxt, nxt))
                i += 2
                continue
            if quote == 0x27 and c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                cur.append(0x27)
                i += 2
                continue
            if c == quote:
                # a closing quote must be followed by a space or the end
                if i + 1 < n and line[i + 1] not in b" \t\n\r\v\f":
                    return None
                i += 1
                break
            cur.append(c)
            i += 1
        out.append(bytes(cur))
