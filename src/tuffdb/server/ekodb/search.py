"""``POST /api/search/{c}``: text, vector and hybrid search over the ekoDB REST face.

The body is the ekoDB search request (spec section 9, JSON; null = absent); the answer is
``{"results": [{"record", "score", "matched_fields"}], "total", "execution_time_ms"}``
with records in the server's typed-value form and the key's field restrictions applied.
The same function serves the WebSocket ``TextSearch`` request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.documents.collection import check_name
from tuffdb.documents.search import searched_fields
from tuffdb.errors import ProtocolError

if TYPE_CHECKING:
    from tuffdb.security.auth import Permission
    from tuffdb.server.ekodb.app import App, Ctx


def _vector(value: Any) -> Any:
    if isinstance(value, dict) and "value" in value:  # a {"type": "Vector", "value": [...]}
        value = value["value"]
    return value


def run_search(app: App, c: str, body: Any, perm: Permission | None) -> dict[str, Any]:
    """Search collection ``c`` with a request body; records converted for the wire."""
    if not isinstance(body, dict):
        raise ProtocolError("a search body is an object with at least 'query'")
    try:
        check_name(c)
    except Exception as exc:  # noqa: BLE001 - ProgrammingError -> a 400 with the reason
        raise ProtocolError(str(exc)) from None
    options = {k: v for k, v in body.items() if v is not None and k != "query"}
    if "vector" in options:
        options["vector"] = _vector(options["vector"])
    query = body.get("query", "")
    if query is None:
        query = ""
    if not app.db.has_collection(c):
        return {"results": [], "total": 0, "execution_time_ms": 0}
    coll = app.db.collection(c)
    if perm is not None and perm.hides_fields:
        # Matching or ranking by a field tells what it holds: a key that may read only
        # some fields searches, filters and weighs by those only (app.check_readable).
        used, default = searched_fields(coll, options, query)
        app.check_readable(perm, c, used)
        if default is not None:
            allowed = [f for f in default if perm.may_read(f)]
            if not allowed:
                return {"results": [], "total": 0, "execution_time_ms": 0}
            options["fields"] = allowed
    out = coll.search(query, **options)
    for hit in out["results"]:
        hit["record"] = app.out(hit["record"], perm)
    return out


def search(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "read")
    return run_search(app, c, ctx.body(empty={}), perm)


def register(app: App) -> None:
    app.route("POST", "/api/search/{c}", search, "read")
