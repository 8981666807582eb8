"""The libraries Redis 7.0 loads into its Lua state beside the base ones: ``cjson``,
``cmsgpack``, ``struct`` and ``bit`` (redis-types.md §3), one module each, written from
their documented behaviour and checked reply for reply against redis-server
(tests/compat/test_resp_scripting.py).

Every entry point is a Python callable, so a C function to Lua: a script's
``return cjson.encode(x)`` keeps the script's frame (a Lua function would be tail-called
and the error's line lost). A failure raises :class:`LibError`; the sandbox's error
handler (lua.py) prefixes it with the script's line, ``user_script:N:``, as ``luaL_error``
does in Redis. ``cjson.encode`` walks the value in Lua (``cjson.ENCODER``): Lua's own
``next`` order, ``string.format("%.14g")`` and recursion that does not grow Python's stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.lualibs.bit import BitLib
from tuffdb.server.resp.lualibs.cjson import CjsonLib
from tuffdb.server.resp.lualibs.cmsgpack import MsgpackLib
from tuffdb.server.resp.lualibs.common import LibError
from tuffdb.server.resp.lualibs.structs import StructLib

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LibError", "install"]


def install(lua: Any, tonumber: Callable[[bytes], Any]) -> dict[bytes, Any]:
    """The four library tables (Lua tables, not yet read-only) for the sandbox."""
    libs = {b"cjson": CjsonLib(lua, tonumber).functions(),
            b"cmsgpack": {**MsgpackLib(tonumber, lua.table).functions(),
                          b"_NAME": b"lua-cmsgpack", b"_VERSION": b"lua-cmsgpack 0.4.0",
                          b"_COPYRIGHT": b"Copyright (C) 2012, Salvatore Sanfilippo",
                          b"_DESCRIPTION": b"MessagePack C implementation for Lua"},
            b"struct": StructLib(tonumber).functions(),
            b"bit": BitLib(tonumber).functions()}
    return {name: lua.table_from(fns) for name, fns in libs.items()}
