"""The Lua libraries' decoders (server/resp/lualibs/) on hostile input: any bytes either
decode or raise LibError (a Lua error with lua-cjson's or lua_cmsgpack's text), never
another exception; what they encode decodes back to the same value.

Their replies are compared with redis-server's in tests/compat/test_resp_scripting.py;
this checks the edges no script list covers.
"""

from __future__ import annotations

from typing import Any

import lupa.lua51 as lua51
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuffdb.server.resp.lualibs import LibError, install


@pytest.fixture(scope="module")
def libs() -> dict[bytes, Any]:
    lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                           register_eval=False, register_builtins=False)
    return install(lua, lua.globals().tonumber)


def _either(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except LibError:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_cmsgpack_unpack_of_any_bytes_decodes_or_raises_lib_error(
        libs: dict[bytes, Any], data: bytes) -> None:
    _either(libs[b"cmsgpack"].unpack, data)
    _either(libs[b"cmsgpack"].unpack_one, data, 1)


JSONISH = st.text(alphabet='{}[]:,"\\ -0123456789.eEtrufalsn\x01\u00e9xu', max_size=40)


@settings(max_examples=300, deadline=None)
@given(text=JSONISH)
def test_cjson_decode_of_any_text_decodes_or_raises_lib_error(
        libs: dict[bytes, Any], text: str) -> None:
    _either(libs[b"cjson"].decode, text.encode())


@settings(max_examples=300, deadline=None)
@given(fmt=st.text(alphabet="<>=! xbBhHlLTiIcsfd0123456789", max_size=10),
       data=st.binary(max_size=40))
def test_struct_unpack_of_any_format_and_bytes_unpacks_or_raises_lib_error(
        libs: dict[bytes, Any], fmt: str, data: bytes) -> None:
    _either(libs[b"struct"].unpack, fmt.encode(), data)
    _either(libs[b"struct"].size, fmt.encode())


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.binary(max_size=300),
    st.booleans(), st.floats(allow_nan=False, width=64)), min_size=1, max_size=8))
def test_cmsgpack_round_trips_scalars(libs: dict[bytes, Any], values: list[Any]) -> None:
    mp = libs[b"cmsgpack"]
    back = mp.unpack(mp.pack(*values))
    back = back if isinstance(back, tuple) else (back,)
    assert len(back) == len(values)
    for got, want in zip(back, values, strict=True):
        if isinstance(want, int) and not isinstance(want, bool) and abs(want) > 2**53:
            assert got == float(want)  # a Lua number is a double
        else:
            assert got == want


def test_cjson_decode_errors_say_what_lua_cjson_says(libs: dict[bytes, Any]) -> None:
    decode = libs[b"cjson"].decode
    for text, message in [
        (b"", "Expected value but found T_END at character 1"),
        (b"[1,2", "Expected comma or array end but found T_END at character 5"),
        (b'{"a" 2}', "Expected colon but found T_NUMBER at character 6"),
        (b'"a\\qb"', "Expected value but found invalid escape code at character 3"),
        (b"[1] x", "Expected the end but found invalid token at character 5"),
    ]:
        with pytest.raises(LibError) as err:
            decode(text)
        assert str(err.value) == message
