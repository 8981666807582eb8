# ruff: noqa: ARG001 - every route handler takes (app, ctx, *path args)
"""ekoDB endpoints around the data plane: health, auth and keys, config, KV, transactions.

KV entries live in the documents store under ``k\\x00<key>`` as typed values (any JSON
value; envelopes are honoured), with the store's own TTL. ``GET /api/kv/get/{key}``
answers ``{"type": T, "value": v}`` (the recorded real-server shape; the client reads
``value``). ``/api/kv/find`` matches ``pattern`` with RE2's search on the key. KV access
needs an admin key or a permission on the pseudo-collection ``_kv`` (or ``*``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import re2

from tuffdb.documents import codec
from tuffdb.documents.database import KV
from tuffdb.documents.ttl import parse_ttl
from tuffdb.documents.wire import envelope, from_wire, plain
from tuffdb.errors import AuthError, NotFoundError, ProtocolError

if TYPE_CHECKING:
    from tuffdb.server.ekodb.app import App, Ctx


def health(app: App, ctx: Ctx) -> Any:
    from tuffdb.server.ekodb.app import SERVER_VERSION  # noqa: PLC0415

    return {"status": "ok", "integrity_ok": True, "version": SERVER_VERSION, "server": "tuffdb"}


def token(app: App, ctx: Ctx) -> Any:
    body = ctx.body(empty={})
    key = app.keyring.find(body.get("api_key")) if isinstance(body, dict) else None
    if key is None:
        raise AuthError("invalid API key")
    return {"token": app.keyring.issue(key, app.settings.token_expiry_hours)}


def register_key(app: App, ctx: Ctx) -> Any:
    body = ctx.body(empty={})
    if not isinstance(body, dict):
        raise ProtocolError("register takes an object {label, description, is_admin, ...}")
    perms = body.get("collection_permissions") or {}
    if not isinstance(perms, dict):
        raise ProtocolError("collection_permissions must be an object {collection: [...]}")
    key = app.keyring.create(label=body.get("label", ""), description=body.get("description", ""),
                             is_admin=bool(body.get("is_admin")), collection_permissions=perms)
    return key.to_wire()


def list_keys(app: App, ctx: Ctx) -> Any:
    return [k.to_wire() for k in app.keyring.api_keys()]


def revoke_key(app: App, ctx: Ctx, key: str) -> Any:
    app.keyring.revoke(key)
    return {"status": "success", "revoked": True}


def get_permissions(app: App, ctx: Ctx) -> Any:
    assert ctx.key is not None
    return {"is_admin": ctx.key.is_admin,
            "collection_permissions": {c: p.to_wire() for c, p in ctx.key.collection_permissions.items()}}  # noqa: E501


def put_permissions(app: App, ctx: Ctx) -> Any:
    body = ctx.body()
    if not isinstance(body, dict) or not isinstance(body.get("api_key"), str) or not isinstance(body.get("collection"), str):  # noqa: E501
        raise ProtocolError("permissions body needs api_key and collection")
    changes = {k: v for k, v in body.items() if k not in ("api_key", "collection")}
    return app.keyring.set_permission(body["api_key"], body["collection"], changes).to_wire()


def get_config(app: App, ctx: Ctx) -> Any:
    return asdict(app.settings)


def put_config(app: App, ctx: Ctx) -> Any:
    app.settings.update(ctx.body())
    app.save_settings()
    return {"status": "success", "message": "configuration updated", "config": asdict(app.settings)}


# --- KV ---------------------------------------------------------------------------------
def _kv_key(key: str) -> bytes:
    if not key or "\x00" in key:
        raise ProtocolError("a KV key is non-empty text without NUL")
    return KV + key.encode()


def kv_set(app: App, ctx: Ctx, key: str) -> Any:
    body = ctx.body()
    if not isinstance(body, dict) or "value" not in body:
        raise ProtocolError("kv set takes {'value': ..., 'ttl'?: ...}")
    ttl = parse_ttl(body.get("ttl"))
    app.db.kv.put(_kv_key(key), codec.pack(from_wire(body["value"])), ttl=ttl, sync=False)
    return {"status": "success", "key": key}


def kv_get(app: App, ctx: Ctx, key: str) -> Any:
    raw = app.db.kv.get(_kv_key(key))
    if raw is None:
        raise NotFoundError(f"Key not found: {key}")
    return envelope(codec.unpack(raw))


def kv_delete(app: App, ctx: Ctx, key: str) -> Any:
    return {"status": "success", "deleted": app.db.kv.delete(_kv_key(key), sync=False)}


def kv_clear(app: App, ctx: Ctx) -> Any:
    keys = [k for k, _ in app.db.kv.scan(KV)]
    return {"status": "success", "deleted": app.db.kv.delete_many(keys, sync=False)}


def _keys(body: Any) -> list[str]:
    keys = body.get("keys") if isinstance(body, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ProtocolError("body needs 'keys': a list of strings")
    return keys


def kv_batch_get(app: App, ctx: Ctx) -> Any:
    keys = _keys(ctx.body())
    raws = app.db.kv.get_many([_kv_key(k) for k in keys])
    return [None if r is None else plain(codec.unpack(r)) for r in raws]


def kv_batch_set(app: App, ctx: Ctx) -> Any:
    body = ctx.body()
    keys, vals = _keys(body), body.get("values")
    if not isinstance(vals, list) or len(vals) != len(keys):
        raise ProtocolError("'values' must be a list as long as 'keys'")
    ttl = parse_ttl(body.get("ttl"))
    items = [(_kv_key(k), codec.pack(from_wire(v))) for k, v in zip(keys, vals, strict=True)]
    app.db.kv.put_many(items, ttl=ttl, sync=False)
    return [[k, True] for k in keys]


def kv_batch_delete(app: App, ctx: Ctx) -> Any:
    return [[k, app.db.kv.delete(_kv_key(k), sync=False)] for k in _keys(ctx.body())]


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # (a bad pattern is the client's 400, not a server log line)


def kv_find(app: App, ctx: Ctx) -> Any:
    """Keys matching a regular expression, by RE2 (linear in the key, as ekoDB's own Rust
    regex is: no backreferences or lookaround). Python's backtracking ``re`` let one
    request hold the server: ``^(a+)+$`` against a key of 30 a's and a ``!``."""
    body = ctx.body(empty={}) or {}
    pattern = body.get("pattern") if isinstance(body, dict) else None
    if pattern is not None and not isinstance(pattern, str):
        raise ProtocolError("bad pattern: it must be a string (a regular expression)")
    try:
        rx = re2.compile(pattern, _RE2_OPTIONS) if pattern else None
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ProtocolError(f"bad pattern: {detail}") from None
    out = []
    for k, raw in app.db.kv.scan(KV):
        name = k[len(KV) :].decode()
        if rx is None or rx.search(name):
            out.append({"key": name, "value": plain(codec.unpack(raw))})
    return out


# --- transactions -----------------------------------------------------------------------
def tx_begin(app: App, ctx: Ctx) -> Any:
    body = ctx.body(empty={}) or {}
    if not isinstance(body, dict):
        raise ProtocolError("begin takes {} or {'isolation_level': ..., 'timeout_seconds': ...}")
    timeout = body.get("timeout_seconds") or 300
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ProtocolError("timeout_seconds must be a positive number")
    for tid in [t for t, tx in app.transactions.items() if tx.state != "Active"]:
        del app.transactions[tid]  # forget ended transactions
    tx = app.db.transaction(body.get("isolation_level"), timeout=float(timeout))
    assert ctx.key is not None  # (the route needs a key)
    tx.owner = ctx.key.key_id
    app.transactions[tx.id] = tx
    return {"transaction_id": tx.id, "isolation_level": tx.isolation}


def tx_status(app: App, ctx: Ctx, tid: str) -> Any:
    return app.transaction(ctx, tid).status()


def tx_commit(app: App, ctx: Ctx, tid: str) -> Any:
    tx = app.transaction(ctx, tid)
    tx.commit()
    return {"status": "committed", "transaction_id": tid}


def tx_rollback(app: App, ctx: Ctx, tid: str) -> Any:
    app.transaction(ctx, tid).rollback()
    return {"status": "rolled_back", "transaction_id": tid}


def sp_create(app: App, ctx: Ctx, tid: str) -> Any:
    body = ctx.body(empty={})
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name:
        raise ProtocolError("a savepoint needs a 'name'")
    app.transaction(ctx, tid).savepoint(name)
    return {"status": "success", "savepoint": name}


def sp_rollback(app: App, ctx: Ctx, tid: str, name: str) -> Any:
    app.transaction(ctx, tid).rollback_to(name)
    return {"status": "success", "savepoint": name}


def sp_release(app: App, ctx: Ctx, tid: str, name: str) -> Any:
    app.transaction(ctx, tid).release(name)
    return {"status": "success", "savepoint": name}


def register(app: App) -> None:
    r = app.route
    r("GET", "/api/health", health, "open")
    r("POST", "/api/auth/token", token, "open")
    r("POST", "/api/auth/register", register_key, "admin")
    r("GET", "/api/auth/keys", list_keys, "admin")
    r("DELETE", "/api/auth/keys/{key}", revoke_key, "admin")
    r("GET", "/api/auth/permissions", get_permissions, "auth")
    r("PUT", "/api/auth/permissions", put_permissions, "admin")
    r("GET", "/api/config", get_config, "admin")
    r("PUT", "/api/config", put_config, "admin")
    r("POST", "/api/kv/set/{key}", kv_set, "kv_write")
    r("GET", "/api/kv/get/{key}", kv_get, "kv_read")
    r("DELETE", "/api/kv/delete/{key}", kv_delete, "kv_write")
    r("DELETE", "/api/kv/clear", kv_clear, "kv_write")
    r("POST", "/api/kv/batch/get", kv_batch_get, "kv_read")
    r("POST", "/api/kv/batch/set", kv_batch_set, "kv_write")
    r("DELETE", "/api/kv/batch/delete", kv_batch_delete, "kv_write")
    r("POST", "/api/kv/find", kv_find, "kv_read")
    r("POST", "/api/transactions", tx_begin, "write")
    r("GET", "/api/transactions/{tx}", tx_status, "auth")
    r("POST", "/api/transactions/{tx}/commit", tx_commit, "write")
    r("POST", "/api/transactions/{tx}/rollback", tx_rollback, "auth")
    r("POST", "/api/transactions/{tx}/savepoints", sp_create, "auth")
    r("POST", "/api/transactions/{tx}/savepoints/{name}/rollback", sp_rollback, "auth")
    r("DELETE", "/api/transactions/{tx}/savepoints/{name}", sp_release, "auth")
