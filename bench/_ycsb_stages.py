"""Per-call cost of each stage of the ekoDB face's by-id read and update, in process (not a
benchmark: see bench/ycsb.py; this shows where a request's time goes).

    python bench/ycsb.py stages              # keys uniform over 1,000 records
    python bench/ycsb.py stages --keys 100000

Opens the real face (``ekodb_http.create``, cache tier: ``durable_operations`` off) in a
fresh directory, loads 100,000 YCSB records, then times, per call, each layer a YCSB
update or read goes through: the KV store, the record codec, ``Collection.update``, the
reply's wire form and JSON, the reply cache, ``App.handle`` and ``HttpProtocol`` fed
byte-exact requests (no sockets). Two rounds; the first warms up.
"""

# Profiling support, not library code.
# ruff: noqa: INP001, CPY001, T201, E501
from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ycsb_work import key  # noqa: E402
from _ycsb_profile import Transport, open_face, request_bytes  # noqa: E402

from tuffdb.documents import codec  # noqa: E402
from tuffdb.documents.wire import record_to_wire  # noqa: E402
from tuffdb.server.ekodb import server as ekodb_http  # noqa: E402
from tuffdb.server.ekodb import wire as ew  # noqa: E402
from tuffdb.server.ekodb.proto import HttpProtocol, Request  # noqa: E402

CALLS = 50_000


def timed(label: str, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> None:
    t0 = time.perf_counter()
    for a in calls:
        fn(*a)
    print(f"  {label:34s} {(time.perf_counter() - t0) / len(calls) * 1e6:6.2f} us")


async def run(spread: int) -> None:
    face, d = await open_face("cache", "profile-ycsb-stages-")
    try:
        coll = face.db.collection("usertable")
        app, kv = face.app, face.db.kv
        api_key = (d / ekodb_http.ADMIN_KEY_FILE).read_text().strip()
        login = app.handle(Request("POST", b"/api/auth/token", {"content-type": "application/json"},
                                   json.dumps({"api_key": api_key}).encode()))
        token = json.loads(login.body)["token"]  # type: ignore[union-attr]
        rng = random.Random(1)
        ids = [key(rng.randrange(spread)) for _ in range(CALLS)]
        value = "u" * 100
        body = json.dumps({"field3": value}).encode()
        headers = {"host": "127.0.0.1", "authorization": f"Bearer {token}",
                   "content-type": "application/json", "content-length": str(len(body))}
        puts = [request_bytes("update", i, token, body) for i in ids]
        gets = [request_bytes("read", i, token) for i in ids]
        proto = HttpProtocol(app.handle)
        proto.connection_made(Transport(lambda _: None, 0))  # type: ignore[arg-type]
        stored = coll.stored(ids[0])
        assert stored is not None
        fields, _, _ = codec.unpack_record(stored)
        wire = record_to_wire(coll.get(ids[0]))
        for rnd in range(2):
            print(f"round {rnd} (keys uniform over {spread:,} records)")
            timed("KVStore.put (other keys, 1.1 KB)", kv.put, [(b"Z" + i.encode(), b"x" * 1100) for i in ids])
            timed("Collection.stored", coll.stored, [(i,) for i in ids])
            timed("codec.unpack_record", codec.unpack_record, [(stored,)] * CALLS)
            timed("codec.pack_record", codec.pack_record, [(fields, None, False)] * CALLS)
            timed("Collection.update", coll.update, [(i, {"field3": value}) for i in ids])
            timed("record_to_wire", record_to_wire, [(coll.get(ids[0]),)] * CALLS)
            timed("JSON of the wire record", ew.encode, [(wire, False)] * CALLS)
            timed("body decode (JSON)", ew.decode_body, [(body, "application/json")] * CALLS)
            timed("ReadCache.put", app.reads.put, [(("usertable", i, True, False), stored, b"y" * 1300) for i in ids])
            timed("App.handle PUT /api/update", app.handle,
                  [(Request("PUT", b"/api/update/usertable/" + i.encode(), headers, body),) for i in ids])
            timed("App.handle GET /api/find", app.handle,
                  [(Request("GET", b"/api/find/usertable/" + i.encode(), headers, b""),) for i in ids])
            timed("HttpProtocol PUT (bytes in, reply out)", proto.data_received, [(x,) for x in puts])
            timed("HttpProtocol GET (bytes in, reply out)", proto.data_received, [(x,) for x in gets])
    finally:
        await face.stop()
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1000, help="records the calls spread over")
    asyncio.run(run(ap.parse_args().keys))


if __name__ == "__main__":
    main()
