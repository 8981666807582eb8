"""``codec.index_entries`` reads an events frame's entries for the index off the wire format;
its offsets and rows must be the protobuf parser's (``split_entries``, ``types_and_tags``)
for every entry the writer makes and for entries laid out otherwise, and it must refuse
what is not whole entries."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError

from tuffdb.events import Event, EventStore, Query, QueryItem, TrackingInfo
from tuffdb.events import codec
from tuffdb.events import umadb_v1_pb2 as pb


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(key: int, body: bytes) -> bytes:
    """A length-delimited field (one-byte key)."""
    return bytes([key]) + varint(len(body)) + body


def entry(sequenced: bytes) -> bytes:
    return ld(0x0A, sequenced)


def by_parser(joined: bytes) -> tuple[list[int], list[tuple[int, str, list[str]]]]:
    return (codec.split_entries(joined),
            [(p, t, list(tags)) for p, t, tags in codec.types_and_tags(joined)])


def random_entries(rnd: random.Random, n: int) -> bytes:
    out = []
    for i in range(n):
        ev = pb.Event(event_type=rnd.choice(["", "T", "Überweisung", "x" * 200]),
                      tags=[rnd.choice(["a", "b:ç", "t" * 150]) for _ in range(rnd.randrange(4))],
                      data=rnd.randbytes(rnd.choice([0, 5, 300])),
                      uuid=rnd.choice(["", "4b1c7a52-0a41-4c1e-9d43-0d1ef0f0c001"]))
        if rnd.random() < 0.3:
            ev.metadata.add(key="k", value="v" * rnd.randrange(200))
        se = pb.SequencedEvent(position=rnd.choice([i + 1, 2**40 + i]), event=ev)
        if rnd.random() < 0.2:
            se.tracking_info.source = "src"
            se.tracking_info.position = 7
        out.append(entry(se.SerializeToString()))
    return b"".join(out)


def test_the_rows_and_offsets_are_the_parsers_for_random_entries() -> None:
    rnd = random.Random(5)
    for _ in range(300):
        joined = random_entries(rnd, rnd.randrange(1, 12))
        assert codec.index_entries(joined) == by_parser(joined)


def test_entries_laid_out_otherwise_read_as_the_parser_reads_them() -> None:
    event = ld(0x0A, b"T") + ld(0x12, b"a")
    cases = [
        ld(0x12, event) + b"\x08\x05",  # the event before the position
        b"\x08\x05" + ld(0x12, event) + ld(0x12, ld(0x12, b"b") + ld(0x0A, b"U")),  # twice
        b"\x08\x05" + ld(0x12, event + ld(0x32, b"unknown")),  # an unknown event field
        b"\x08\x05" + ld(0x12, event) + b"\x20\x01",  # an unknown varint field
        b"\x08\x05" + ld(0x12, event + b"\x82\x01\x01z"),  # field 16: a two-byte key
        b"\x08\x05" + ld(0x12, event + b"\x18\x01"),  # an event field of another wire type
        b"\x08\x01\x08\x05" + ld(0x12, ld(0x0A, b"A") + event),  # repeated scalars: last wins
        b"",  # an empty entry: position 0, no type, no tags
    ]
    for body in cases:
        joined = entry(body) + entry(b"\x08\x06" + ld(0x12, event))
        assert codec.index_entries(joined) == by_parser(joined), body


def test_long_fields_take_multi_byte_lengths() -> None:
    tag = "t" * 20_000
    se = pb.SequencedEvent(position=3, event=pb.Event(event_type="T" * 300, tags=[tag, "b"]))
    joined = entry(se.SerializeToString()) * 2
    assert codec.index_entries(joined) == by_parser(joined)
    assert codec.index_entries(joined)[1][0] == (3, "T" * 300, [tag, "b"])


@pytest.mark.parametrize("joined", [
    b"\x12\x00",  # not an entry's tag
    entry(b"\x08\x05")[:-1],  # cut inside the entry
    b"\x0a\x85",  # cut inside the entry's length
    entry(b"\x08\x05" + ld(0x12, ld(0x0A, b"T"))[:-1]),  # the event overruns the entry
    entry(b"\x08\x05" + b"\x12\x04" + b"\x0a\x09T"),  # the type overruns the event
    entry(b"\x08\x05" + ld(0x12, ld(0x0A, b"\xff\xfe"))),  # a type that is not UTF-8
    entry(b"\x08\x05" + ld(0x12, ld(0x12, b"\xc3"))),  # a tag that is not UTF-8
    entry(b"\x08"),  # a position without its varint
    entry(b"\x08\x05" + ld(0x12, ld(0x0A, b"T") + ld(0x02, b"z"))),  # an event field 0
    entry(b"\x02\x01z" + b"\x08\x05"),  # an entry field 0
])
def test_what_is_not_whole_entries_is_refused(joined: bytes) -> None:
    with pytest.raises((ValueError, IndexError, DecodeError)):
        codec.index_entries(joined)
    with pytest.raises((ValueError, IndexError, DecodeError)):
        by_parser(joined)  # the parser refuses them too


def test_a_store_rebuilt_from_its_log_reads_as_written(tmp_path: Path) -> None:
    """The recovery path end to end: indexes deleted, rebuilt by scanning the log."""
    path = tmp_path / "ev"
    with EventStore.open(path, segment_bytes=4096) as s:
        for i in range(200):
            s.append([Event(f"T{i % 3}", bytes(i % 7), [f"k{i % 5}", f"u{i}"],
                            metadata={"m": str(i)} if i % 4 == 0 else None)],
                     tracking_info=TrackingInfo("src", i + 1) if i % 9 == 0 else None)
        before = [(e.position, e.event) for e in s.read()]
    for idx in (path / "index").glob("*.idx"):
        idx.unlink()
    with EventStore.open(path) as s:
        assert [(e.position, e.event) for e in s.read()] == before
        assert [e.position for e in s.read(Query([QueryItem([], ["k3"])]))] == [
            p for p, e in before if "k3" in e.tags]
        assert s.check() == []

