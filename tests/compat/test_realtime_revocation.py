"""A live WebSocket session or SSE stream is held to what a request of its key would be
allowed, at every message and every pushed mutation: once the key is revoked, its
sessions are answered 401 and closed and its streams end with a 401 error block before
the next mutation reaches them; once the key may no longer read a collection, its
subscriptions to it end with 403, and once a field is hidden from it, pushed records
leave the field out. Before, a session kept the key and the permissions it had when it
connected for as long as it stayed open: a revoked key went on reading every mutation."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_harness import Client, EkoServer
from test_realtime_ws_sse import WAIT, client, open_ws, server, sse_block  # noqa: F401 (fixtures)



@pytest.fixture
def admin(client: Client) -> Client:
    return client


def new_key(admin: Client, collection: str) -> str:
    r = admin.json("POST", "/api/auth/register", {"label": "live", "collection_permissions": {
        collection: {"read": True, "write": True}}})
    assert r.status_code == 200, r.text
    return str(r.json()["key"])


def insert(admin: Client, collection: str, record: dict[str, Any]) -> None:
    assert admin.json("POST", f"/api/insert/{collection}", record).status_code == 200


def test_a_revoked_key_loses_its_live_ws_session_and_sse_stream(
        server: EkoServer, admin: Client) -> None:
    c = "live_revoked"
    key = new_key(admin, c)
    user = server.client(key)

    async def run() -> None:
        ws = await open_ws(server, user.token, ["json"])
        assert (await ws.call("Subscribe", {"collection": c}))["type"] == "Success"
        async with (
            httpx.AsyncClient(base_url=server.base, headers=user.auth, timeout=WAIT) as http,
            http.stream("GET", f"/api/subscribe/{c}") as stream,
        ):
            lines = stream.aiter_lines()
            assert (await asyncio.wait_for(sse_block(lines), WAIT))[0] == "subscribed"
            insert(admin, c, {"id": "before", "n": 1})
            assert (await ws.push())["record_ids"] == ["before"]
            kind, block = await asyncio.wait_for(sse_block(lines), WAIT)
            assert (kind, block["record_ids"]) == ("mutation", ["before"])

            assert admin.json("DELETE", f"/api/auth/keys/{key}").status_code == 200
            insert(admin, c, {"id": "after", "n": 2})
            kind, block = await asyncio.wait_for(sse_block(lines), WAIT)
            assert (kind, block.get("code")) == ("error", 401), (kind, block)
            reply = await ws.recv()
            assert (reply["type"], reply["code"]) == ("Error", 401), reply
            with pytest.raises(ConnectionClosed):
                await ws.call("FindAll", {"collection": c})

    asyncio.run(run())
    user.close()


def test_a_key_that_may_no_longer_read_loses_its_subscriptions_and_hidden_fields(
        server: EkoServer, admin: Client) -> None:
    c = "live_narrowed"
    key = new_key(admin, c)
    user = server.client(key)

    def permit(**perm: Any) -> None:
        r = admin.json("PUT", "/api/auth/permissions", {"api_key": key, "collection": c, **perm})
        assert r.status_code == 200, r.text

    async def run() -> None:
        ws = await open_ws(server, user.token, ["json"])
        assert (await ws.call("Subscribe", {"collection": c}))["type"] == "Success"
        insert(admin, c, {"id": "one", "n": 1, "secret": "s1"})
        first = await ws.push()
        assert first["records"][0]["secret"]["value"] == "s1"

        permit(read=True, write=True, exclude_fields=["secret"])
        insert(admin, c, {"id": "two", "n": 2, "secret": "s2"})
        second = await ws.push()
        assert second["record_ids"] == ["two"] and "secret" not in second["records"][0]

        permit(read=False, write=True)
        insert(admin, c, {"id": "three", "n": 3, "secret": "s3"})
        reply = await ws.recv()
        assert (reply["type"], reply["code"]) == ("Error", 403), reply
        assert "three" not in json.dumps(reply)
        # the session itself goes on (the key is valid): a read is refused, a write is not
        assert (await ws.call("FindAll", {"collection": c}))["code"] == 403
        ok = await ws.call("Insert", {"collection": c, "record": {"n": 4}})
        assert ok["type"] == "Success", ok

    asyncio.run(run())
    user.close()
