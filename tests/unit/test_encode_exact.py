"""encode_exact: the encoder's own bytes, through a reused per-thread scratch buffer."""

from __future__ import annotations

import threading

import msgspec

from tuffdb.documents import codec

ENCODERS = (msgspec.msgpack.Encoder(), msgspec.json.Encoder())
VALUES = ({"a": 1}, [1, "x" * 5000, None], "y" * (codec.SCRATCH_KEEP_MAX + 10), {}, "")


def test_it_returns_what_encode_returns_and_later_calls_do_not_touch_it() -> None:
    for enc in ENCODERS:
        outs = [codec.encode_exact(enc, v) for v in VALUES]
        assert outs == [enc.encode(v) for v in VALUES]
        assert all(type(o) is bytes for o in outs)


def test_threads_encoding_at_once_each_get_their_own_bytes() -> None:
    enc = msgspec.json.Encoder()
    bad: list[tuple[int, bytes]] = []
    start = threading.Barrier(4)

    def work(n: int) -> None:
        value = {"n": n, "pad": str(n) * (100 + n)}
        want = enc.encode(value)
        start.wait()
        for _ in range(2000):
            got = codec.encode_exact(enc, value)
            if got != want:
                bad.append((n, got))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
