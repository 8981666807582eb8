"""JWT (HS256) and API keys: forged, alg-none, expired and revoked tokens are refused."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from tuffdb.errors import AuthError, PermissionDeniedError
from tuffdb.kv.store import KVStore
from tuffdb.security.auth import KeyRing, Permission, jwt_decode, jwt_encode

SECRET = b"s" * 32


def test_round_trip_and_expiry() -> None:
    tok = jwt_encode({"sub": "k", "exp": 100}, SECRET)
    assert jwt_decode(tok, SECRET, now=99)["sub"] == "k"
    with pytest.raises(AuthError, match="expired"):
        jwt_decode(tok, SECRET, now=100)


def _b64(d: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize("token", [
    _b64({"alg": "none"}) + "." + _b64({"sub": "k", "exp": 2**40}) + ".",
    _b64({"alg": "HS512"}) + "." + _b64({"sub": "k", "exp": 2**40}) + ".AAAA",
    jwt_encode({"sub": "k", "exp": 2**40}, b"other key"),
    jwt_encode({"sub": "k"}, SECRET),
    "a.b", "a.b.c.d", "%%%.%%%.%%%", "",
])  # fmt: skip
def test_forged_or_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(AuthError):
        jwt_decode(token, SECRET)


def test_keyring_persists_keys_and_revocation_kills_tokens(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv") as kv:
        ring = KeyRing(kv)
        key = ring.create(label="r", collection_permissions={"a": ["read"], "b": {"read": True, "write": True, "exclude_fields": ["x"]}})  # noqa: E501
        token = ring.issue(key, hours=1)
        assert ring.verify(token).key == key.key
    with KVStore.open(tmp_path / "kv") as kv:
        ring = KeyRing(kv)
        again = ring.find(key.key)
        assert again is not None and ring.verify(token).key == key.key
        assert again.require("a", "read") == Permission(read=True)
        with pytest.raises(PermissionDeniedError):
            again.require("a", "write")
        with pytest.raises(PermissionDeniedError):
            again.require("c", "read")
        assert again.require("b", "write").exclude_fields == ["x"]  # type: ignore[union-attr]
        ring.revoke(key.key)
        with pytest.raises(AuthError, match="revoked"):
            ring.verify(token)
        assert ring.find(key.key) is None
        assert jwt_decode(ring.issue(ring.create(is_admin=True), 1), ring.secret)["exp"] > time.time()
