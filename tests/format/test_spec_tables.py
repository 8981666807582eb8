"""The normative format spec (docs/format/*.md) and the code constants say the same thing.

Story: redb's ``header.rs`` and ``design.md`` described one layout twice and drifted
apart; so did buntdb's README and its writer. Here every field table
``| Field | Offset | Size | Type | Meaning |`` in docs/format is parsed and compared with
the ``struct.Struct`` (or NumPy dtype) in ``tuffdb._format`` that reads and writes it,
field by field: offset, size, type and, where a ``*_OFFSET`` constant exists, its value.
Value tables (frame kinds, file kinds), the magic bytes, flag bits and the size limits
stated in the tables are checked against their enums and constants too.

A new field table must be bound to its codec in ``BINDINGS`` below, or
``test_every_field_table_is_bound_to_a_codec`` fails: an unchecked table is how drift starts.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import numpy as np
import pytest

from tuffdb import _format
from tuffdb._format import cluster as cluster_format
from tuffdb._format import kv as kv_format
from tuffdb._format import record as record_format
from tuffdb._format import resp as resp_format
from tuffdb._format import segment as segment_format

DOCS = Path(__file__).resolve().parents[2] / "docs" / "format"
TYPE_SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}
STRUCT_TYPES = {"B": "u8", "H": "u16", "I": "u32", "Q": "u64"}
NUMPY_TYPES = {"<u1": "u8", "<u2": "u16", "<u4": "u32", "<u8": "u64", "|u1": "u8"}


class Row(NamedTuple):
    field: str
    offset: int | None  # None when the doc gives a formula ("length", "rest")
    size: int | None
    type: str
    cells: dict[str, str]


class Table(NamedTuple):
    doc: str
    line: int
    columns: list[str]
    rows: list[Row]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(r.field for r in self.rows)


def _cell_int(text: str) -> int | None:
    text = text.strip().strip("`").replace(",", "")
    return int(text, 0) if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", text) else None


def _tables(doc: Path) -> list[tuple[int, list[str], list[list[str]]]]:
    """Every markdown table in ``doc``: (line number, header cells, body rows)."""
    out = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        rule = i + 1 < len(lines) and re.match(r"^\|[\s|:-]+\|$", lines[i + 1])
        if lines[i].startswith("|") and rule:
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            body = []
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                body.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            out.append((i + 1, header, body))
            i = j
        else:
            i += 1
    return out


def field_tables() -> list[Table]:
    tables = []
    for doc in sorted(DOCS.glob("*.md")):
        for line, header, body in _tables(doc):
            cols = [h.lower() for h in header]
            if cols[:3] != ["field", "offset", "size"]:
                continue
            rows = []
            for cells in body:
                named = dict(zip(cols, cells, strict=False))
                rows.append(Row(named["field"].strip("`"), _cell_int(named["offset"]),
                                _cell_int(named["size"]), named.get("type", "").strip("`"), named))
            tables.append(Table(doc.name, line, cols, rows))
    return tables


class Binding(NamedTuple):
    """Which codec a field table describes."""

    fields: tuple[str, ...]  # the table's field names, in order (identifies the table)
    layout: struct.Struct | list[tuple[str, str]]  # struct, or a NumPy dtype spec
    size: int  # the size constant the code uses for the whole header/entry
    offsets_from: ModuleType | None = None  # module holding FIELD_OFFSET constants


BINDINGS: dict[str, list[Binding]] = {
    "cluster.md": [
        Binding(("sequence", "gen", "lsn", "crc"), cluster_format.ACKED_SLOT,
                cluster_format.ACKED_SLOT_SIZE, cluster_format),
    ],
    "record.md": [
        Binding(("crc", "length", "kind", "flags", "payload"), record_format.FRAME,
                record_format.FRAME_SIZE, record_format),
    ],
    "segment.md": [
        Binding(("magic", "file_kind", "flags", "reserved", "base_address", "created_ms",
                 "key_id", "header_crc"), segment_format.SEGMENT_HEADER,
                segment_format.SEGMENT_HEADER_SIZE, segment_format),
    ],
    "kv.md": [
        Binding(("op", "klen", "vlen", "expiry_ms"), kv_format.RECORD_TTL,
                kv_format.RECORD_TTL_SIZE),
        Binding(("offset", "size", "raw"), kv_format.BLOCK_INDEX_DTYPE,
                kv_format.BLOCK_INDEX_ENTRY_SIZE),
        Binding(("footer_offset", "magic", "trailer_crc"), kv_format.TRAILER,
                kv_format.TRAILER_SIZE),
        Binding(("n", "n_ttl"), kv_format.HINT_HEAD, kv_format.HINT_HEAD.size),
    ],
    "resp.md": [
        Binding(("tag", "id", "size"), resp_format.META, resp_format.META_SIZE, resp_format),
        Binding(("tag", "id", "size", "head", "tail"), resp_format.LIST_META,
                resp_format.LIST_META_SIZE, resp_format),
        Binding(("tag", "id", "length", "last_ms", "last_seq", "maxdel_ms", "maxdel_seq",
                 "entries_added"), resp_format.STREAM_META, resp_format.STREAM_META_SIZE,
                resp_format),
    ],
}
# The RESP layout is the one big-endian layout (its integers sort bytewise in keys).
BIG_ENDIAN_DOCS = {"resp.md"}
# Field tables of other faces' formats, checked by their own tests (not KV storage).
UNBOUND_OK = {"events-log.md", "events-index.md"}


def _layout(layout: struct.Struct | list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """(offset, size, type) per field of a little-endian struct or a NumPy dtype."""
    if isinstance(layout, struct.Struct):
        assert layout.format[0] in "<>", "on-disk structs have an explicit byte order, unpadded"
        out = []
        offset = 0
        for count, code in re.findall(r"(\d*)([a-zA-Z])", layout.format[1:]):
            size = struct.calcsize("<" + (count or "1") + code)
            out.append((offset, size, "bytes" if code == "s" else STRUCT_TYPES[code]))
            offset += size
        return out
    dtype = np.dtype(layout)
    return [(dtype.fields[name][1], dtype.fields[name][0].itemsize,
             NUMPY_TYPES[dtype.fields[name][0].str]) for name in dtype.names]


def _binding_for(table: Table) -> Binding | None:
    for binding in BINDINGS.get(table.doc, []):
        if binding.fields == table.fields:
            return binding
    return None


TABLES = field_tables()


def test_the_spec_has_field_tables_for_every_storage_file() -> None:
    docs = {t.doc for t in TABLES}
    assert {"record.md", "segment.md", "kv.md"} <= docs


def test_every_field_table_is_bound_to_a_codec() -> None:
    unbound = [f"{t.doc}:{t.line} {t.fields}" for t in TABLES
               if t.doc not in UNBOUND_OK and _binding_for(t) is None]
    assert unbound == [], "bind these tables in BINDINGS (or fix their field names)"
    bound = {(doc, b.fields) for doc, bs in BINDINGS.items() for b in bs}
    present = {(t.doc, t.fields) for t in TABLES}
    assert bound <= present, f"tables gone from the docs: {bound - present}"


@pytest.mark.parametrize("table", [t for t in TABLES if t.doc not in UNBOUND_OK],
                         ids=lambda t: f"{t.doc}:{t.line}")
def test_field_table_matches_the_codec(table: Table) -> None:
    binding = _binding_for(table)
    assert binding is not None
    if isinstance(binding.layout, struct.Struct):
        expected = ">" if table.doc in BIG_ENDIAN_DOCS else "<"
        assert binding.layout.format[0] == expected, f"{table.doc}: byte order"
    layout = _layout(binding.layout)
    fixed = [r for r in table.rows if r.size is not None]
    assert len(fixed) == len(layout), f"doc: {len(fixed)} fixed-size fields, code: {len(layout)}"
    for row, (offset, size, type_) in zip(fixed, layout, strict=True):
        where = f"{table.doc}:{table.line} field {row.field!r}"
        assert row.offset == offset, f"{where}: doc offset {row.offset}, code {offset}"
        assert row.size == size, f"{where}: doc size {row.size}, code {size}"
        if row.type:
            assert row.type == type_, f"{where}: doc type {row.type}, code {type_}"
            if row.type in TYPE_SIZES:
                assert TYPE_SIZES[row.type] == row.size, f"{where}: type and size disagree"
    # Contiguous: each field starts where the previous one ended; the total is the size constant.
    for prev, row in zip(table.rows, table.rows[1:], strict=False):
        if prev.offset is not None and prev.size is not None and row.offset is not None:
            assert row.offset == prev.offset + prev.size, f"{table.doc}: gap before {row.field}"
    assert sum(r.size for r in fixed) == binding.size
    if binding.offsets_from is not None:
        for row in table.rows:
            const = f"{row.field.upper()}_OFFSET"
            if row.offset is not None and hasattr(binding.offsets_from, const):
                assert getattr(binding.offsets_from, const) == row.offset, const
        # A variable-size trailing field (the payload) starts right after the fixed header.
        for row in table.rows:
            if row.size is None and row.offset is not None:
                assert row.offset == binding.size, f"{row.field} starts at {row.offset}"


def test_record_md_offsets_have_named_constants() -> None:
    """STYLE.md §2: offsets are named by chaining constants; every fixed field has one."""
    for module, doc in ((record_format, "record.md"), (segment_format, "segment.md")):
        for table in (t for t in TABLES if t.doc == doc):
            for row in table.rows:
                if row.size is not None:
                    assert hasattr(module, f"{row.field.upper()}_OFFSET"), (doc, row.field)


def _value_table(doc: str, first_column: str) -> dict[str, int]:
    for _, header, body in _tables(DOCS / doc):
        if header[0].lower() == first_column.lower() and header[1].lower() == "value":
            return {cells[0].strip("`"): int(cells[1]) for cells in body}
    pytest.fail(f"no '{first_column} | Value' table in {doc}")


def test_frame_kinds_table_matches_the_kind_enum() -> None:
    table = _value_table("record.md", "Kind")
    assert table
    for name, value in table.items():
        assert record_format.Kind[name] == value, name
    written = {k.name for k in record_format.Kind if k.value != 0}
    assert set(table) == written, "every kind the code writes is in the spec, and only those"


def test_file_kinds_table_matches_the_file_kind_enum() -> None:
    table = _value_table("segment.md", "File kind")
    assert table == {k.name: k.value for k in segment_format.FileKind}


def test_flag_bits_in_the_spec_match_the_flag_enum() -> None:
    text = (DOCS / "record.md").read_text()
    bits = dict(re.findall(r"bit (\d) (\w+)", text))
    assert {name: 1 << int(bit) for bit, name in bits.items()} == {
        f.name: f.value for f in record_format.Flag}


def test_magic_bytes_in_the_spec_match_the_code() -> None:
    text = (DOCS / "segment.md").read_text()
    row = next(r for t in TABLES if t.doc == "segment.md" for r in t.rows if r.field == "magic")
    hex_bytes = re.search(r"`([0-9A-Fa-f ]+)`", row.cells["meaning"])
    assert hex_bytes is not None
    assert bytes.fromhex(hex_bytes.group(1)) == _format.MAGIC_PREFIX
    assert f"format version ({_format.FORMAT_VERSION})" in text


def test_size_limits_in_the_spec_match_the_constants() -> None:
    rows = {r.field: r for t in TABLES if t.doc == "kv.md" for r in t.rows}
    limits = {f: re.search(r"0\.\.([\d,]+)", rows[f].cells["meaning"]) for f in ("klen", "vlen")}
    assert limits["klen"] is not None
    assert limits["vlen"] is not None
    assert int(limits["klen"].group(1).replace(",", "")) == kv_format.MAX_KEY_SIZE == 65_535
    assert int(limits["vlen"].group(1).replace(",", "")) == kv_format.MAX_VALUE_SIZE == 268_435_455
    contract = (DOCS.parents[0] / "design" / "contracts.md").read_text()
    assert "key <= 65,535 bytes, value <= 268,435,455 bytes" in contract


def test_frame_payload_limit_in_the_spec_matches_the_reader() -> None:
    row = next(r for t in TABLES if t.doc == "record.md" for r in t.rows if r.field == "length")
    assert "2^30" in row.cells["meaning"]
    assert record_format.MAX_PAYLOAD_SIZE == 2**30
