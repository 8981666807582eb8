"""The ekoDB REST face over real HTTP, in JSON and in ekodb-client's MessagePack forms.

One server subprocess (real KVStore, encryption on) serves the module; tests use
their own collections. Shapes follow docs/shared ekodb-api.md section 6.
"""

from __future__ import annotations

import base64
import gzip
import json
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_harness import Client, EkoServer  # noqa: E402

MODES = ["json", "msgpack"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EkoServer]:
    with EkoServer(tmp_path_factory.mktemp("ekodb")) as s:
        yield s
        assert s.stop() == 0, "".join(s.lines)


@pytest.fixture
def client(server: EkoServer) -> Iterator[Client]:
    c = server.client()
    yield c
    c.close()


def cond(field: str, op: str, value: object) -> dict[str, object]:
    return {"type": "Condition", "content": {"field": field, "operator": op, "value": value}}


def test_health_needs_no_auth_and_token_is_a_jwt_with_exp(server: EkoServer, client: Client) -> None:
    r = client.http.get("/api/health")
    assert r.json()["status"] == "ok" and r.json()["integrity_ok"] is True
    payload = json.loads(base64.urlsafe_b64decode(client.token.split(".")[1] + "=="))
    assert isinstance(payload["exp"], int)
    assert client.http.post("/api/find/x", json={}).status_code == 401
    bad = client.http.post("/api/auth/token", json={"api_key": "tdb_wrong"})
    assert bad.status_code == 401 and bad.json()["code"] == 401


def test_first_start_wrote_private_key_files(server: EkoServer) -> None:
    for name in ("ekodb_admin_key", "documents.key"):
        assert stat.S_IMODE((server.data_dir / name).stat().st_mode) == 0o600
    assert any(server.admin_key in line for line in server.lines)


@pytest.mark.parametrize("mode", MODES)
def test_crud_round_trip(client: Client, mode: str) -> None:
    c = f"crud_{mode}"
    st, body = client.call(mode, "POST", f"/api/insert/{c}?", {"name": "Ada", "age": 36, "tags": ["a"]})
    assert st == 200 and isinstance(body["id"], str) and len(body["id"]) == 86
    rid = body["id"]
    got = client.json("GET", f"/api/find/{c}/{rid}").json()
    assert got["id"] == rid and got["name"] == {"type": "String", "value": "Ada"}
    found = client.json("POST", f"/api/find/{c}", {"filter": cond("age", "Gte", 30), "sort": [{"field": "age", "ascending": False}],
                        "limit": 10, "skip": 0, "bypass_cache": None, "select_fields": None, "exclude_fields": None}).json()  # noqa: E501
    assert [r["id"] for r in found] == [rid]
    st, body = client.call(mode, "PUT", f"/api/update/{c}/{rid}", {"age": 37})
    assert st == 200 and body["age"]["value"] == 37 and body["name"]["value"] == "Ada"
    action = ["age", 3] if mode == "msgpack" else {"field": "age", "value": 3}
    st, body = client.call(mode, "PUT", f"/api/update/{c}/{rid}/action/increment", action)
    assert body["age"]["value"] == 40
    seq = client.json("PUT", f"/api/update/sequence/{c}/{rid}", [["push", "tags", "b"], ["decrement", "age", 1]]).json()  # noqa: E501
    assert seq["tags"]["value"] == ["a", "b"] and seq["age"]["value"] == 39
    st, body = client.call(mode, "DELETE", f"/api/delete/{c}/{rid}")
    assert st == 200 and body["id"] == rid and body["age"]["value"] == 39
    r = client.json("GET", f"/api/find/{c}/{rid}")
    assert r.status_code == 404 and r.json() == {"code": 404, "message": "Record not found"}


@pytest.mark.parametrize("mode", MODES)
def test_batch_calls_in_both_struct_forms(client: Client, mode: str) -> None:
    c = f"batch_{mode}"
    recs = [{"n": i} for i in range(3)]
    body = [[[r, None] for r in recs]] if mode == "msgpack" else {"inserts": [{"data": r, "bypass_ripple": None} for r in recs]}  # noqa: E501
    st, out = client.call(mode, "POST", f"/api/batch/insert/{c}", body)
    assert st == 200 and len(out["successful"]) == 3 and out["failed"] == []
    ids = out["successful"]
    body = [[[i, {"n": 10}, None] for i in ids[:2]]] if mode == "msgpack" else {"updates": [{"id": i, "data": {"n": 10}, "bypass_ripple": None} for i in ids[:2]]}  # noqa: E501
    st, out = client.call(mode, "PUT", f"/api/batch/update/{c}", body)
    assert out["successful"] == ids[:2]
    assert len(client.json("POST", f"/api/find/{c}", {"filter": cond("n", "Eq", 10)}).json()) == 2
    body = [[[i, None] for i in ids]] if mode == "msgpack" else {"deletes": [{"id": i, "bypass_ripple": None} for i in ids]}  # noqa: E501
    st, out = client.call(mode, "DELETE", f"/api/batch/delete/{c}", body)
    assert sorted(out["successful"]) == sorted(ids)
    assert client.json("POST", f"/api/find/{c}", {}).json() == []


def test_typed_values_uuid_bin_decimal_datetime(client: Client) -> None:
    u = uuid.uuid4()
    st, body = client.call("msgpack", "POST", "/api/insert/typed", {
        "u": u.bytes, "price": {"type": "Decimal", "value": "9.99"},
        "at": {"type": "DateTime", "value": "2026-11-30T12:00:00Z"}, "v": {"type": "Vector", "value": [1, 2]},
        "raw": {"type": "Binary", "value": base64.b64encode(b"\x00\x01").decode()}})  # fmt: skip
    got = client.json("GET", f"/api/find/typed/{body['id']}").json()
    assert got["u"] == {"type": "UUID", "value": str(u)}
    assert got["price"] == {"type": "Decimal", "value": "9.99"}
    assert got["at"] == {"type": "DateTime", "value": "2026-11-30T12:00:00Z"}
    assert got["v"] == {"type": "Vector", "value": [1.0, 2.0]}
    assert got["raw"] == {"type": "Binary", "value": "AAE="}
    hits = client.json("POST", "/api/find/typed", {"filter": cond("at", "Gt", "2026-01-01T00:00:00Z")}).json()
    assert len(hits) == 1


def test_projections_join_and_distinct(client: Client) -> None:
    client.json("POST", "/api/insert/dept", {"id": "d1", "name": "eng"})
    for n in ("a", "b"):
        client.json("POST", "/api/insert/emp", {"name": n, "dept": "d1", "secret": 1})
    rows = client.json("POST", "/api/find/emp", {"select_fields": ["name"], "exclude_fields": None,
                       "join": {"collections": ["dept"], "local_field": "dept", "foreign_field": "id", "as_field": "department"}}).json()  # noqa: E501
    assert set(rows[0]) == {"id", "name", "department"}
    rid = rows[0]["id"]
    one = client.json("GET", f"/api/find/emp/{rid}?exclude_fields=secret,dept").json()
    assert set(one) == {"id", "name"}
    assert client.json("POST", "/api/find/emp", {"select_fields": [], "exclude_fields": []}).json()[0]["secret"]
    d = client.json("POST", "/api/distinct/emp/name", {}).json()
    assert d == {"collection": "emp", "field": "name", "values": ["a", "b"], "count": 2}


def test_collections_and_schemas(client: Client) -> None:
    schema = {"fields": {"email": {"field_type": "string", "required": True, "unique": True, "index": {"type": "hash"}},
                         "age": {"field_type": "Integer", "min": 0}},
              "version": 1, "created_at": "1970-01-01T00:00:00Z", "last_modified": "1970-01-01T00:00:00Z", "bypass_ripple": True}  # noqa: E501
    assert client.json("POST", "/api/collections/members", schema).status_code == 200
    got = client.json("GET", "/api/collections/members").json()
    assert got["collection"]["fields"]["email"]["index"] == {"type": "hash"}
    assert got["collection"]["fields"]["email"]["field_type"] == "String"
    assert got["collection"]["created_at"] != "1970-01-01T00:00:00Z"
    assert "members" in client.json("GET", "/api/collections").json()["collections"]
    ok = client.json("POST", "/api/insert/members", {"email": "a@x", "age": 1})
    assert ok.status_code == 200
    for bad in ({"age": 1}, {"email": "b@x", "age": "old"}, {"email": "b@x", "age": -5}, {"email": "a@x"}):
        r = client.json("POST", "/api/insert/members", bad)
        assert r.status_code in (400, 409) and r.json()["message"], bad
    r = client.json("PUT", "/api/schemas/members", {"constraints": {"email": {"required": False}}})
    assert r.status_code == 200
    assert client.json("GET", "/api/schemas/members").json()["fields"]["email"]["required"] is False
    assert client.json("POST", "/api/insert/members", {"age": 2}).status_code == 200
    assert client.json("DELETE", "/api/collections/members").json()["deleted_records"] == 2
    assert client.json("GET", "/api/collections/members").status_code == 404


def test_kv_endpoints(client: Client) -> None:
    assert client.json("POST", "/api/kv/set/cache%3Ap%2F1", {"value": {"x": 1}, "ttl": "30m"}).status_code == 200
    assert client.json("GET", "/api/kv/get/cache%3Ap%2F1").json() == {"type": "Object", "value": {"x": 1}}
    assert client.json("GET", "/api/kv/get/missing").status_code == 404
    out = client.json("POST", "/api/kv/batch/set", {"keys": ["k1", "k2"], "values": [{"a": 1}, [1, 2]], "ttl": 60}).json()  # noqa: E501
    assert out == [["k1", True], ["k2", True]]
    assert client.json("POST", "/api/kv/batch/get", {"keys": ["k1", "k2", "k3"]}).json() == [{"a": 1}, [1, 2], None]  # noqa: E501
    found = client.json("POST", "/api/kv/find", {"pattern": "^cache:p/.*", "include_expired": False}).json()
    assert found == [{"key": "cache:p/1", "value": {"x": 1}}]
    assert client.json("DELETE", "/api/kv/batch/delete", {"keys": ["k1", "k3"]}).json() == [["k1", True], ["k3", False]]  # noqa: E501
    client.json("DELETE", "/api/kv/clear")
    assert client.json("POST", "/api/kv/find", {}).json() == []


def test_kv_find_patterns_take_time_linear_in_the_keys(client: Client) -> None:
    """``/api/kv/find`` matches with RE2, as ekoDB's Rust regex does: a pattern that makes a
    backtracking engine exponential is answered at once (Python's ``re`` held the server on
    this one), and what RE2 does not offer (a backreference) is a 400 naming the pattern
    problem."""
    key = "a" * 40 + "!"
    assert client.json("POST", f"/api/kv/set/{key}", {"value": 1}).status_code == 200
    assert client.json("POST", "/api/kv/set/aaa", {"value": 2}).status_code == 200
    found = client.json("POST", "/api/kv/find", {"pattern": "^(a+)+$"}).json()
    assert found == [{"key": "aaa", "value": 2}]
    for bad in ("(a)\\1", "(?=a)", "("):
        r = client.json("POST", "/api/kv/find", {"pattern": bad})
        assert r.status_code == 400 and "bad pattern" in r.json()["message"], (bad, r.text)
    r = client.json("POST", "/api/kv/find", {"pattern": 5})
    assert r.status_code == 400
    client.json("DELETE", "/api/kv/clear")


def test_transactions_two_clients_one_gets_409(server: EkoServer, client: Client) -> None:
    other = server.client()
    rid = client.json("POST", "/api/insert/acct", {"bal": 10}).json()["id"]
    t1 = client.json("POST", "/api/transactions", {"isolation_level": "Serializable"}).json()["transaction_id"]
    t2 = other.json("POST", "/api/transactions", {}).json()["transaction_id"]
    q1, q2 = f"?transaction_id={t1}", f"?transaction_id={t2}"
    assert client.json("PUT", f"/api/update/acct/{rid}{q1}", {"bal": 1}).status_code == 200
    assert other.json("PUT", f"/api/update/acct/{rid}{q2}", {"bal": 2}).status_code == 200
    assert client.json("GET", f"/api/find/acct/{rid}{q1}").json()["bal"]["value"] == 1  # own write
    assert client.json("GET", f"/api/find/acct/{rid}").json()["bal"]["value"] == 10  # staged only
    assert client.json("POST", f"/api/transactions/{t1}/commit").status_code == 200
    r = other.json("POST", f"/api/transactions/{t2}/commit")
    assert r.status_code == 409 and r.json()["code"] == 409
    assert client.json("GET", f"/api/find/acct/{rid}").json()["bal"]["value"] == 1
    assert client.json("GET", f"/api/transactions/{t2}").json()["state"] == "Aborted"
    other.close()


def test_savepoints_over_http(client: Client) -> None:
    t = client.json("POST", "/api/transactions", {}).json()["transaction_id"]
    q = f"?transaction_id={t}"
    client.json("POST", f"/api/insert/sp{q}", {"id": "a"})
    assert client.json("POST", f"/api/transactions/{t}/savepoints", {"name": "s1"}).status_code == 200
    client.json("POST", f"/api/batch/insert/sp{q}", {"inserts": [{"data": {"id": "b"}}]})
    assert client.json("POST", f"/api/transactions/{t}/savepoints/s1/rollback").status_code == 200
    assert [r["id"] for r in client.json("POST", f"/api/find/sp{q}", {}).json()] == ["a"]
    assert client.json("DELETE", f"/api/transactions/{t}/savepoints/s1").status_code == 200
    client.json("POST", f"/api/transactions/{t}/commit")
    assert [r["id"] for r in client.json("POST", "/api/find/sp", {}).json()] == ["a"]
    assert client.json("POST", "/api/insert/sp?transaction_id=nope+1%262", {}).status_code == 404


def test_permissions_read_only_and_field_restrictions(server: EkoServer, client: Client) -> None:
    rid = client.json("POST", "/api/insert/secure", {"name": "a", "salary": 5}).json()["id"]
    ro = client.json("POST", "/api/auth/register", {"label": "ro", "description": "", "is_admin": False,
                     "collection_permissions": {"secure": ["read"]}}).json()  # fmt: skip
    reader = server.client(ro["key"])
    assert reader.json("GET", f"/api/find/secure/{rid}").status_code == 200
    assert reader.json("POST", "/api/insert/secure", {"name": "b"}).status_code == 403
    assert reader.json("POST", "/api/find/other", {}).status_code == 403
    assert reader.json("POST", "/api/auth/register", {}).status_code == 403
    r = client.json("PUT", "/api/auth/permissions", {"api_key": ro["key"], "collection": "secure", "read": True,
                    "write": True, "exclude_fields": ["salary"], "writable_fields": ["name"]})  # fmt: skip
    assert r.status_code == 200
    assert "salary" not in reader.json("GET", f"/api/find/secure/{rid}").json()
    assert "salary" not in reader.json("POST", "/api/find/secure", {}).json()[0]
    assert reader.json("PUT", f"/api/update/secure/{rid}", {"salary": 9}).status_code == 403
    assert reader.json("PUT", f"/api/update/secure/{rid}", {"name": "z"}).status_code == 200
    perms = reader.json("GET", "/api/auth/permissions").json()
    assert perms["is_admin"] is False and perms["collection_permissions"]["secure"]["write"] is True
    assert any(k["key"] == ro["key"] for k in client.json("GET", "/api/auth/keys").json())
    assert client.json("DELETE", f"/api/auth/keys/{ro['key']}").status_code == 200
    assert reader.json("POST", "/api/find/secure", {}).status_code == 401  # token of a revoked key
    reader.close()


def test_config_get_put(client: Client) -> None:
    cfg = client.json("GET", "/api/config").json()
    assert cfg["use_typed_values"] is True and cfg["storage_mode"] == "fast"
    assert client.json("PUT", "/api/config", {"use_typed_values": False}).json()["status"] == "success"
    rid = client.json("POST", "/api/insert/plainv", {"a": 1}).json()["id"]
    assert client.json("GET", f"/api/find/plainv/{rid}").json() == {"id": rid, "a": 1}
    client.json("PUT", "/api/config", {"use_typed_values": True})
    assert client.json("PUT", "/api/config", {"token_expiry_hours": 500}).status_code == 400
    assert client.json("PUT", "/api/config", {"nonsense": 1}).status_code == 400


def test_token_refresh_path(client: Client) -> None:
    good = client.token
    client.token = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert client.json("POST", "/api/find/x", {}).status_code == 401
    client.token = client.fetch_token()
    assert client.json("POST", "/api/find/x", {}).status_code == 200


def _forge(header: dict[str, object], payload: dict[str, object], sig: bytes) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc(header)}.{enc(payload)}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"


def test_forged_tokens_are_refused(client: Client) -> None:
    payload = json.loads(base64.urlsafe_b64decode(client.token.split(".")[1] + "=="))
    import hashlib
    import hmac

    head = {"alg": "HS256", "typ": "JWT"}
    for token in (
        _forge({"alg": "none", "typ": "JWT"}, payload, b""),
        _forge(head, payload, hmac.new(b"guess", b"x", hashlib.sha256).digest()),
        _forge(head, {**payload, "adm": True, "exp": 2**40}, b"\x00" * 32),
        "not.a.jwt", "x",
    ):
        r = client.http.post("/api/find/x", json={}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401 and r.json()["code"] == 401


def test_bad_input_gets_clear_4xx_and_writes_nothing(client: Client) -> None:
    c = "badinput"
    h = {**client.auth, "Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    cases = [
        client.http.post(f"/api/insert/{c}", content=b"{not json", headers=client.auth),
        client.http.post(f"/api/insert/{c}", content=b"\xc1\xc1", headers=h),
        client.http.post(f"/api/insert/{c}", content=msgspec.msgpack.encode([1, 2]), headers=h),
        client.json("POST", f"/api/insert/{c}", {"x": {"type": "Integer", "value": "NaN"}}),
        client.json("POST", f"/api/find/{c}", {"filter": cond("a", "Regex", ".*")}),
        client.json("POST", f"/api/find/{c}", {"filter": {"type": "Nope"}}),
        client.json("POST", f"/api/find/{c}", {"limit": -1}),
        client.json("PUT", f"/api/batch/update/{c}", {"updates": [{"id": 5}]}),
        client.json("PUT", f"/api/update/sequence/{c}/x", [["explode"]]),
        client.http.post(f"/api/insert/{c}", content=b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
                         headers=client.auth),
    ]
    for r in cases:
        assert r.status_code == 400, r.text
        assert r.json()["code"] == 400 and r.json()["message"]
    huge = client.http.post(f"/api/insert/{c}", content=b"[" + b"1," * (17 * 1024 * 1024) + b"1]",
                            headers=client.auth)  # fmt: skip
    assert huge.status_code == 413
    assert client.json("POST", f"/api/find/{c}", {}).json() == []
    assert client.json("GET", "/api/no/such/endpoint").status_code == 404


def test_gzip_and_pipelined_keep_alive(client: Client) -> None:
    client.json("POST", "/api/batch/insert/gz", {"inserts": [{"data": {"t": "x" * 100}} for _ in range(50)]})
    r = client.http.post("/api/find/gz", json={}, headers={**client.auth, "Accept-Encoding": "gzip"})
    assert r.headers.get("content-encoding") == "gzip" and len(r.json()) == 50
    assert len(gzip.compress(r.content)) > 0


def test_trash_restore_record_and_collection(client: Client) -> None:
    ids = [client.json("POST", "/api/insert/trashy", {"n": i}).json()["id"] for i in range(3)]
    for rid in ids:
        client.json("DELETE", f"/api/delete/trashy/{rid}")
    r = client.json("POST", f"/api/trash/trashy/{ids[0]}")
    assert r.json() == {"status": "success", "restored": True}
    assert client.json("POST", f"/api/trash/trashy/{ids[0]}").status_code == 404
    assert client.json("POST", "/api/trash/trashy").json()["cleared_count"] == 2
    assert len(client.json("POST", "/api/find/trashy", {}).json()) == 3


def test_remaining_endpoints_rollback_kv_delete_find_alias_access_mode(client: Client) -> None:
    rid = client.json("POST", "/api/insert/misc", {"a": 1}).json()["id"]
    assert client.json("POST", f"/api/find/misc/{rid}").json()["id"] == rid  # POST alias
    t = client.json("POST", "/api/transactions", {"timeout_seconds": 30}).json()["transaction_id"]
    client.json("DELETE", f"/api/delete/misc/{rid}?transaction_id={t}")
    assert client.json("POST", f"/api/transactions/{t}/rollback").status_code == 200
    assert client.json("GET", f"/api/transactions/{t}").json()["state"] == "RolledBack"
    assert client.json("GET", f"/api/find/misc/{rid}").status_code == 200
    client.json("POST", "/api/kv/set/one", {"value": 1})
    assert client.json("DELETE", "/api/kv/delete/one").json()["deleted"] is True
    assert client.json("GET", "/api/kv/get/one").status_code == 404
    assert client.json("PUT", "/api/config", {"access_mode": "read"}).status_code == 200
    try:
        assert client.json("POST", "/api/insert/misc", {"a": 2}).status_code == 403
        assert client.json("POST", "/api/find/misc", {}).status_code == 200
    finally:
        client.json("PUT", "/api/config", {"access_mode": "read_write"})
    assert client.json("POST", "/api/insert/misc", {"a": 2}).status_code == 200
