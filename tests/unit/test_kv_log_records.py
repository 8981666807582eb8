"""A hot segment's pending records framed for the log: the three framings (headers packed
one by one, built as arrays from ``MANY_RECORDS`` records on, the general loop for runs
with deletes or TTLs) give the same bytes, which parse back to the same records."""

from __future__ import annotations

import pytest

from tuffdb.kv.records import MANY_RECORDS, OP_DELETE, OP_PUT, encode_pending, iter_records


@pytest.mark.parametrize("n", [1, 2, MANY_RECORDS - 1, MANY_RECORDS, MANY_RECORDS + 5])
def test_every_framing_of_plain_puts_gives_the_same_records(n: int) -> None:
    keys = [b"k%d" % i for i in range(n)]
    values = [b"v" * (i % 7) for i in range(n)]
    pairs: list[object] = [x for kv in zip(keys, values, strict=True) for x in kv]
    fast = encode_pending(pairs, mixed=False)
    assert fast == encode_pending(pairs, mixed=True)  # the general loop, same bytes
    assert [(r.op, r.key, r.value) for r in iter_records(fast)] == [
        (OP_PUT, k, v) for k, v in zip(keys, values, strict=True)]


def test_a_mixed_run_frames_deletes_and_puts_in_order() -> None:
    pairs: list[object] = [b"a", b"1", b"b", None, b"a", None, b"c", b"3"]
    got = [(r.op, r.key, r.value) for r in iter_records(encode_pending(pairs, mixed=True))]
    assert got == [(OP_PUT, b"a", b"1"), (OP_DELETE, b"b", b""), (OP_DELETE, b"a", b""),
                   (OP_PUT, b"c", b"3")]
