"""Contract scenario: search, WebSocket and SSE with the real ekodb-client 0.31.0 (qemu-aarch64).

    python3.11 contract_search_realtime.py BASE_URL API_KEY json|msgpack

Same conventions as contract.py: one line per step, ``CONTRACT OK <n>`` at the end, or
``CONTRACT FAIL <step>: <error>`` and exit 1. Stdlib and ekodb_client only.
"""

import asyncio
import os
import sys
import traceback
import uuid

import ekodb_client
from ekodb_client import Client
from ekodb_client._ekodb_client import SerializationFormat

STEPS = []
WAIT = 60  # a stuck step fails instead of hanging (not a timing assertion)


def step(fn):
    STEPS.append(fn)
    return fn


def val(v):
    return ekodb_client.get_value(v) if hasattr(ekodb_client, "get_value") else v


def vector(values):
    if hasattr(ekodb_client, "field_vector"):
        return ekodb_client.field_vector(values)
    return {"type": "Vector", "value": values}


@step
async def seed(c, s):
    docs = [
        {"title": "Rust databases", "body": "A database written in Rust", "emb": vector([1.0, 0.0])},
        {"title": "Python database", "body": "Python databases and database indexes", "emb": vector([0.0, 1.0])},
        {"title": "Gardening", "body": "Running water for the garden", "emb": vector([0.7, 0.7])},
    ]
    s.ids = [(await c.insert(s.coll, d))["id"] for d in docs]


@step
async def search_full_options(c, s):
    out = await c.search(s.coll, "database", fuzzy=False, fields="title,body",
                         weights="title:2.0,body:1.0", limit=10)
    results = out["results"]
    assert [r["record"]["id"] for r in results] == [s.ids[1], s.ids[0]], out
    assert out["total"] == 2 and "execution_time_ms" in out, out
    assert results[0]["score"] > results[1]["score"] > 0
    assert sorted(results[0]["matched_fields"]) == ["body", "title"], results[0]
    fuzzy = await c.search(s.coll, "pyhton", fuzzy=True, max_edit_distance=2)
    assert [r["record"]["id"] for r in fuzzy["results"]] == [s.ids[1]], fuzzy


@step
async def text_search_helper(c, s):
    rows = await c.text_search(s.coll, "garden", 5)
    assert [r["id"] for r in rows] == [s.ids[2]], rows
    assert rows[0]["_score"] > 0, rows


@step
async def vector_and_hybrid_search(c, s):
    out = await c.search(s.coll, "", vector=[1.0, 0.0], vector_field="emb", vector_k=2)
    assert [r["record"]["id"] for r in out["results"]] == [s.ids[0], s.ids[2]], out
    rows = await c.hybrid_search(s.coll, "garden", [0.0, 1.0], 3)
    assert rows and rows[0]["id"] == s.ids[2], rows


@step
async def websocket_requests_and_subscribe(c, s):
    ws_url = s.base.replace("http://", "ws://")
    ws = await c.websocket(ws_url)
    everything = await ws.find_all(s.coll)
    assert len(everything) == 3, everything
    hits = await ws.ws_text_search(s.coll, "rust")
    assert hits, hits
    sub = await ws.subscribe(s.coll + "_live", "status", "active")
    await c.insert(s.coll + "_live", {"status": "idle", "n": 1})
    rid = (await c.insert(s.coll + "_live", {"status": "active", "n": 2}))["id"]
    await c.delete(s.coll + "_live", rid)
    first = await asyncio.wait_for(sub.recv(), WAIT)
    second = await asyncio.wait_for(sub.recv(), WAIT)
    assert first["event"] == "insert" and first["record_ids"] == [rid], first
    assert second["event"] == "delete" and second["record_ids"] == [rid], second
    await ws.ws_unsubscribe(s.coll + "_live")
    await ws.close()


@step
async def sse_subscribe(c, s):
    sub = await c.subscribe_sse(s.coll + "_sse", "status", "active")
    rid = (await c.insert(s.coll + "_sse", {"status": "active"}))["id"]
    await c.insert(s.coll + "_sse", {"status": "idle"})
    await c.update(s.coll + "_sse", rid, {"note": "x"})
    first = await asyncio.wait_for(sub.recv(), WAIT)
    second = await asyncio.wait_for(sub.recv(), WAIT)
    assert first["event"] == "insert" and first["record_ids"] == [rid], first
    assert second["event"] == "update" and second["record_ids"] == [rid], second


class State:
    pass


async def main(base, key, mode):
    fmt = SerializationFormat.Json if mode == "json" else None
    c = Client.new(base, key, format=fmt) if fmt is not None else Client.new(base, key)
    s = State()
    s.coll = f"search_{mode}_{uuid.uuid4().hex[:8]}"
    s.base = base
    for fn in STEPS:
        try:
            await fn(c, s)
        except Exception as exc:  # report the step and stop
            traceback.print_exc()
            print(f"CONTRACT FAIL {fn.__name__}: {exc!r}", flush=True)
            return 1
        print(f"ok {fn.__name__}", flush=True)
    print(f"CONTRACT OK {len(STEPS)}", flush=True)
    return 0


if __name__ == "__main__":
    rc = asyncio.run(main(*sys.argv[1:4]))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the client library's native threads can still hold
    # Python thread states then, and under qemu that once aborted the process
    # ("PyGILState_Release ... finalizing") after every step had passed.
    os._exit(rc)
