
"""ekoDB data-plane endpoints: CRUD, batch, find, actions, distinct, collections, schemas.

Every handler checks the key's collection permission first, decodes the whole body,
validates, and only then writes; ``?transaction_id=`` routes the operation through that
transaction (staged until commit; reads see its own writes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.documents import schema as schema_mod
from tuffdb.documents.codec import plain_scalars, unpack_record
from tuffdb.documents.collection import Collection, Write, check_name
from tuffdb.documents.joins import join_spec
from tuffdb.documents.wire import from_wire, plain, record_from_wire
from tuffdb.errors import NotFoundError, PermissionDeniedError, ProtocolError
from tuffdb.server.ekodb import wire as ew
from tuffdb.server.ekodb.body import splice
from tuffdb.server.ekodb.proto import Response

if TYPE_CHECKING:
    from tuffdb.security.auth import Permission
    from tuffdb.server.ekodb.app import App, Ctx


def _coll(app: App, c: str) -> Collection:
    try:
        check_name(c)
    except Exception as exc:  # noqa: BLE001 - ProgrammingError -> a 400 with the reason
        raise ProtocolError(str(exc)) from None
    return app.db.collection(c)


def insert(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "write")
    record = record_from_wire(ctx.body())
    app.check_writable(perm, record)
    tx = app.tx(ctx)
    if tx is not None:
        return {"id": tx.insert(c, record)}
    return {"id": _coll(app, c).insert(record)}


def find_by_id(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    perm = app.perm(ctx, c, "read")
    tx = app.tx(ctx)
    record = tx.get(c, rid) if tx is not None else _coll(app, c).load(rid)
    if record is None:
        raise NotFoundError("Record not found")
    from tuffdb.documents.shape import project  # noqa: PLC0415

    p = ctx.params
    record = project(record, ew.field_list(p.get("select_fields")), ew.field_list(p.get("exclude_fields")))  # noqa: E501
    return app.out(record, perm)


def find_by_id_reply(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    """``GET /api/find/{c}/{id}``: find_by_id, with the encoded body reused while the
    record's stored bytes are unchanged (read_cache.py) when nothing else shapes
    it (no query params, no field restriction on the key)."""
    perm = app.perm(ctx, c, "read")
    if ctx.params or (perm is not None and perm.hides_fields):
        return find_by_id(app, ctx, c, rid)
    coll = _coll(app, c)
    data = coll.stored(rid)
    if data is None:
        raise NotFoundError("Record not found")
    mp = ctx.mp_reply
    key = (c, rid, app.settings.use_typed_values, mp)
    body = app.reads.get(key, data)
    if body is None:
        record, stable = coll.decode_stored(rid, data)
        if record is None:
            raise NotFoundError("Record not found")
        body = _by_id_body(app, record, perm, mp)
        if stable:
            app.reads.put(key, data, body)
    return _body_reply(body, mp)


def _spliceable(record: dict[str, Any]) -> dict[str, Any] | None:
    """``record`` if an update may splice its changes into the record's cached body
    (body.py): flat, plain scalars, no TTL field."""
    if "ttl" in record or not plain_scalars(record.values()):
        return None
    return record


def _by_id_body(app: App, record: dict[str, Any], perm: Any, mp: bool) -> bytes:
    """The body of a by-id reply (find and update send the same; the read cache keeps it)."""
    return ew.encode(app.out(record, perm), mp)


def _body_reply(body: bytes, mp: bool) -> Response:
    return Response(200, body, "application/msgpack" if mp else "application/json", [])


def find(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "read")
    body = ctx.body(empty={}) or {}
    if not isinstance(body, dict):
        raise ProtocolError("a find body is an object {filter, sort, limit, skip, ...}")
    opts: dict[str, Any] = {
            "sort": body.get("sort"), "skip": ew.optional_int(body.get("skip"), "skip"),
            "limit": ew.optional_int(body.get("limit"), "limit"),
            "select": ew.field_list(body.get("select_fields")),
            "exclude": ew.field_list(body.get("exclude_fields"))}
    app.check_readable(perm, c, filter=body.get("filter"), sort=body.get("sort"))
    join = body.get("join")
    if join:
        _check_join(app, ctx, c, perm, join)
    tx = app.tx(ctx)
    if tx is not None:
        records = tx.find(c, body.get("filter"), **opts)
    else:
        records = _coll(app, c).find(body.get("filter"), join=join, **opts)
    return [app.out(r, perm) for r in records]


def _check_join(app: App, ctx: Ctx, c: str, perm: Permission | None, join: Any) -> None:
    """A join reads the collections it names: the key must be allowed to read each of
    them whole (their records arrive under the join's field, and no field restriction
    is applied inside it), and to read the fields the join matches on."""
    for raw in join if isinstance(join, list) else [join]:
        colls, local, foreign, _ = join_spec(raw)
        app.check_readable(perm, c, [local])
        for name in colls:
            jperm = app.perm(ctx, name, "read")
            if jperm is not None and jperm.hides_fields:
                raise PermissionDeniedError(
                    f"this API key may read only some fields of collection '{name}', so it "
                    "may not join it (joined records are not narrowed)")
            app.check_readable(jperm, name, [foreign])


def update(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    perm = app.perm(ctx, c, "write")
    changes = record_from_wire(ctx.body())
    app.check_writable(perm, changes)
    tx = app.tx(ctx)
    record = tx.update(c, rid, changes) if tx is not None else _coll(app, c).update(rid, changes)
    return find_by_id_shape(app, ctx, record, perm)


def update_reply(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    """``PUT /api/update/{c}/{id}``: update, with the encoded reply kept in the read cache
    (read_cache.py) when nothing else shapes it (no query params, no field
    restriction on the key): it is what ``GET /api/find/{c}/{id}`` sends for the new
    record, and a Zipfian workload reads what it just wrote."""
    perm = app.perm(ctx, c, "write")
    if ctx.params or (perm is not None and perm.hides_fields):
        return update(app, ctx, c, rid)
    changes = record_from_wire(ctx.body())
    app.check_writable(perm, changes)
    coll = _coll(app, c)
    mp, typed = ctx.mp_reply, app.settings.use_typed_values
    key = (c, rid, typed, mp)
    body = None
    with coll.db.lock:  # the stored bytes read back are this update's
        known = old = None
        cur = coll.stored(rid) if coll.merges_plainly(changes) else None
        if cur is not None and (known := app.reads.entry(key, cur)) is not None:
            # the cached body was made from these bytes: decode them, splice, merge
            fields, ttl, _ = unpack_record(cur)
            old = _spliceable(fields) if ttl is None else None
        as_given = plain_scalars(changes.values())
        if known is not None and old is not None:
            body = splice(known[1], old, changes, typed, mp)
            record, data = coll.update_known(rid, changes, old, plain=as_given)
        else:
            record = coll.update(rid, changes)
            data = coll.stored(rid)
    if body is None:
        body = _by_id_body(app, record, perm, mp)
    # Cached only when the body is a function of the stored bytes alone: no TTL, no
    # schema (it may convert values), and changes whose values decode from the store as
    # given (the rest of the record was decoded from it).
    if data is not None and as_given and coll.schema is None and "ttl" not in record:
        app.reads.put(key, data, body)
    return _body_reply(body, mp)


def find_by_id_shape(app: App, ctx: Ctx, record: dict[str, Any], perm: Any) -> Any:
    from tuffdb.documents.shape import project  # noqa: PLC0415

    p = ctx.params
    record = project(record, ew.field_list(p.get("select_fields")), ew.field_list(p.get("exclude_fields")))  # noqa: E501
    return app.out(record, perm)


def action(app: App, ctx: Ctx, c: str, rid: str, name: str) -> Any:
    perm = app.perm(ctx, c, "write")
    field, value = ew.action_body(ctx.body())
    app.check_writable(perm, {field: None})
    return app.out(_run_actions(app, ctx, c, rid, [(name, field, value)]), perm)


def sequence(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    perm = app.perm(ctx, c, "write")
    body = ctx.body()
    steps = body.get("actions") if isinstance(body, dict) else body
    if not isinstance(steps, list) or not all(isinstance(s, list) and len(s) in (2, 3) for s in steps):  # noqa: E501
        raise ProtocolError("an action sequence is [[action, field, value], ...]")
    parsed = [(s[0], s[1], from_wire(s[2]) if len(s) == 3 else None) for s in steps]
    app.check_writable(perm, {s[1]: None for s in parsed})
    return app.out(_run_actions(app, ctx, c, rid, parsed), perm)


def _run_actions(app: App, ctx: Ctx, c: str, rid: str, steps: list[Any]) -> dict[str, Any]:
    tx = app.tx(ctx)
    if tx is None:
        return _coll(app, c).actions(rid, steps)
    from tuffdb.documents.actions import apply_action  # noqa: PLC0415

    record = tx.get(c, rid)
    if record is None:
        raise NotFoundError("Record not found")
    for name, field, value in steps:
        apply_action(record, name, field, value)
    return tx.update(c, rid, record)


def delete(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    perm = app.perm(ctx, c, "write")
    tx = app.tx(ctx)
    record = tx.delete(c, rid) if tx is not None else _coll(app, c).delete(rid)
    return app.out(record, perm)


def batch_insert(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "write")
    records = [record_from_wire(r) for r in ew.batch_inserts(ctx.body())]
    for r in records:
        app.check_writable(perm, r)
    tx = app.tx(ctx)
    ids = [tx.insert(c, r) for r in records] if tx is not None else _coll(app, c).insert_many(records)  # noqa: E501
    return {"successful": ids, "failed": []}


def batch_update(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "write")
    items = [(rid, record_from_wire(d)) for rid, d in ew.batch_updates(ctx.body())]
    for _, d in items:
        app.check_writable(perm, d)
    tx = app.tx(ctx)
    if tx is not None:
        return {"successful": [tx.update(c, rid, d)["id"] for rid, d in items], "failed": []}
    coll = _coll(app, c)
    with app.db.lock:
        writes = []
        for rid, d in items:
            old = coll.load(rid)
            if old is None:
                raise NotFoundError(f"Record not found: {rid}")
            writes.append(coll.update_write(old, d))
        coll.commit(writes)
    return {"successful": [w.id for w in writes], "failed": []}


def batch_delete(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "write")
    ids = ew.batch_deletes(ctx.body())
    tx = app.tx(ctx)
    if tx is not None:
        return {"successful": [tx.delete(c, rid)["id"] for rid in ids], "failed": []}
    coll = _coll(app, c)
    with app.db.lock:
        found = [rid for rid in ids if coll.load(rid) is not None]
        coll.commit([Write(c, rid, None) for rid in found])
    return {"successful": found, "failed": [rid for rid in ids if rid not in set(found)]}


def restore_record(app: App, ctx: Ctx, c: str, rid: str) -> Any:
    app.perm(ctx, c, "write")
    _coll(app, c).restore(rid)
    return {"status": "success", "restored": True}


def restore_collection(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "write")
    n = _coll(app, c).restore_all()
    return {"status": "success", "restored_count": n, "cleared_count": n}


def distinct(app: App, ctx: Ctx, c: str, field: str) -> Any:
    perm = app.perm(ctx, c, "read")
    body = ctx.body(empty={}) or {}
    flt = body.get("filter") if isinstance(body, dict) else None
    app.check_readable(perm, c, [field], filter=flt)
    found = [plain(v) for v in _coll(app, c).distinct(field, flt)]
    return {"collection": c, "field": field, "values": found, "count": len(found)}


def list_collections(app: App, ctx: Ctx) -> Any:
    names = app.db.collections()
    if ctx.key is not None and not ctx.key.is_admin:
        names = [n for n in names if ctx.key.permission(n) is not None]
    return {"collections": names}


def create_collection(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "write")
    schema = schema_mod.from_wire(ctx.body(empty=None))
    _coll(app, c)
    app.db.create_collection(c, schema)
    return {"status": "success", "collection": c}


def get_collection(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "read")
    if not app.db.has_collection(c):
        raise NotFoundError(f"Collection not found: {c}")
    coll = _coll(app, c)
    schema = coll.schema or schema_mod.Schema()
    return {"collection": schema.to_wire(),
            "analytics": {"record_count": len(coll), "indexes": sorted(coll.index_defs)}}


def delete_collection(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "write")
    return {"status": "success", "collection": c, "deleted_records": app.db.drop_collection(c)}


def get_schema(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "read")
    if not app.db.has_collection(c):
        raise NotFoundError(f"Collection not found: {c}")
    return (_coll(app, c).schema or schema_mod.Schema()).to_wire()


def put_schema(app: App, ctx: Ctx, c: str) -> Any:
    app.perm(ctx, c, "write")
    body = ctx.body()
    coll = _coll(app, c)
    if isinstance(body, dict) and "constraints" in body:
        new = schema_mod.update_constraints(coll.schema or schema_mod.Schema(), body["constraints"])
    elif isinstance(body, dict) and "fields" in body:
        new = schema_mod.from_wire(body)
    else:
        raise ProtocolError("PUT /api/schemas/{c} takes {'constraints': {...}} or a schema")
    coll.set_schema(new)
    return {"status": "success", "collection": c, "version": new.version}


def register(app: App) -> None:
    r = app.route
    r("POST", "/api/insert/{c}", insert, "write")
    r("GET", "/api/find/{c}/{id}", find_by_id_reply, "read")
    r("POST", "/api/find/{c}/{id}", find_by_id_reply, "read")
    r("POST", "/api/find/{c}", find, "read")
    r("PUT", "/api/update/sequence/{c}/{id}", sequence, "write")
    r("PUT", "/api/update/{c}/{id}/action/{a}", action, "write")
    r("PUT", "/api/update/{c}/{id}", update_reply, "write")
    r("DELETE", "/api/delete/{c}/{id}", delete, "write")
    r("POST", "/api/batch/insert/{c}", batch_insert, "write")
    r("PUT", "/api/batch/update/{c}", batch_update, "write")
    r("DELETE", "/api/batch/delete/{c}", batch_delete, "write")
    r("POST", "/api/distinct/{c}/{f}", distinct, "read")
    r("POST", "/api/trash/{c}/{id}", restore_record, "write")
    r("POST", "/api/trash/{c}", restore_collection, "write")
    r("GET", "/api/collections", list_collections, "auth")
    r("POST", "/api/collections/{c}", create_collection, "write")
    r("GET", "/api/collections/{c}", get_collection, "read")
    r("DELETE", "/api/collections/{c}", delete_collection, "write")
    r("GET", "/api/schemas/{c}", get_schema, "read")
    r("PUT", "/api/schemas/{c}", put_schema, "write")
