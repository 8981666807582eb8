"""API keys, permissions and JWTs (HS256) for the ekoDB face.

* An **API key** is a random secret (``tdb_`` + 43 url-safe characters) with a label,
  a description, an admin flag and per-collection permissions. Keys live in the
  documents store (``s\\x00apikey\\x00<sha256 hex>``), so they are encrypted at rest with it.
* A **permission** for a collection (or ``"*"`` for all) grants ``read``/``write`` and may
  restrict fields: ``select_fields`` (only these are returned), ``exclude_fields``
  (never returned), ``writable_fields`` (only these may be written). Admin keys may do
  everything; a non-admin key with no entry for a collection may do nothing there.
* A **JWT** is ``base64url(header).base64url(payload).base64url(HMAC-SHA256)`` with the
  header ``{"alg": "HS256", "typ": "JWT"}`` and the payload ``{"sub": key id, "adm",
  "iat", "exp"}``. Verification accepts only HS256 (``alg: none`` and every other alg
  are rejected), compares the MAC in constant time, and rejects expired tokens and
  tokens of revoked keys. The signing secret is 32 random bytes kept in the store.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tuffdb.errors import AuthError, NotFoundError, PermissionDeniedError, ProtocolError

KEY_PREFIX = b"s\x00apikey\x00"
SECRET_KEY = b"s\x00jwt_secret"
_HEADER = {"alg": "HS256", "typ": "JWT"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_encode(payload: dict[str, Any], secret: bytes) -> str:
    head = _b64(json.dumps(_HEADER, separators=(",", ":")).encode())
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def jwt_decode(token: str, secret: bytes, *, now: float | None = None) -> dict[str, Any]:
    """Verify an HS256 JWT and return its payload.

    :raises AuthError: when it is malformed, not HS256, forged, or expired.
    """
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise AuthError("malformed token; get a new one from /api/auth/token")
    try:
        header = json.loads(_unb64(parts[0]))
        payload = json.loads(_unb64(parts[1]))
        mac = _unb64(parts[2])
    except (ValueError, TypeError) as exc:
        raise AuthError(f"malformed token ({exc.__class__.__name__})") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise AuthError("token algorithm must be HS256")
    good = hmac.new(secret, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(mac, good):
        raise AuthError("token signature is invalid")
    if not isinstance(payload, dict) or not isinstance(payload.get("exp"), (int, float)):
        raise AuthError("token has no expiry")
    if payload["exp"] <= (time.time() if now is None else now):
        raise AuthError("token expired; get a new one from /api/auth/token")
    return payload


@dataclass
class Permission:
    read: bool = False
    write: bool = False
    select_fields: list[str] | None = None
    exclude_fields: list[str] | None = None
    writable_fields: list[str] | None = None

    @classmethod
    def from_wire(cls, raw: Any) -> Permission:
        if isinstance(raw, list):
            return cls(read="read" in raw, write="write" in raw)
        if isinstance(raw, dict):
            lists = {k: _str_list(raw.get(k), k) for k in ("select_fields", "exclude_fields", "writable_fields")}  # noqa: E501
            return cls(read=bool(raw.get("read")), write=bool(raw.get("write")), **lists)
        raise ProtocolError("a collection permission is ['read', 'write'] or an object")

    @property
    def hides_fields(self) -> bool:
        """Whether the key may read only some fields (``select_fields``/``exclude_fields``)."""
        return bool(self.select_fields or self.exclude_fields)

    def may_read(self, path: str) -> bool:
        """Whether this permission's field restrictions let a key read field ``path`` (a
        dotted path: it may not when the field, one inside it or the one holding it is
        excluded, or when no selected field covers it)."""
        if path == "id":
            return True
        if self.select_fields and not any(
                path == s or path.startswith(s + ".") for s in self.select_fields):
            return False
        return not any(path == e or path.startswith(e + ".") or e.startswith(path + ".")
                       for e in self.exclude_fields or ())

    def to_wire(self) -> dict[str, Any]:
        return {"read": self.read, "write": self.write, "select_fields": self.select_fields,
                "exclude_fields": self.exclude_fields, "writable_fields": self.writable_fields}


def _str_list(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ProtocolError(f"{name} must be a list of field names")
    return value


@dataclass
class ApiKey:
    key: str
    label: str = ""
    description: str = ""
    is_admin: bool = False
    collection_permissions: dict[str, Permission] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()[:32]

    def permission(self, collection: str) -> Permission | None:
        if self.is_admin:
            return None
        return self.collection_permissions.get(collection, self.collection_permissions.get("*"))

    def require(self, collection: str, action: str) -> Permission | None:
        """The restricting permission (None = unrestricted) if ``action`` is allowed.

        :raises PermissionDeniedError: when it is not.
        """
        if self.is_admin:
            return None
        perm = self.permission(collection)
        if perm is None or not getattr(perm, action):
            raise PermissionDeniedError(f"this API key may not {action} collection '{collection}'")
        return perm

    def to_wire(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "description": self.description,
                "is_admin": self.is_admin,
                "collection_permissions": {c: p.to_wire() for c, p in self.collection_permissions.items()}}  # noqa: E501

    def to_store(self) -> bytes:
        data = {**self.to_wire(), "created_at": self.created_at}
        return msgspec.msgpack.encode(data)

    @classmethod
    def from_store(cls, raw: bytes) -> ApiKey:
        d = msgspec.msgpack.decode(raw)
        perms = {c: Permission.from_wire(p) for c, p in d.pop("collection_permissions").items()}
        return cls(collection_permissions=perms, **d)


class KeyRing:
    """API keys and the JWT secret, kept in a KVStore (the documents store)."""

    def __init__(self, kv: Any, *, sync: bool | None = None, read_only: bool = False) -> None:
        """``read_only``: a cluster node that may not be the leader writes nothing here;
        it reads keys and the secret a leader wrote (replicated into ``kv``) and
        :meth:`reload` s them when they change; :meth:`ensure_secret` runs on promotion."""
        self.kv, self.sync = kv, sync
        self.secret: bytes = b""
        self._by_id: dict[str, ApiKey] = {}
        self.reload()
        if not read_only:
            self.ensure_secret()

    def reload(self) -> None:
        """Read every key and the signing secret from the store again."""
        self._by_id = {k.key_id: k for k in map(ApiKey.from_store,
                                                 (raw for _, raw in self.kv.scan(KEY_PREFIX)))}
        self.secret = self.kv.get(SECRET_KEY) or b""

    def ensure_secret(self) -> None:
        """Create the JWT signing secret if the store has none (a leader, or a lone node)."""
        if not self.secret:
            secret = secrets.token_bytes(32)
            self.kv.put(SECRET_KEY, secret, sync=True)
            self.secret = secret

    @staticmethod
    def stored_under(key: bytes) -> bool:
        """Whether ``key`` is one of the keyring's own (a replicated change reloads it)."""
        return key.startswith((KEY_PREFIX, SECRET_KEY))

    def _save(self, key: ApiKey) -> None:
        self.kv.put(KEY_PREFIX + key.key_id.encode(), key.to_store(), sync=self.sync)
        self._by_id[key.key_id] = key

    def create(self, *, label: str = "", description: str = "", is_admin: bool = False,
               collection_permissions: dict[str, Any] | None = None,
               secret: str | None = None) -> ApiKey:
        """A new key (``secret`` given: that exact key, e.g. ``tuffdb serve --api-key``)."""
        perms = {str(c): Permission.from_wire(p) for c, p in (collection_permissions or {}).items()}
        key = ApiKey(secret or "tdb_" + secrets.token_urlsafe(32), str(label or ""),
                     str(description or ""), bool(is_admin), perms)
        self._save(key)
        return key

    def find(self, secret_key: object) -> ApiKey | None:
        if not isinstance(secret_key, str):
            return None
        k = self._by_id.get(hashlib.sha256(secret_key.encode()).hexdigest()[:32])
        return k if k is not None and hmac.compare_digest(k.key, secret_key) else None

    def api_keys(self) -> list[ApiKey]:
        return sorted(self._by_id.values(), key=lambda k: k.created_at)

    def revoke(self, secret_key: str) -> None:
        k = self.find(secret_key)
        if k is None:
            raise NotFoundError("no such API key")
        self.kv.delete(KEY_PREFIX + k.key_id.encode(), sync=self.sync)
        del self._by_id[k.key_id]

    def set_permission(self, secret_key: str, collection: str, changes: dict[str, Any]) -> ApiKey:
        """Change one collection's permission: omitted fields are kept, null clears."""
        k = self.find(secret_key)
        if k is None:
            raise NotFoundError("no such API key")
        perm = k.collection_permissions.get(collection, Permission())
        merged = {**perm.to_wire(), **{n: v for n, v in changes.items() if n in perm.to_wire()}}
        merged["read"], merged["write"] = bool(merged["read"]), bool(merged["write"])
        k.collection_permissions[collection] = Permission.from_wire(merged)
        self._save(k)
        return k

    def issue(self, key: ApiKey, hours: float) -> str:
        now = int(time.time())
        exp = now + int(hours * 3600)
        payload = {"sub": key.key_id, "adm": key.is_admin, "iat": now, "exp": exp}
        return jwt_encode(payload, self.secret)

    def verify(self, token: str) -> ApiKey:
        """The key a token was issued to. :raises AuthError: bad, expired or revoked."""
        if not self.secret:
            raise AuthError("no token can be verified yet: this node has not received the "
                            "cluster's signing secret from the leader")
        payload = jwt_decode(token, self.secret)
        key = self._by_id.get(str(payload.get("sub")))
        if key is None:
            raise AuthError("the API key of this token was revoked")
        return key
