"""The RESP request parser: incremental, bounded, and never crashing on input.

Hostile or broken clients must get Redis's exact ``Protocol error: ...`` text and
nothing else; the buffer must never grow past one pending bulk plus one read, and a
command split across reads at any byte must parse exactly as if sent whole.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuffdb.errors import ProtocolError
from tuffdb.server.resp.parser import MAX_INLINE_SIZE, RequestParser, split_args


def encode(cmd: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(cmd) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in cmd)


def parse_all(data: bytes, cuts: list[int] | None = None) -> list[list[bytes]]:
    p = RequestParser()
    out: list[list[bytes]] = []
    last = 0
    for cut in sorted(set(cuts or [])) + [len(data)]:
        p.feed(data[last:cut])
        out += p.commands()
        last = cut
    return out


def test_multibulk_command_parses_to_arguments() -> None:
    assert parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") == [[b"GET", b"k"]]


def test_pipelined_commands_all_come_out_in_order() -> None:
    data = encode([b"SET", b"a", b"1"]) + encode([b"GET", b"a"]) + b"PING\r\n"
    assert parse_all(data) == [[b"SET", b"a", b"1"], [b"GET", b"a"], [b"PING"]]


def test_incomplete_command_waits_for_the_rest() -> None:
    p = RequestParser()
    p.feed(b"*2\r\n$3\r\nGET\r\n$5\r\nhel")
    assert p.commands() == []
    p.feed(b"lo\r\n")
    assert p.commands() == [[b"GET", b"hello"]]
    assert p.buffered() == 0


def test_binary_safe_bulk_with_crlf_inside() -> None:
    assert parse_all(encode([b"SET", b"k", b"a\r\nb\x00"])) == [[b"SET", b"k", b"a\r\nb\x00"]]


def test_inline_commands_split_on_spaces_and_honour_quotes() -> None:
    assert parse_all(b'SET k "a b\\x41\\n"\r\n') == [[b"SET", b"k", b"a bA\n"]]
    assert parse_all(b"GET  'it\\'s'\n") == [[b"GET", b"it's"]]


def test_empty_inline_lines_and_empty_multibulk_are_skipped() -> None:
    assert parse_all(b"\r\n\r\n*0\r\n*-1\r\nPING\r\n") == [[b"PING"]]


@pytest.mark.parametrize(("data", "message"), [
    (b"*abc\r\n", "invalid multibulk length"),
    (b"*2000000\r\n", "invalid multibulk length"),
    (b"*1\r\n+GET\r\n", "expected '$', got '+'"),
    (b"*1\r\n$-5\r\n", "invalid bulk length"),
    (b"*1\r\n$x\r\n", "invalid bulk length"),
    (b'GET "unterminated\r\n', "unbalanced quotes in request"),
    (b'GET "a"b\r\n', "unbalanced quotes in request"),
])
def test_malformed_input_raises_redis_protocol_error_text(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=f"^{re.escape('Protocol error: ' + message)}$"):
        parse_all(data)


def test_bulk_longer_than_proto_max_bulk_len_is_refused_before_buffering() -> None:
    p = RequestParser(max_bulk_len=1024)
    p.feed(b"*1\r\n$1025\r\n")
    with pytest.raises(ProtocolError, match="invalid bulk length"):
        p.commands()


def test_inline_request_without_newline_is_bounded() -> None:
    p = RequestParser()
    p.feed(b"A" * (MAX_INLINE_SIZE + 1))
    with pytest.raises(ProtocolError, match="too big inline request"):
        p.commands()


def test_header_line_without_crlf_is_bounded() -> None:
    p = RequestParser()
    p.feed(b"*1\r\n$" + b"1" * (MAX_INLINE_SIZE + 10))
    with pytest.raises(ProtocolError, match="too big bulk count string"):
        p.commands()


def test_big_bulk_arriving_in_many_reads_is_joined_once() -> None:
    value = bytes(range(256)) * 4096  # 1 MiB
    data = encode([b"SET", b"k", value])
    p = RequestParser()
    out = []
    for i in range(0, len(data), 1000):
        p.feed(data[i : i + 1000])
        out += p.commands()
    assert out == [[b"SET", b"k", value]]


def test_split_args_matches_redis_escapes() -> None:
    assert split_args(b'"\\t\\r\\a\\b\\\\"') == [b"\t\r\x07\x08\\"]
    assert split_args(b"   ") == []


args_st = st.lists(st.binary(max_size=40), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(cmds=st.lists(args_st, min_size=1, max_size=8), cuts=st.lists(st.integers(0, 2000)))
def test_any_split_of_a_valid_stream_parses_like_the_whole(cmds: list[list[bytes]],
                                                          cuts: list[int]) -> None:
    data = b"".join(encode(c) for c in cmds)
    assert parse_all(data, [c % (len(data) + 1) for c in cuts]) == cmds


@settings(max_examples=300, deadline=None)
@given(arity=st.integers(1, 4), data=st.data(), tail=st.lists(args_st, max_size=3),
       cuts=st.lists(st.integers(0, 4000), max_size=4))
def test_pipelines_of_one_arity_parse_like_any_other(arity: int, data: st.DataObject,
                                                     tail: list[list[bytes]],
                                                     cuts: list[int]) -> None:
    # The uniform fast path takes these column-wise; bulks holding CRLF, long or empty
    # bulks and a tail of other arities must still come out exactly as sent.
    arg = st.one_of(st.binary(max_size=12), st.sampled_from([b"\r\n", b"a\r\nb", b"x" * 70000]))
    cmds = data.draw(st.lists(st.lists(arg, min_size=arity, max_size=arity), min_size=2,
                              max_size=20))
    stream = b"".join(encode(c) for c in cmds + tail)
    assert parse_all(stream, [c % (len(stream) + 1) for c in cuts]) == cmds + tail


def test_uniform_pipeline_with_noncanonical_length_falls_back_to_the_general_parser() -> None:
    stream = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" * 3 + b"*2\r\n$3\r\nGET\r\n$01\r\nk\r\n"
    assert parse_all(stream) == [[b"GET", b"k"]] * 4


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3000), max_size=10),
       max_bulk=st.integers(1, 5000))
def test_random_bytes_never_crash_and_stay_bounded(data: bytes, cuts: list[int],
                                                   max_bulk: int) -> None:
    p = RequestParser(max_bulk_len=max_bulk)
    last = 0
    try:
        for cut in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
            p.feed(data[last:cut])
            last = cut
            for cmd in p.commands():
                assert cmd and all(type(a) is bytes for a in cmd)
            # Invariant: unconsumed bytes stay within one pending bulk plus headers.
            assert p.buffered() <= max(max_bulk, MAX_INLINE_SIZE) + 64 + len(data)
    except ProtocolError as exc:
        assert str(exc).startswith("Protocol error: ")


@settings(max_examples=300, deadline=None)
@given(prefix=st.lists(args_st, max_size=3), junk=st.binary(min_size=1, max_size=200),
       cuts=st.lists(st.integers(0, 1000), max_size=5))
def test_valid_commands_before_garbage_are_still_delivered(prefix: list[list[bytes]],
                                                           junk: bytes,
                                                           cuts: list[int]) -> None:
    data = b"".join(encode(c) for c in prefix)
    p = RequestParser(max_bulk_len=100)
    got: list[list[bytes]] = []
    stream = data + b"*" + junk
    last = 0
    try:
        for cut in sorted({c % (len(stream) + 1) for c in cuts}) + [len(stream)]:
            p.feed(stream[last:cut])
            last = cut
            got += p.commands()
    except ProtocolError:
        pass
    assert got[: len(prefix)] == [c for c in prefix]


def test_nul_byte_in_inline_request_is_an_ordinary_character() -> None:
    # Found by the hostile-client test: NUL ended a token without consuming it (a hang).
    assert split_args(b"a\x00b c") == [b"a\x00b", b"c"]


@settings(max_examples=500, deadline=None)
@given(line=st.binary(max_size=200))
def test_split_args_terminates_on_any_line(line: bytes) -> None:
    out = split_args(line)
    assert out is None or all(type(a) is bytes for a in out)
