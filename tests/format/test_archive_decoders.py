"""The archive's decoders hold what restore reads to its shape, whoever wrote it: a chunk
passes its checksum when someone recomputes it, so a chunk or head that is well formed
JSON but not a well formed archive object (a wrong type, a missing field, a file name
outside its store, parts that do not add up to the data) is refused with CorruptionError
naming it. Before, such a chunk reached restore as a TypeError or KeyError traceback, and
a file name in it could point restore anywhere (tests/unit/test_shipping.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tuffdb.backup.archive import FORMAT, FORMAT_VERSION, Head, decode_chunk, encode_chunk
from tuffdb.errors import CorruptionError

GOOD_ROUND = {"v": 1, "t": 5, "kind": "round", "name": "",
              "parts": [["00000001.log", 0, 3, 3]]}
GOOD_ADDED = {"v": 2, "t": 6, "kind": "added", "name": "00000002.dat", "object": "files/x",
              "size": 10, "crc32c": 7}


def test_well_formed_chunks_decode() -> None:
    changes, data = decode_chunk(encode_chunk("kv", "l", [GOOD_ROUND, GOOD_ADDED], [b"abc"]),
                                 "chunk")
    assert changes == [GOOD_ROUND, GOOD_ADDED] and bytes(data) == b"abc"


@pytest.mark.parametrize("change", [
    "not an object",
    {**GOOD_ROUND, "v": "1"},
    {**GOOD_ROUND, "v": True},
    {**GOOD_ROUND, "t": -1},
    {**GOOD_ROUND, "kind": "exploded"},
    {k: v for k, v in GOOD_ROUND.items() if k != "v"},
    {**GOOD_ROUND, "parts": [["../../etc/x", 0, 3, 3]]},
    {**GOOD_ROUND, "parts": [["/abs", 0, 3, 3]]},
    {**GOOD_ROUND, "parts": [["a.log", 0, 3]]},
    {**GOOD_ROUND, "parts": [["a.log", 0, 5, 3]]},
    {**GOOD_ROUND, "parts": [["a.log", 0, 4, 4]]},  # more than the data holds
    {**GOOD_ADDED, "name": "../victim"},
    {**GOOD_ADDED, "name": ""},
    {**GOOD_ADDED, "size": "10"},
    {k: v for k, v in GOOD_ADDED.items() if k != "object"},
    {**GOOD_ADDED, "kind": "removed", "name": "a/../../b"},
])
def test_malformed_chunks_are_refused_as_damaged(change: Any) -> None:
    blob = encode_chunk("kv", "l", [change], [b"abc"])
    with pytest.raises(CorruptionError, match="chunks/kv/l/1"):
        decode_chunk(blob, "chunks/kv/l/1")


def head(**fields: Any) -> bytes:
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "epoch": 1, "writer": "w",
           "updated_ns": 1, "retention_s": 60.0,
           "bases": [{"object": "bases/1.json", "time_ns": 1}],
           "lines": {"kv/00000001": {"through": 3}}}
    return json.dumps({**doc, **fields}).encode()


def test_a_well_formed_head_decodes() -> None:
    assert Head.decode(head(), "head").bases == [{"object": "bases/1.json", "time_ns": 1}]


@pytest.mark.parametrize("fields", [
    {"epoch": "1"}, {"bases": "x"}, {"bases": [{"time_ns": 1}]},
    {"bases": [{"object": 5, "time_ns": 1}]}, {"lines": {"../kv/1": {"through": 3}}},
    {"lines": {"kv/1": {}}}, {"lines": []}, {"retention_s": "long"},
])
def test_malformed_heads_are_refused_as_damaged(fields: dict[str, Any]) -> None:
    with pytest.raises(CorruptionError, match="tuffdb-archive.json"):
        Head.decode(head(**fields), "tuffdb-archive.json")


def manifest(**store: Any) -> bytes:
    from tuffdb.backup.manifest import FileEntry, Manifest, StoreEntry  # noqa: PLC0415

    files = [FileEntry("00000001.dat", 10, 7, "file", "data/kv/00000001.dat")]
    doc = json.loads(Manifest("backup", 1, 2, {"kv": StoreEntry("kv", 0, 3, 4, {}, files)})
                     .encode())
    doc["stores"]["kv"].update(store)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("store", [
    {"kind": "sql"}, {"version": "3"}, {"positions": {"../x.log": 5}},
    {"positions": {"a.log": -1}}, {"positions": []},
    {"files": [{"name": "a", "size": "10", "crc32c": 7, "kind": "file", "object": "o"}]},
    {"files": [{"name": "a", "size": 10, "crc32c": 7, "kind": "pipe", "object": "o"}]},
    {"files": [{"name": "a", "size": 10, "crc32c": 7, "kind": "file", "object": 5}]},
])
def test_malformed_manifests_are_refused_as_damaged(store: dict[str, Any]) -> None:
    from tuffdb.backup.manifest import decode  # noqa: PLC0415

    decode(manifest(), "manifest.json")  # (the unchanged one is fine)
    with pytest.raises(CorruptionError, match="manifest.json"):
        decode(manifest(**store), "manifest.json")
