"""atheris target for the RESP request parser (STYLE.md section 5: one target per decoder).

    pip install atheris && python fuzz/resp_parser.py -max_total_time=60

Without atheris it runs a seeded random-bytes loop instead (``python fuzz/resp_parser.py
--plain 100000``), so the target itself is always runnable. Each input is split into
reads at fuzzer-chosen points; the parser must either return commands made of bytes or
raise ProtocolError with Redis's "Protocol error: " text, and must never buffer more
than one pending bulk plus the bytes fed. The Hypothesis version of these properties
runs in the test suite (tests/unit/test_resp_parser.py).
"""

# ruff: noqa: INP001, CPY001, T201
from __future__ import annotations

import random
import sys

from tuffdb.errors import ProtocolError
from tuffdb.server.resp.parser import MAX_INLINE_SIZE, RequestParser

MAX_BULK = 4096


def one_input(data: bytes) -> None:
    if not data:
        return
    cuts = sorted({b % len(data) for b in data[:4]})
    body = data[4:] if len(data) > 4 else data
    p = RequestParser(max_bulk_len=MAX_BULK)
    last = 0
    try:
        for cut in [*cuts, len(body)]:
            p.feed(body[last:cut])
            last = max(last, cut)
            for cmd in p.commands():
                assert cmd
                assert all(type(a) is bytes for a in cmd)
            assert p.buffered() <= MAX_BULK + MAX_INLINE_SIZE + len(body) + 64
    except ProtocolError as exc:
        assert str(exc).startswith("Protocol error: "), exc


def plain(runs: int) -> None:
    rng = random.Random(0)
    alphabet = b"*$\r\n0123456789-+:abc \"'\\x"
    for _ in range(runs):
        n = rng.randrange(1, 300)
        if rng.random() < 0.5:
            data = bytes(rng.choice(alphabet) for _ in range(n))
        else:
            data = rng.randbytes(n)
        one_input(data)
    print(f"{runs} inputs, no failure")


def main() -> None:
    if "--plain" in sys.argv:
        plain(int(sys.argv[sys.argv.index("--plain") + 1]))
        return
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
