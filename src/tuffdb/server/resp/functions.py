"""Redis 7.0 functions: the libraries FUNCTION LOAD keeps, and what FCALL runs.

A library is Lua code whose first line is ``#!lua name=<library>``; running it once
registers its functions (``redis.register_function``; lua.py runs it). The libraries are
data, as in Redis: every library's code is stored in one engine entry, ``ff 03 functions``
(a msgpack map, name -> code; docs/format/resp.md), written in the same batch machinery as
any command's writes, so they survive a restart, travel to followers with the KV log and
are restored by a backup. Each server keeps the compiled functions in memory and reloads
them whenever that entry differs from what it loaded (after a start, or a promotion
that brought another node's libraries).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from tuffdb._format.resp import FUNCTIONS_KEY
from tuffdb.server.resp.table import CommandError

if TYPE_CHECKING:
    from tuffdb.server.resp.lua import LuaEngine

LOAD_TIMEOUT_S = 0.5  # Redis's limit for running a library's code at FUNCTION LOAD
_NAME = re.compile(rb"[A-Za-z0-9_]+\Z")
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(dict[str, bytes]).decode


class Function:
    __slots__ = ("description", "flags", "fn", "library", "name")

    def __init__(self, name: str, fn: Any, flags: frozenset[str], description: bytes | None,
                 library: str) -> None:
        self.name = name
        self.fn = fn
        self.flags = flags
        self.description = description
        self.library = library


class Library:
    __slots__ = ("code", "functions", "name")

    def __init__(self, name: str, code: bytes, functions: list[Function]) -> None:
        self.name = name
        self.code = code
        self.functions = functions


def library_name(code: bytes) -> str:
    """The ``name=`` of a library's ``#!<engine> name=<name>`` first line (Redis's errors)."""
    if not code.startswith(b"#!"):
        raise CommandError("ERR Missing library metadata")
    first = code.split(b"\n", 1)[0].rstrip(b"\r")
    parts = first[2:].split(b" ")
    if parts[0] != b"lua":
        raise CommandError(f"ERR Engine '{parts[0].decode('utf-8', 'replace')}' not found")
    name = None
    for part in parts[1:]:
        if not part:
            continue
        if part.startswith(b"name="):
            name = part[5:]
        else:
            raise CommandError(
                f"ERR Invalid metadata value given: {part.decode('utf-8', 'replace')}")
    if name is None:
        raise CommandError("ERR Library name was not given")
    if not _NAME.match(name):
        raise CommandError("ERR Library names can only contain letters, numbers, or "
                           "underscores(_) and must be at least one character long")
    return name.decode()


class Functions:
    """The libraries loaded on this server (and the stored entry they came from)."""

    def __init__(self, engine: LuaEngine) -> None:
        self.engine = engine
        self.libraries: dict[str, Library] = {}
        self.functions: dict[str, Function] = {}
        self._loaded_from: bytes | None = None

    # -- the stored entry -------------------------------------------------------------------
    def sync(self, db: Any) -> None:
        """Reload every library if the stored entry is not the one loaded."""
        raw = db.get(FUNCTIONS_KEY)
        if raw == self._loaded_from:
            return
        self.libraries.clear()
        self.functions.clear()
        for name, code in (_decode(raw) if raw else {}).items():
            try:
                self._install(self._compile(name, code))
            except (CommandError, ValueError) as exc:  # stored by a server that took it
                raise CommandError(f"ERR stored function library {name!r} does not load: "
                                   f"{exc}") from None
        self._loaded_from = raw

    def entry(self) -> tuple[bytes, bytes | None]:
        """(key, value) of the stored entry for the current libraries (None: none left)."""
        value = _encode({n: lib.code for n, lib in self.libraries.items()}) \
            if self.libraries else None
        self._loaded_from = value
        return FUNCTIONS_KEY, value

    # -- changes ------------------------------------------------------------------------------
    def load(self, code: bytes, *, replace: bool) -> str:
        name = library_name(code)
        old = self.libraries.get(name)
        if old is not None and not replace:
            raise CommandError(f"ERR Library '{name}' already exists")
        lib = self._compile(name, code)
        for f in lib.functions:
            other = self.functions.get(f.name)
            if other is not None and other.library != name:
                raise CommandError(f"ERR Function {f.name} already exists")
        if old is not None:
            self._remove(old)
        self._install(lib)
        return name

    def delete(self, name: str) -> None:
        lib = self.libraries.get(name)
        if lib is None:
            raise CommandError("ERR Library not found")
        self._remove(lib)

    def flush(self) -> None:
        self.libraries.clear()
        self.functions.clear()

    def _compile(self, name: str, code: bytes) -> Library:
        try:
            registered = self.engine.load_library(code, LOAD_TIMEOUT_S)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not registered:
            raise CommandError("ERR No functions registered")
        return Library(name, code, [Function(fname, fn, flags, description, name)
                                    for fname, fn, flags, description in registered])

    def _install(self, lib: Library) -> None:
        self.libraries[lib.name] = lib
        for f in lib.functions:
            self.functions[f.name] = f

    def _remove(self, lib: Library) -> None:
        del self.libraries[lib.name]
        for f in lib.functions:
            if self.functions.get(f.name) is f:
                del self.functions[f.name]
