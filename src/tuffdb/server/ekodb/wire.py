"""ekoDB wire bodies: JSON or MessagePack in, the client's positional struct forms.

ekodb-client sends structs on the MessagePack paths as positional arrays (rmp-serde
compact mode) and as named maps in JSON mode; both are accepted on every path:

==============  ==================================  ===============================================
body            MessagePack                         JSON
==============  ==================================  ===============================================
batch insert    ``[[[{rec}, null], ...]]``          ``{"inserts": [{"data": {...}, "bypass_ripple"}]}``
batch update    ``[[[id, {rec}, null], ...]]``      ``{"updates": [{"id", "data", "bypass_ripple"}]}``
batch delete    ``[[[id, null], ...]]``             ``{"deletes": [{"id", "bypass_ripple"}]}``
update action   ``[field, value]``                  ``{"field", "value"}``
==============  ==================================  ===============================================
"""  # noqa: E501

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote

import msgspec

from tuffdb.documents.codec import encode_exact
from tuffdb.documents.wire import from_wire
from tuffdb.errors import ProtocolError

_JSON = msgspec.json.Decoder()
_MSGPACK = msgspec.msgpack.Decoder()
_MP_ENC = msgspec.msgpack.Encoder()
_JSON_ENC = msgspec.json.Encoder()
MAX_BATCH = 100_000


def is_msgpack(content_type: str) -> bool:
    return "msgpack" in content_type.lower()


def decode_body(body: bytes, content_type: str, *, empty: Any = None) -> Any:
    """Parse a request body (MessagePack when the Content-Type says so, else JSON).

    :raises ProtocolError: when it does not parse.
    """
    if not body.strip():
        return empty
    try:
        if is_msgpack(content_type):
            return _MSGPACK.decode(body)
        return _JSON.decode(body)
    except RecursionError:
        raise ProtocolError("body nested too deeply") from None
    except (msgspec.DecodeError, ValueError) as exc:
        kind = "MessagePack" if is_msgpack(content_type) else "JSON"
        raise ProtocolError(f"malformed {kind} body: {exc}") from None


def encode(obj: Any, msgpack: bool) -> bytes:
    return encode_exact(_MP_ENC if msgpack else _JSON_ENC, obj)


def split_url(url: bytes) -> tuple[list[str], dict[str, str]]:
    """Path segments (split on ``/``, then percent-decoded) and form-decoded query params.

    A trailing ``?`` and empty params are fine; ``null`` params are absent.
    """
    text = url.decode("latin-1")
    path, _, query = text.partition("?")
    if "%" in path:
        segments = [unquote(s) for s in path.split("/") if s]
    else:  # nothing to decode (the usual case)
        segments = [s for s in path.split("/") if s]
    if not query:
        return segments, {}
    params = {k: v for k, v in parse_qsl(query, keep_blank_values=True) if v not in ("", "null")}
    return segments, params


def _items(body: Any, named: str) -> list[Any]:
    if isinstance(body, dict):
        items = body.get(named)
    elif isinstance(body, list) and len(body) == 1 and isinstance(body[0], list):
        items = body[0]  # positional struct with one field
    else:
        items = body
    if not isinstance(items, list):
        raise ProtocolError(f"batch body needs '{named}': a list")
    if len(items) > MAX_BATCH:
        raise ProtocolError(f"a batch holds at most {MAX_BATCH} items")
    return items


def batch_inserts(body: Any) -> list[dict[str, Any]]:
    out = []
    for item in _items(body, "inserts"):
        data = item[0] if isinstance(item, list) and item else item
        if isinstance(data, dict) and set(data) <= {"data", "bypass_ripple"} and "data" in data:
            data = data["data"]
        if not isinstance(data, dict):
            raise ProtocolError("each batch insert item needs a record (a map)")
        out.append(data)
    return out


def batch_updates(body: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for item in _items(body, "updates"):
        if isinstance(item, list) and len(item) >= 2:
            rid, data = item[0], item[1]
        elif isinstance(item, dict):
            rid, data = item.get("id"), item.get("data")
        else:
            rid, data = None, None
        if not isinstance(rid, str) or not isinstance(data, dict):
            raise ProtocolError("each batch update item needs an id (string) and data (a map)")
        out.append((rid, data))
    return out


def batch_deletes(body: Any) -> list[str]:
    if isinstance(body, dict) and isinstance(body.get("ids"), list):
        body = {"deletes": [{"id": i} for i in body["ids"]]}
    out = []
    for item in _items(body, "deletes"):
        rid = item[0] if isinstance(item, list) and item else item
        if isinstance(rid, dict):
            rid = rid.get("id")
        if not isinstance(rid, str):
            raise ProtocolError("each batch delete item needs an id (string)")
        out.append(rid)
    return out


def action_body(body: Any) -> tuple[str, Any]:
    if isinstance(body, list) and body and isinstance(body[0], str):
        return body[0], from_wire(body[1]) if len(body) > 1 else None
    if isinstance(body, dict) and isinstance(body.get("field"), str):
        return body["field"], from_wire(body.get("value"))
    raise ProtocolError("an action body is {'field': f, 'value': v} or [field, value]")


def field_list(value: Any) -> list[str] | None:
    """``select_fields``/``exclude_fields`` from a body (list) or a query (comma string)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [v for v in value.split(",") if v] or None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value or None
    raise ProtocolError("select_fields/exclude_fields must be a list of field names")


def optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(f"{name} must be a non-negative integer")
    return value
