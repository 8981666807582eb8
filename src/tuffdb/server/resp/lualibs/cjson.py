"""``cjson`` (lua-cjson 2.1): JSON encode in Lua, decode by Python's json module with
lua-cjson's own parser for what that refuses (and for its error texts)."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.lualibs.common import Args, LibError, bad_arg, to_lua_number

if TYPE_CHECKING:
    from collections.abc import Callable

DECODE_MAX_DEPTH = 1000
DEEP_RECURSION = 3 * DECODE_MAX_DEPTH + 1000
SHALLOW = 200  # documents nested at most this deep parse within Python's default limit

# The encoder, in Lua: Lua's next() order for objects, C's %.14g for numbers, lua-cjson's
# escapes (it escapes "/" too), its array rule (positive integer keys only; too sparse is
# an error) and its depth limit. Returns ok, text-or-error.
ENCODER = r"""
local null, cfg = ...
local type, pairs, floor, format, tostring = type, pairs, math.floor, string.format, tostring
local huge = math.huge
local escapes = {}
for i = 0, 31 do escapes[string.char(i)] = format("\\u%04x", i) end
escapes["\b"], escapes["\f"], escapes["\n"], escapes["\r"], escapes["\t"] = "\\b", "\\f", "\\n", "\\r", "\\t"
escapes['"'], escapes["\\"], escapes["/"], escapes["\127"] = '\\"', "\\\\", "\\/", "\\u007f"

local function fail(what, why) error("Cannot serialise " .. what .. ": " .. why, 0) end

local function number(n)
  if n ~= n or n == huge or n == -huge then
    if cfg.invalid == "null" then return "null" end
    if not cfg.invalid then fail("number", "must not be NaN or Inf") end
    if n ~= n then return "nan" end
    return n > 0 and "inf" or "-inf"
  end
  return format(cfg.numfmt, n)
end

local function str(s) return '"' .. (s:gsub('[%c"\\/]', escapes)) .. '"' end

local function array_length(t)
  local max, items = 0, 0
  for k in pairs(t) do
    if type(k) == "number" and k >= 1 and floor(k) == k then
      if k > max then max = k end
      items = items + 1
    else
      return -1
    end
  end
  if cfg.sparse_ratio > 0 and max > items * cfg.sparse_ratio and max > cfg.sparse_safe then
    if not cfg.sparse_convert then fail("table", "excessively sparse array") end
    return -1
  end
  return max
end

local value
value = function(v, depth, out)
  local t = type(v)
  if t == "string" then out[#out + 1] = str(v)
  elseif t == "number" then out[#out + 1] = number(v)
  elseif t == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif v == nil or v == null then out[#out + 1] = "null"
  elseif t == "table" then
    depth = depth + 1
    if depth > cfg.max_depth then
      error(format("Cannot serialise, excessive nesting (%d)", depth), 0)
    end
    local n = array_length(v)
    if n > 0 then
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        value(v[i], depth, out)
      end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local first = true
      for k, item in pairs(v) do
        if not first then out[#out + 1] = "," end
        first = false
        local kt = type(k)
        if kt == "string" then out[#out + 1] = str(k)
        elseif kt == "number" then out[#out + 1] = '"' .. number(k) .. '"'
        else fail(kt, "table key must be a number or string") end
        out[#out + 1] = ":"
        value(item, depth, out)
      end
      out[#out + 1] = "}"
    end
  else
    fail(t, "type not supported")
  end
end

return function(v)
  local out = {}
  local ok, err = pcall(value, v, 0, out)
  if not ok then return false, err end
  return true, table.concat(out)
end
"""

_TOKEN_NAMES = {"{": "T_OBJ_BEGIN", "}": "T_OBJ_END", "[": "T_ARR_BEGIN", "]": "T_ARR_END",
                ":": "T_COLON", ",": "T_COMMA"}
_NUMBER = re.compile(rb"-?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                     rb"|inf(?:inity)?|nan)", re.IGNORECASE)
_SPACE = re.compile(rb"[ \t\r\n]*")
_ESCAPES = {ord("b"): "\b", ord("f"): "\f", ord("n"): "\n", ord("r"): "\r", ord("t"): "\t",
            ord('"'): '"', ord("\\"): "\\", ord("/"): "/"}


class _ParseError(Exception):
    """(message, 0-based position) of a document lua-cjson refuses."""


class _BadToken(Exception):
    """(what, position): a token that is none (an error token to lua-cjson)."""


class _Decoder:
    """lua-cjson's parser, for what Python's json module refuses: its tokens, its
    number rule (whatever strtod reads: ``01``, hex) and its error texts
    ("Expected value but found T_END at character 1")."""

    def __init__(self, text: bytes) -> None:
        self.s = text
        self.pos = 0
        self.depth = 0

    def token(self) -> tuple[str, Any, int]:
        """(kind, value, position); a bad token's kind is what is wrong with it, so the
        parser's "Expected X but found <kind>" reads as lua-cjson's."""
        try:
            return self._token()
        except _BadToken as exc:
            return exc.args[0], None, exc.args[1]

    def _token(self) -> tuple[str, Any, int]:  # noqa: C901, PLR0911
        s = self.s
        self.pos = _SPACE.match(s, self.pos).end()  # type: ignore[union-attr]
        start = self.pos
        if start >= len(s):
            return "T_END", None, start
        ch = chr(s[start])
        if ch in _TOKEN_NAMES:
            self.pos += 1
            return _TOKEN_NAMES[ch], ch, start
        if ch == '"':
            return "T_STRING", self._string(), start
        if ch == "-" or ch.isdigit():
            m = _NUMBER.match(s, start)
            if m is None:
                raise self.error_at("invalid number", start)
            self.pos = m.end()
            return "T_NUMBER", _cjson_number(m.group()), start
        for word, v in ((b"true", True), (b"false", False), (b"null", None)):
            if s.startswith(word, start):
                self.pos += len(word)
                return ("T_BOOLEAN" if v is not None else "T_NULL"), v, start
        raise self.error_at("invalid token", start)

    @staticmethod
    def error_at(what: str, pos: int) -> _BadToken:
        return _BadToken(what, pos)

    def _string(self) -> bytes:
        s, p = self.s, self.pos + 1
        out = bytearray()
        while True:
            if p >= len(s):
                raise self.error_at("unexpected end of string", p)
            c = s[p]
            if c == 0x22:  # "
                self.pos = p + 1
                return bytes(out)
            if c != 0x5C:  # \
                out.append(c)
                p += 1
                continue
            if p + 1 >= len(s):
                raise self.error_at("unexpected end of string", p + 1)
            e = s[p + 1]
            if e == ord("u"):
                code, p2 = self._unicode(p)
                out += code.encode("utf-8")
                p = p2
                continue
            if e not in _ESCAPES:
                raise self.error_at("invalid escape code", p)
            out += _ESCAPES[e].encode()
            p += 2

    def _unicode(self, p: int) -> tuple[str, int]:
        s = self.s
        first = _hex4(s, p + 2)
        if first is None:
            raise self.error_at("invalid unicode escape code", p)
        if 0xDC00 <= first <= 0xDFFF:
            raise self.error_at("invalid unicode escape code", p)
        if 0xD800 <= first <= 0xDBFF:
            low = _hex4(s, p + 8) if s[p + 6 : p + 8] == b"\\u" else None
            if low is None or not 0xDC00 <= low <= 0xDFFF:
                raise self.error_at("invalid unicode escape code", p)
            return chr(0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)), p + 12
        return chr(first), p + 6

    def expected(self, what: str, tok: tuple[str, Any, int]) -> _ParseError:
        return _ParseError(f"Expected {what} but found {tok[0]}", tok[2])

    def value(self, tok: tuple[str, Any, int]) -> Any:
        kind = tok[0]
        if kind in ("T_STRING", "T_NUMBER", "T_BOOLEAN"):
            return tok[1]
        if kind == "T_NULL":
            return None
        if kind in ("T_OBJ_BEGIN", "T_ARR_BEGIN"):
            self.depth += 1
            if self.depth > DECODE_MAX_DEPTH:
                raise _ParseError(f"Found too many nested data structures ({self.depth})",
                                  tok[2])
            out = self._object() if kind == "T_OBJ_BEGIN" else self._array()
            self.depth -= 1
            return out
        raise self.expected("value", tok)

    def _object(self) -> dict[bytes, Any]:
        out: dict[bytes, Any] = {}
        tok = self.token()
        if tok[0] == "T_OBJ_END":
            return out
        while True:
            if tok[0] != "T_STRING":
                raise self.expected("object key string", tok)
            key = tok[1]
            colon = self.token()
            if colon[0] != "T_COLON":
                raise self.expected("colon", colon)
            out[key] = self.value(self.token())
            tok = self.token()
            if tok[0] == "T_OBJ_END":
                return out
            if tok[0] != "T_COMMA":
                raise self.expected("comma or object end", tok)
            tok = self.token()

    def _array(self) -> list[Any]:
        out: list[Any] = []
        tok = self.token()
        if tok[0] == "T_ARR_END":
            return out
        while True:
            out.append(self.value(tok))
            tok = self.token()
            if tok[0] == "T_ARR_END":
                return out
            if tok[0] != "T_COMMA":
                raise self.expected("comma or array end", tok)
            tok = self.token()

    def document(self) -> Any:
        v = self.value(self.token())
        end = self.token()
        if end[0] != "T_END":
            raise self.expected("the end", end)
        return v


def _hex4(s: bytes, p: int) -> int | None:
    raw = s[p : p + 4]
    if len(raw) != 4 or not all(chr(c) in "0123456789abcdefABCDEF" for c in raw):  # noqa: PLR2004
        return None
    return int(raw, 16)


def _cjson_number(raw: bytes) -> float:
    """What strtod reads from a number token (decimal, hex, inf, nan)."""
    text = raw.decode().lower()
    body = text.lstrip("-")
    if body.startswith("0x"):
        return float(int(body, 16)) * (-1 if text.startswith("-") else 1)
    return float(text)


def _parse_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity: let lua-cjson's rules decide


class CjsonLib:
    def __init__(self, lua: Any, tonumber: Callable[[bytes], Any], null: Any = None) -> None:
        self.lua = lua
        self.tonumber = tonumber
        self.null = lua.eval("newproxy(false)") if null is None else null  # cjson.null
        self.cfg = lua.table_from({b"numfmt": b"%.14g", b"precision": 14, b"max_depth": 1000,
                                   b"decode_depth": DECODE_MAX_DEPTH,
                                   b"sparse_convert": False, b"sparse_ratio": 2,
                                   b"sparse_safe": 10, b"invalid": False,
                                   b"decode_invalid": True, b"keep_buffer": True})
        self._encode = lua.execute(ENCODER, self.null, self.cfg)

    def functions(self) -> dict[bytes, Any]:
        return {b"encode": self.encode, b"decode": self.decode, b"null": self.null,
                b"new": lambda *_: self.lua.table_from(
                    CjsonLib(self.lua, self.tonumber, self.null).functions()),
                b"encode_max_depth": self._setting("encode_max_depth", b"max_depth"),
                b"decode_max_depth": self._setting("decode_max_depth", b"decode_depth"),
                b"encode_number_precision": self.encode_number_precision,
                b"encode_sparse_array": self.encode_sparse_array,
                b"encode_invalid_numbers": self._switch("encode_invalid_numbers", b"invalid"),
                b"decode_invalid_numbers": self._switch("decode_invalid_numbers",
                                                        b"decode_invalid"),
                b"encode_keep_buffer": self._switch("encode_keep_buffer", b"keep_buffer"),
                b"_NAME": b"cjson", b"_VERSION": b"2.1.0"}

    def encode(self, *a: Any) -> bytes:
        if len(a) != 1:
            raise bad_arg(1, "encode", "expected 1 argument")
        ok, text = self._encode(a[0])
        if not ok:
            raise LibError(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
        return text  # type: ignore[no-any-return]

    def decode(self, *a: Any) -> Any:
        if len(a) != 1:
            raise bad_arg(1, "decode", "expected 1 argument")
        raw = Args("decode", a, self.tonumber).string(1)
        nests = raw.count(b"[") + raw.count(b"{")  # at least the document's depth
        if nests <= DECODE_MAX_DEPTH:  # Python's json has no depth limit: a document that
            try:  # could pass lua-cjson's goes to the parser below, which has it
                value = json.loads(raw.decode("utf-8", "surrogateescape"),
                                   parse_constant=_parse_constant)
                return self._to_lua(value)
            except (ValueError, RecursionError, UnicodeEncodeError):
                pass
        if nests > SHALLOW and sys.getrecursionlimit() < DEEP_RECURSION:
            # Three Python frames per level of a document lua-cjson takes (1000 deep):
            # CPython 3.11 makes Python-to-Python calls without C stack, so a higher
            # limit is safe. Raised once, by the first document that may be this deep.
            sys.setrecursionlimit(DEEP_RECURSION)
        try:
            return self._to_lua(_Decoder(raw).document())
        except _ParseError as exc:
            what, pos = exc.args
            raise LibError(f"{what} at character {pos + 1}") from None

    def _to_lua(self, v: Any) -> Any:
        if v is None:
            return self.null
        if isinstance(v, str):
            return v.encode("utf-8", "surrogateescape")
        if isinstance(v, bool) or isinstance(v, (bytes, float)):
            return v
        if isinstance(v, int):
            return to_lua_number(v)
        if isinstance(v, list):
            return self.lua.table_from([self._to_lua(x) for x in v])
        return self.lua.table_from({self._to_lua(k): self._to_lua(x) for k, x in v.items()})

    def _setting(self, fname: str, field: bytes) -> Callable[..., Any]:
        def f(*a: Any) -> Any:
            if a and a[0] is not None:
                n = int(Args(fname, a, self.tonumber).number(1))
                if n < 1:
                    raise bad_arg(1, fname, "expected integer between 1 and 2147483647")
                self.cfg[field] = n
            return self.cfg[field]
        return f

    def encode_number_precision(self, *a: Any) -> Any:
        if a and a[0] is not None:
            n = int(Args("encode_number_precision", a, self.tonumber).number(1))
            if not 1 <= n <= 14:  # noqa: PLR2004
                raise bad_arg(1, "encode_number_precision", "expected integer between 1 and 14")
            self.cfg[b"precision"] = n
            self.cfg[b"numfmt"] = b"%%.%dg" % n
        return self.cfg[b"precision"]

    def encode_sparse_array(self, *a: Any) -> tuple[Any, ...]:
        args = Args("encode_sparse_array", a, self.tonumber)
        if a and a[0] is not None:
            self.cfg[b"sparse_convert"] = bool(a[0])
        if len(a) > 1 and a[1] is not None:
            self.cfg[b"sparse_ratio"] = int(args.number(2))
        if len(a) > 2 and a[2] is not None:  # noqa: PLR2004
            self.cfg[b"sparse_safe"] = int(args.number(3))
        return (self.cfg[b"sparse_convert"], self.cfg[b"sparse_ratio"], self.cfg[b"sparse_safe"])

    def _switch(self, fname: str, field: bytes) -> Callable[..., Any]:
        def f(*a: Any) -> Any:
            if a and a[0] is not None:
                v = a[0]
                if v == b"null" and field == b"invalid":
                    self.cfg[field] = b"null"
                elif v in (True, b"on"):
                    self.cfg[field] = True
                elif v in (False, b"off"):
                    self.cfg[field] = False
                else:
                    raise bad_arg(1, fname, f"invalid option '{_text(v)}'")
            return self.cfg[field]
        return f


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
