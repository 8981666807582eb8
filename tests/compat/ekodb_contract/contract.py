"""Contract scenario for the real ekodb-client 0.31.0 wheel (runs under qemu-aarch64).

    python3.11 contract.py BASE_URL API_KEY json|msgpack

Runs every step against our server, asserting on what the *client* returns; prints one
line per step and ``CONTRACT OK <n>`` at the end, or ``CONTRACT FAIL <step>: <error>`` and
exits 1. Kept free of anything but the stdlib and ekodb_client.
"""

import asyncio
import os
import sys
import traceback
import uuid
from decimal import Decimal

import ekodb_client
from ekodb_client import Client, QueryBuilder
from ekodb_client._ekodb_client import SerializationFormat

STEPS = []


def step(fn):
    STEPS.append(fn)
    return fn


def val(v):
    """Unwrap a typed envelope the way applications do (ekodb_client.get_value)."""
    return ekodb_client.get_value(v) if hasattr(ekodb_client, "get_value") else v


@step
async def health(c, s):
    h = await c.health()
    assert h is True or (isinstance(h, dict) and h.get("status") == "ok"), h


@step
async def insert_and_find_by_id(c, s):
    r = await c.insert(s.coll, {"name": "Ada", "age": 36, "tags": ["a"], "uid": s.u, "price": Decimal("9.99")})
    s.id = r["id"]
    got = await c.find_by_id(s.coll, s.id)
    assert got["id"] == s.id and val(got["name"]) == "Ada" and val(got["age"]) == 36, got


@step
async def find_with_query_builder(c, s):
    await c.insert(s.coll, {"name": "Bob", "age": 20})
    q = QueryBuilder().gte("age", 30).sort_desc("age").limit(10).build()
    rows = await c.find(s.coll, q)
    assert [r["id"] for r in rows] == [s.id], rows
    rows = await c.find(s.coll, QueryBuilder().in_array("name", ["Ada", "Bob"]).build())
    assert len(rows) == 2
    assert len(await c.find_all(s.coll, 100)) == 2


@step
async def update_merges(c, s):
    got = await c.update(s.coll, s.id, {"age": 37})
    assert val(got["age"]) == 37 and val(got["name"]) == "Ada", got


@step
async def actions(c, s):
    got = await c.update_with_action(s.coll, s.id, "increment", "age", 3)
    assert val(got["age"]) == 40, got
    got = await c.update_with_action_sequence(s.coll, s.id, [("push", "tags", "b"), ("decrement", "age", 1)])
    assert val(got["tags"]) == ["a", "b"] and val(got["age"]) == 39, got


@step
async def exists_count_upsert(c, s):
    assert await c.exists(s.coll, s.id) is True
    assert await c.exists(s.coll, "no-such-id") is False
    assert await c.count_documents(s.coll) == 2
    await c.upsert(s.coll, "fixed-id", {"name": "Cy"})
    await c.upsert(s.coll, "fixed-id", {"age": 5})
    got = await c.find_by_id(s.coll, "fixed-id")
    assert val(got["name"]) == "Cy" and val(got["age"]) == 5, got


@step
async def batch(c, s):
    ids = [r["id"] for r in await c.batch_insert(s.coll + "_b", [{"n": i} for i in range(3)])]
    assert len(ids) == 3
    await c.batch_update(s.coll + "_b", [(ids[0], {"n": 10})])
    assert val((await c.find_by_id(s.coll + "_b", ids[0]))["n"]) == 10
    deleted = await c.batch_delete(s.coll + "_b", ids)
    assert deleted == 3 or (isinstance(deleted, dict) and len(deleted.get("successful", [])) == 3), deleted


@step
async def projections_and_paging(c, s):
    got = await c.find_by_id_with_projection(s.coll, s.id, select_fields=["name"])
    assert set(got) == {"id", "name"}, got
    got = await c.find_by_id_with_projection(s.coll, s.id, exclude_fields=["tags", "age"])
    assert "tags" not in got and "name" in got, got
    page1 = await c.paginate(s.coll, 1, 1)
    page2 = await c.paginate(s.coll, 2, 1)
    assert len(page1) == 1 and len(page2) == 1 and page1[0]["id"] != page2[0]["id"]
    one = await c.find_one(s.coll, "name", "Bob")
    assert one is not None and val(one["name"]) == "Bob", one


@step
async def schema_builder_and_constraints(c, s):
    from ekodb_client import FieldTypeSchemaBuilder, SchemaBuilder

    schema = (SchemaBuilder()
              .add_field("title", FieldTypeSchemaBuilder("String").required().text_index())
              .add_field("n", FieldTypeSchemaBuilder("Integer").range(0, 100).btree_index())
              .add_field("emb", FieldTypeSchemaBuilder("Vector").vector_index(dimension=3))
              .add_field("code", FieldTypeSchemaBuilder("string").unique().hash_index())
              .build())
    name = s.coll + "_sb"
    await c.create_collection(name, schema)
    info = await c.get_collection(name)
    assert "title" in str(info), info
    await c.insert(name, {"title": "x", "n": 5, "code": "a"})
    for bad in ({"n": 5}, {"title": "y", "n": 500}, {"title": "z", "code": "a"}):
        try:
            await c.insert(name, bad)
        except RuntimeError:
            continue
        raise AssertionError(f"accepted {bad}")
    await c.update_schema_constraints(name, {"title": {"required": False}})
    await c.insert(name, {"n": 6})
    rows = await c.find(name, QueryBuilder().gt("n", 5).build())
    assert len(rows) == 1, rows


@step
async def kv_batches(c, s):
    k1, k2 = s.coll + ":b1", s.coll + ":b2"
    out = await c.kv_batch_set([{"key": k1, "value": {"a": 1}, "ttl": 60}, {"key": k2, "value": {"b": 2}}])
    assert len(out) == 2, out
    got = await c.kv_batch_get([k1, k2])
    assert len(got) == 2, got
    assert await c.kv_exists(k1) is True
    await c.kv_batch_delete([k1, k2])
    assert await c.kv_exists(k1) is False


@step
async def admin_keys_and_permissions(c, s):
    from ekodb_client.admin import AdminClient

    admin = AdminClient(s.base, s.key)
    created = await admin.create_api_key({"label": "ro", "description": "contract",
                                          "is_admin": False,
                                          "collection_permissions": {s.coll: ["read"]}})
    ro_key = created["key"]
    keys = await admin.list_api_keys()
    assert any(k["key"] == ro_key for k in keys), keys
    ro = Client.new(s.base, ro_key, format=s.fmt) if s.fmt is not None else Client.new(s.base, ro_key)
    assert len(await ro.find_all(s.coll, 10)) >= 1
    try:
        await ro.insert(s.coll, {"name": "nope"})
    except RuntimeError as exc:
        assert "403" in str(exc) or "ermission" in str(exc) or "may not" in str(exc), exc
    else:
        raise AssertionError("a read-only key wrote")
    await admin.update_api_key_collection_permissions({"api_key": ro_key, "collection": s.coll,
                                                       "read": True, "write": False,
                                                       "exclude_fields": ["age"]})
    row = await ro.find_by_id(s.coll, s.id)
    assert "age" not in row and "name" in row, row
    await admin.revoke_api_key(ro_key)
    assert not any(k["key"] == ro_key for k in await admin.list_api_keys())


@step
async def delete(c, s):
    await c.delete(s.coll, "fixed-id")
    assert await c.exists(s.coll, "fixed-id") is False


@step
async def trash_restore(c, s):
    rid = (await c.insert(s.coll + "_trash", {"n": 1}))["id"]
    await c.delete(s.coll + "_trash", rid)
    assert await c.exists(s.coll + "_trash", rid) is False
    assert await c.restore_deleted(s.coll + "_trash", rid) is True
    assert await c.exists(s.coll + "_trash", rid) is True


@step
async def kv(c, s):
    await c.kv_set(s.coll + ":k1", {"x": 1}, ttl="30m")
    got = await c.kv_get(s.coll + ":k1")
    assert got is not None and "1" in str(got), got
    assert await c.kv_get(s.coll + ":missing") is None
    found = await c.kv_find(pattern="^" + s.coll + ":.*")
    assert len(found) == 1, found
    await c.kv_delete(s.coll + ":k1")
    assert await c.kv_get(s.coll + ":k1") is None


@step
async def collections(c, s):
    await c.create_collection(s.coll + "_s", {"fields": {"email": {"field_type": "String", "required": True}}})
    assert await c.collection_exists(s.coll + "_s")
    names = await c.list_collections()
    assert s.coll in names, names
    schema = await c.get_schema(s.coll + "_s")
    assert "email" in str(schema), schema
    try:
        await c.insert(s.coll + "_s", {"other": 1})
    except RuntimeError:
        pass
    else:
        raise AssertionError("a schema violation was accepted")
    await c.delete_collection(s.coll + "_s")


@step
async def distinct(c, s):
    got = await c.distinct_values(s.coll, "name")
    assert "Ada" in str(got) and "Bob" in str(got), got


@step
async def transactions(c, s):
    tx = await c.begin_transaction("Serializable")
    await c.insert(s.coll + "_t", {"n": 1}, transaction_id=tx)
    assert await c.find_all(s.coll + "_t", 10) == [] if await c.collection_exists(s.coll + "_t") else True
    rows = await c.find(s.coll + "_t", None, transaction_id=tx)
    assert len(rows) == 1, rows
    await c.create_savepoint(tx, "sp1")
    await c.insert(s.coll + "_t", {"n": 2}, transaction_id=tx)
    await c.rollback_to_savepoint(tx, "sp1")
    await c.release_savepoint(tx, "sp1")
    status = await c.get_transaction_status(tx)
    assert "Active" in str(status), status
    await c.commit_transaction(tx)
    assert len(await c.find_all(s.coll + "_t", 10)) == 1
    tx2 = await c.begin_transaction()
    await c.insert(s.coll + "_t", {"n": 3}, transaction_id=tx2)
    await c.rollback_transaction(tx2)
    assert len(await c.find_all(s.coll + "_t", 10)) == 1


@step
async def conflict_409(c, s):
    rid = (await c.insert(s.coll + "_c", {"bal": 10}))["id"]
    t1, t2 = await c.begin_transaction(), await c.begin_transaction()
    await c.update(s.coll + "_c", rid, {"bal": 1}, transaction_id=t1)
    await c.update(s.coll + "_c", rid, {"bal": 2}, transaction_id=t2)
    await c.commit_transaction(t1)
    try:
        await c.commit_transaction(t2)
    except RuntimeError as exc:
        assert "409" in str(exc) or "onflict" in str(exc), exc
    else:
        raise AssertionError("the losing commit succeeded")


@step
async def not_found_is_an_error(c, s):
    try:
        await c.find_by_id(s.coll, "no-such-id")
    except RuntimeError as exc:
        assert "not found" in str(exc).lower(), exc
    else:
        raise AssertionError("missing record returned")


class State:
    pass


async def main(base, key, mode):
    fmt = SerializationFormat.Json if mode == "json" else None
    c = Client.new(base, key, format=fmt) if fmt is not None else Client.new(base, key)
    s = State()
    s.coll = f"contract_{mode}_{uuid.uuid4().hex[:8]}"
    s.u = uuid.uuid4()
    s.base, s.key, s.fmt = base, key, fmt
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
