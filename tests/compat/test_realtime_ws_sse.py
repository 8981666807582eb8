"""WebSocket (/api/ws) and SSE (/api/subscribe/{c}) with real clients against a real server:
Hello/Welcome in JSON and MessagePack, every request type, Success/Error envelopes, and
subscribers that receive exactly the committed mutations, in order, with filters."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
import pytest
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_harness import Client, EkoServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Iterator

WAIT = 30  # seconds before a stuck test fails instead of hanging (not a timing assertion)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EkoServer]:
    with EkoServer(tmp_path_factory.mktemp("ekodb"), durable_operations=True) as s:
        yield s
        assert s.stop() == 0, "".join(s.lines)


@pytest.fixture
def client(server: EkoServer) -> Iterator[Client]:
    c = server.client()
    yield c
    c.close()


class Ws:
    def __init__(self, conn: ClientConnection, fmt: str) -> None:
        self.conn, self.fmt, self.n = conn, fmt, 0
        self.pushes: list[dict[str, Any]] = []

    async def recv(self) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.conn.recv(), WAIT)
        if self.fmt == "msgpack":
            assert isinstance(raw, bytes)
            return msgspec.msgpack.decode(raw)
        assert isinstance(raw, str)
        return json.loads(raw)

    async def call(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        mid = f"msg-{self.n}"
        msg = {"type": kind, "messageId": mid, "payload": payload}
        await self.conn.send(
            msgspec.msgpack.encode(msg) if self.fmt == "msgpack" else json.dumps(msg)
        )
        while True:
            reply = await self.recv()
            if reply["type"] == "MutationNotification":
                self.pushes.append(reply["payload"])
                continue
            assert reply.get("messageId") == mid, reply
            return reply

    async def push(self) -> dict[str, Any]:
        if self.pushes:
            return self.pushes.pop(0)
        reply = await self.recv()
        assert reply["type"] == "MutationNotification", reply
        return reply["payload"]


async def open_ws(server: EkoServer, token: str, formats: list[str]) -> Ws:
    conn = await connect(
        f"ws://127.0.0.1:{server.port}/api/ws",
        additional_headers={"Authorization": f"Bearer {token}"},
    )
    await conn.send(json.dumps({"type": "Hello", "payload": {"formats": formats}}))
    welcome = json.loads(await asyncio.wait_for(conn.recv(), WAIT))
    fmt = "msgpack" if "msgpack" in formats else "json"
    assert welcome == {"type": "Welcome", "payload": {"format": fmt}}
    return Ws(conn, fmt)


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
def test_every_request_type_answers_with_success_or_error(
    server: EkoServer, client: Client, fmt: str
) -> None:
    c = f"ws_ops_{fmt}"

    async def run() -> None:
        ws = await open_ws(
            server, client.token, ["msgpack", "json"] if fmt == "msgpack" else ["json"]
        )
        ok = await ws.call("Insert", {"collection": c, "record": {"name": "ada", "n": 1}})
        assert ok["type"] == "Success"
        rid = ok["payload"]["data"]["id"]
        assert (await ws.call("FindById", {"collection": c, "id": rid}))["payload"]["data"][
            "name"
        ] == {"type": "String", "value": "ada"}
        await ws.call(
            "BatchInsert",
            {"collection": c, "records": [{"name": "bob", "n": 2}, {"name": "cy", "n": 3}]},
        )
        everything = (await ws.call("FindAll", {"collection": c}))["payload"]["data"]
        assert len(everything) == 3
        q = {"type": "Condition", "content": {"field": "n", "operator": "Gte", "value": 2}}
        found = await ws.call(
            "Query", {"collection": c, "filter": q, "sort": [{"field": "n", "ascending": False}]}
        )
        assert [r["n"]["value"] for r in found["payload"]["data"]] == [3, 2]
        upd = await ws.call("Update", {"collection": c, "id": rid, "record": {"name": "ada l."}})
        assert upd["payload"]["data"]["n"]["value"] == 1
        act = await ws.call(
            "UpdateWithAction",
            {"collection": c, "id": rid, "action": "increment", "field": "n", "value": 5},
        )
        assert act["payload"]["data"]["n"]["value"] == 6
        distinct = await ws.call("DistinctValues", {"collection": c, "field": "n"})
        assert distinct["payload"]["data"]["values"] == [2, 3, 6]
        hits = await ws.call(
            "TextSearch", {"collection": c, "query": "bob", "options": {"limit": 5}}
        )
        assert [h["record"]["name"]["value"] for h in hits["payload"]["data"]["results"]] == ["bob"]
        ids = [r["id"] for r in everything if r["id"] != rid]
        await ws.call("BatchUpdate", {"collection": c, "updates": [[ids[0], {"n": 20}]]})
        bd = await ws.call("BatchDelete", {"collection": c, "ids": ids})
        assert sorted(bd["payload"]["data"]["successful"]) == sorted(ids)
        assert (await ws.call("Delete", {"collection": c, "id": rid}))["type"] == "Success"
        missing = await ws.call("FindById", {"collection": c, "id": rid})
        assert missing["type"] == "Error"
        assert missing["code"] == 404
        assert missing["message"]
        assert (
            await ws.call("CreateCollection", {"collection": c + "_new", "schema": {"fields": {}}})
        )["type"] == "Success"
        names = (await ws.call("GetCollections", {}))["payload"]["data"]
        assert c + "_new" in names
        assert (await ws.call("DeleteCollection", {"collection": c + "_new"}))["type"] == "Success"
        bad = await ws.call("Frobnicate", {"collection": c})
        assert bad["type"] == "Error"
        assert bad["code"] == 400
        await ws.conn.close()

    asyncio.run(run())


def test_ws_subscribers_get_exactly_the_committed_mutations_in_order(
    server: EkoServer, client: Client
) -> None:
    c = "ws_watch"

    async def run() -> None:
        everyone = await open_ws(server, client.token, ["json"])
        active = await open_ws(server, client.token, ["msgpack", "json"])
        ack = await everyone.call("Subscribe", {"collection": c})
        assert ack["payload"]["data"]["subscribed"] is True
        assert ack["payload"]["data"]["subscription_id"].startswith("sub_")
        await active.call(
            "Subscribe", {"collection": c, "filter_field": "status", "filter_value": "active"}
        )
        await active.call("Subscribe", {"collection": "other"})  # several per connection
        async with httpx.AsyncClient(base_url=server.base, headers=client.auth) as http:
            await http.post(f"/api/insert/{c}", json={"id": "a", "status": "active"})
            await http.post(f"/api/insert/{c}", json={"id": "b", "status": "idle"})
            await http.put(f"/api/update/{c}/b", json={"status": "active"})
            bad = await http.post(f"/api/insert/{c}", json={"id": "a"})  # duplicate: no event
            assert bad.status_code == 409
            await http.delete(f"/api/delete/{c}/a")
            await http.post("/api/insert/other", json={"id": "o"})
        got = [await everyone.push() for _ in range(4)]
        assert [(e["event"], e["record_ids"]) for e in got] == [
            ("insert", ["a"]),
            ("insert", ["b"]),
            ("update", ["b"]),
            ("delete", ["a"]),
        ]
        assert got[0]["collection"] == c
        assert got[0]["timestamp"]
        assert got[0]["records"][0]["status"] == {"type": "String", "value": "active"}
        filtered = [await active.push() for _ in range(4)]
        assert [(e["collection"], e["event"], e["record_ids"]) for e in filtered] == [
            (c, "insert", ["a"]),
            (c, "update", ["b"]),
            (c, "delete", ["a"]),
            ("other", "insert", ["o"]),
        ]
        off = await everyone.call("Unsubscribe", {"collection": c})
        assert off["payload"]["data"] == {"collection": c, "found": True, "unsubscribed": True}
        await everyone.call("Insert", {"collection": c, "record": {"id": "z"}})
        assert everyone.pushes == []  # the reply came, and no notification before it
        await everyone.conn.close()
        await active.conn.close()

    asyncio.run(run())


async def sse_block(lines: AsyncIterator[str]) -> tuple[str, Any]:
    """The next SSE block of a stream as (event, decoded data); a stream that ends first
    fails the test."""
    event = data = None
    async for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and event is not None:
            return event, data
    raise AssertionError("the stream ended")


def test_sse_streams_mutation_blocks_with_filters(server: EkoServer, client: Client) -> None:
    c = "sse_watch"

    async def run() -> None:
        async with (
            httpx.AsyncClient(base_url=server.base, headers=client.auth, timeout=WAIT) as http,
            http.stream(
                "GET",
                f"/api/subscribe/{c}?filter_field=status&filter_value=active",
                headers={"Accept": "text/event-stream"},
            ) as stream,
        ):
            assert stream.status_code == 200
            assert stream.headers["content-type"] == "text/event-stream"
            lines = stream.aiter_lines()

            def block() -> Awaitable[tuple[str, Any]]:
                return asyncio.wait_for(sse_block(lines), WAIT)

            kind, sub = await block()
            assert kind == "subscribed"
            assert sub["subscription_id"].startswith("sub_")
            async with httpx.AsyncClient(base_url=server.base, headers=client.auth) as writer:
                await writer.post(f"/api/insert/{c}", json={"id": "x", "status": "idle"})
                await writer.post(f"/api/insert/{c}", json={"id": "y", "status": "active"})
                await writer.put(f"/api/update/{c}/x", json={"status": "active"})
                await writer.delete(f"/api/delete/{c}/y")
            got = [await block() for _ in range(3)]
            assert [(k, d["event"], d["record_ids"]) for k, d in got] == [
                ("mutation", "insert", ["y"]),
                ("mutation", "update", ["x"]),
                ("mutation", "delete", ["y"]),
            ]

    asyncio.run(run())


def test_ws_and_sse_need_a_token(server: EkoServer) -> None:
    r = httpx.get(f"{server.base}/api/subscribe/x")
    assert r.status_code == 401

    async def run() -> None:
        with pytest.raises(Exception, match="401"):
            await connect(f"ws://127.0.0.1:{server.port}/api/ws")

    asyncio.run(run())


def test_an_sse_client_that_stops_reading_is_cut_off_with_a_reason(
    server: EkoServer, client: Client
) -> None:
    """Writers keep going while the client reads nothing; once the server's send buffer
    for it passes its bound the stream ends with an error block naming why."""
    import socket  # noqa: PLC0415

    c = "sse_slow"
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        f"GET /api/subscribe/{c} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        f"{client.token}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head = b""
    while b"event: subscribed" not in head:
        head += sock.recv(4096)
    big = "x" * 1000
    for i in range(400):  # 400 events of 100 records: ~45 MB, past kernel buffers + the bound
        rows = [{"data": {"id": f"{i}-{j}", "pad": big}} for j in range(100)]
        assert client.json("POST", f"/api/batch/insert/{c}", {"inserts": rows}).status_code == 200
    sock.settimeout(WAIT)
    tail = b""
    while chunk := sock.recv(1 << 20):
        tail = (tail + chunk)[-4096:]
    sock.close()
    last = tail.decode(errors="replace").strip().split("\n\n")[-1]
    assert last.startswith("event: error")
    assert "stopped reading" in last


def test_schema_changes_are_pushed_to_ws_and_sse(server: EkoServer, client: Client) -> None:
    c = "schema_watch"

    async def run() -> None:
        ws = await open_ws(server, client.token, ["json"])
        await ws.call("Subscribe", {"collection": c})
        async with (
            httpx.AsyncClient(base_url=server.base, headers=client.auth, timeout=WAIT) as http,
            http.stream("GET", f"/api/subscribe/{c}") as stream,
        ):
            lines = stream.aiter_lines()
            assert (await asyncio.wait_for(sse_block(lines), WAIT))[0] == "subscribed"
            schema = {"fields": {"name": {"field_type": "String"}}}
            assert (await http.post(f"/api/collections/{c}", json=schema)).status_code == 200
            reply = await ws.recv()
            assert reply["type"] == "SchemaChanged"
            changed = {"collection": c, "version": 1, "primary_key_alias": "id"}
            assert reply["payload"] == changed
            assert await asyncio.wait_for(sse_block(lines), WAIT) == ("schema_changed", changed)
        await ws.conn.close()

    asyncio.run(run())
