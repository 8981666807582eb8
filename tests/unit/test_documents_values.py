"""Typed values: the 16 types survive the storage codec and the ekoDB wire exactly."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuffdb.documents import codec, wire
from tuffdb.documents.values import Number, Vector, order_key, type_name
from tuffdb.errors import ProtocolError

ONE_OF_EACH = {
    "s": "text", "i": -(2**63), "f": 1.5, "b": True, "n": Number(7), "d": decimal.Decimal("9.99"),
    "t": dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.UTC), "u": uuid.uuid4(),
    "dur": dt.timedelta(days=2, seconds=5, microseconds=7), "a": [1, "x", None],
    "set": {1, "two", 3.5}, "v": Vector([0.25, -1.0]), "o": {"k": {"deep": decimal.Decimal("1.10")}},
    "bin": b"\x00\xff", "bytes": bytearray(b"ab"), "null": None,
}  # fmt: skip

scalars = st.one_of(
    st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none(),
    st.floats(allow_nan=False), st.binary(max_size=20), st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.datetimes(timezones=st.just(dt.UTC)), st.timedeltas(),
    st.builds(Number, st.integers(-1000, 1000)),
    st.builds(Vector, st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=5)),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=5), inner, max_size=4),
                            st.frozensets(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)), max_size=4).map(set)),  # noqa: E501
    max_leaves=12,
)  # fmt: skip


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)  # type: ignore[attr-defined]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


def test_every_type_has_its_name() -> None:
    names = {type_name(v) for v in ONE_OF_EACH.values()}
    assert len(names) == 16


def test_one_of_each_round_trips_through_the_store_codec() -> None:
    fields, ttl, touch = codec.unpack_record(codec.pack_record(ONE_OF_EACH, 5.0, True))
    assert _same(fields, ONE_OF_EACH) and ttl == 5.0 and touch is True


def test_one_of_each_round_trips_through_typed_json_envelopes() -> None:
    sent = wire.record_to_wire(ONE_OF_EACH)
    assert sent["d"] == {"type": "Decimal", "value": "9.99"}
    assert sent["dur"] == {"type": "Duration", "value": {"secs": 172805, "nanos": 7000}}
    assert _same(wire.record_from_wire(sent), ONE_OF_EACH)


@given(values)
def test_any_value_round_trips_through_codec_and_wire(value: object) -> None:
    assert _same(codec.unpack(codec.pack(value)), value)
    back = wire.from_wire(wire.envelope(value))
    assert order_key(back) == order_key(value)


def test_plain_json_is_inferred_without_guessing() -> None:
    got = wire.record_from_wire({"u": "3fd1ff3c-aaac-4398-b813-a992ab2c666c", "v": [1.0, 2.0]})
    assert type(got["u"]) is str and type(got["v"]) is list


def test_sixteen_byte_msgpack_bin_is_a_uuid() -> None:
    u = uuid.uuid4()
    assert wire.from_wire(u.bytes) == u


@pytest.mark.parametrize("bad", [
    {"type": "Integer", "value": "x"}, {"type": "DateTime", "value": "yesterday"},
    {"type": "UUID", "value": "nope"}, {"type": "Decimal", "value": "NaN"},
    {"type": "Boolean", "value": 1}, {"type": "Binary", "value": "***"},
])  # fmt: skip
def test_malformed_envelopes_are_protocol_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ProtocolError):
        wire.from_wire(bad)


def test_numbers_of_every_type_compare_equal_but_booleans_do_not() -> None:
    assert order_key(1) == order_key(1.0) == order_key(decimal.Decimal(1)) == order_key(Number(1))
    assert order_key(True) != order_key(1)


def test_unstorable_python_values_are_type_errors() -> None:
    with pytest.raises(TypeError):
        type_name(object())
    with pytest.raises(TypeError):
        type_name(2**64)


@given(st.dictionaries(st.text(max_size=5), values, max_size=6))
def test_plain_scalars_are_exactly_the_values_that_come_back_as_given(record: dict[str, object]) -> None:  # noqa: E501
    # plain_scalars decides whether an update's reply may be cached from its changes: it
    # must never say yes for a value the store would give back as something else.
    plain = codec.plain_scalars(record.values())
    assert plain == all(type(v) in (str, int, float, bool, type(None)) for v in record.values())
    if plain:
        fields, _, _ = codec.unpack_record(codec.pack_record(record))
        assert _same(fields, record)


def test_plain_scalars_refuses_subclasses_and_containers() -> None:
    class Text(str):
        pass

    assert codec.plain_scalars(["x", 1, 2.5, True, None])
    assert codec.plain_scalars([])
    for odd in (Text("x"), b"x", [1], {"a": 1}, decimal.Decimal(1), dt.timedelta(1)):
        assert not codec.plain_scalars(["x", odd])


@pytest.mark.parametrize(("components", "code", "width"), [
    ([0.25, -1.0, 2.0**127, float("inf")], codec.EXT_VECTOR32, 4),  # every one a float32 value
    ([0.1, 1.0], codec.EXT_VECTOR, 8),  # 0.1 is not: float32 would round it
    ([0.25, 0.1], codec.EXT_VECTOR, 8),  # the first is, a later one is not
    ([1e300], codec.EXT_VECTOR, 8),  # beyond float32's range
    ([0.25, 1e300], codec.EXT_VECTOR, 8),
    ([float("nan")], codec.EXT_VECTOR, 8),  # NaN's payload is not promised by float32
])
def test_vectors_are_stored_as_float32_only_when_that_is_exact(
        components: list[float], code: int, width: int) -> None:
    vector = Vector(components)
    stored = codec.to_store(vector)
    assert (stored.code, len(stored.data)) == (code, width * len(components))
    for lazy in (False, True):
        fields, _, _ = codec.unpack_record(codec.pack_record({"v": vector}), lazy_vectors=lazy)
        back = codec.materialise(fields)["v"]
        assert type(back) is Vector
        assert [x.hex() for x in back] == [x.hex() for x in components]  # bit for bit (NaN too)


def test_a_float64_vector_record_reads_back_as_written() -> None:
    """Records stored with code 6 (every vector, before code 10 existed) still read."""
    import msgspec  # noqa: PLC0415 - building an old-style record by hand

    raw = msgspec.msgpack.encode([codec.RECORD_VERSION, {"v": msgspec.msgpack.Ext(
        codec.EXT_VECTOR, b"".join(x.to_bytes(8, "little") for x in (0x3FD0000000000000,
                                                                     0xBFF0000000000000)))},
                                  None, False])
    assert _same(codec.unpack_record(raw)[0], {"v": Vector([0.25, -1.0])})


def test_the_format_spec_lists_every_ext_code_the_codec_writes() -> None:
    from pathlib import Path  # noqa: PLC0415

    spec = (Path(__file__).parents[2] / "docs" / "format" / "documents.md").read_text()
    typed = spec.split("## Typed values", 1)[1]  # the ext table, not the record layout's
    rows = dict(re.findall(r"^\| (\d+) \| ([A-Za-z ]+?) \|", typed, re.MULTILINE))
    names = {"DECIMAL": "Decimal", "DATETIME": "DateTime", "UUID": "UUID", "DURATION": "Duration",
             "SET": "Set", "VECTOR": "Vector", "VECTOR32": "Vector", "BYTES": "Bytes",
             "NUMBER": "Number", "TUPLE": "Array given as a tuple"}
    codes = {name[4:]: value for name, value in vars(codec).items()
             if name.startswith("EXT_") and type(value) is int}
    assert set(codes) == set(names)
    assert {str(value): names[name] for name, value in codes.items()} == rows
