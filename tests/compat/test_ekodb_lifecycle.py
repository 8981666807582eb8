"""ekoDB face lifecycle over real HTTP: restart keeps data and keys, rate limits, TTL."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_harness import EkoServer  # noqa: E402


def test_restart_keeps_records_keys_and_settings_and_makes_no_new_admin(tmp_path: Path) -> None:
    with EkoServer(tmp_path) as s:
        rid = _first_life(s)
    with EkoServer(tmp_path) as again:
        _second_life(again, rid)


def _first_life(s: EkoServer) -> str:
    c = s.client()
    rid = c.json("POST", "/api/insert/keep", {"a": 1}).json()["id"]
    c.json("POST", "/api/collections/schemed", {"fields": {"n": {"field_type": "Integer", "index": {"type": "btree"}}}})
    c.json("PUT", "/api/config", {"encrypt_ids": False})
    c.close()
    assert s.stop() == 0
    return rid


def _second_life(again: EkoServer, rid: str) -> None:
    assert not any("admin API key" in line for line in again.lines)
    c = again.client()  # the same admin key still works
    assert c.json("GET", f"/api/find/keep/{rid}").json()["a"]["value"] == 1
    assert c.json("GET", "/api/schemas/schemed").json()["fields"]["n"]["index"] == {"type": "btree"}
    new_id = c.json("POST", "/api/insert/keep", {"a": 2}).json()["id"]
    assert len(new_id) == 36  # encrypt_ids=false persisted: plain UUIDs
    assert c.json("POST", "/api/insert/schemed", {"n": "x"}).status_code == 400
    c.close()
    assert again.stop() == 0


def test_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    with EkoServer(tmp_path, rate_limit_per_minute=5) as s:
        _rate_limited(s)


def _rate_limited(s: EkoServer) -> None:
    c = s.client()  # counted per API key; a window lasts 60 s from its first request
    statuses = [c.json("POST", "/api/find/x", {}) for _ in range(7)]
    ok, limited = statuses[:5], statuses[5:]
    assert all(r.status_code == 200 for r in ok)
    assert ok[0].headers["X-RateLimit-Limit"] == "5" and ok[-1].headers["X-RateLimit-Remaining"] == "0"
    for r in limited:
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["code"] == 429 and int(r.headers["X-RateLimit-Reset"]) > 0
    c.close()
    assert s.stop() == 0


def test_ttl_records_and_kv_entries_expire(tmp_path: Path) -> None:
    with EkoServer(tmp_path) as s:
        _expire(s)


def _expire(s: EkoServer) -> None:
    c = s.client()
    rid = c.json("POST", "/api/insert/ephemeral", {"a": 1, "ttl": 1}).json()["id"]
    keep = c.json("POST", "/api/insert/ephemeral", {"a": 2, "ttl": "1h", "ttl_update_on_access": True}).json()["id"]
    c.json("POST", "/api/kv/set/short", {"value": "v", "ttl": "1s"})
    got = c.json("GET", f"/api/find/ephemeral/{rid}").json()
    assert got["ttl"].endswith("Z") and "ttl_update_on_access" not in got
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # the clock is the subject here, not a synchronisation
        time.sleep(0.1)
    assert c.json("GET", f"/api/find/ephemeral/{rid}").status_code == 404
    assert c.json("GET", "/api/kv/get/short").status_code == 404
    assert [r["id"] for r in c.json("POST", "/api/find/ephemeral", {}).json()] == [keep]
    c.close()
    assert s.stop() == 0
