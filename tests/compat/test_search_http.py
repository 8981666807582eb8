"""POST /api/search/{c} over real HTTP: the exact ekoDB response shape, text, vector and
hybrid requests in the client's forms, and results that stay right after a SIGKILL."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from typing import TYPE_CHECKING

from ekodb_harness import Client, EkoServer

if TYPE_CHECKING:
    from collections.abc import Iterator

DOCS = [
    {
        "id": "a",
        "title": "Rust databases",
        "body": "A database written in Rust",
        "year": 2020,
        "emb": {"type": "Vector", "value": [1.0, 0.0]},
    },
    {
        "id": "b",
        "title": "Python database",
        "body": "Python databases and database indexes",
        "year": 2021,
        "emb": {"type": "Vector", "value": [0.0, 1.0]},
    },
    {
        "id": "c",
        "title": "Gardening",
        "body": "Running water for the garden",
        "year": 2019,
        "emb": {"type": "Vector", "value": [0.7, 0.7]},
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EkoServer]:
    with EkoServer(tmp_path_factory.mktemp("ekodb"), use_typed_values=True) as s:
        c = s.client()
        for doc in DOCS:
            assert c.json("POST", "/api/insert/articles", doc).status_code == 200
        c.close()
        yield s
        assert s.stop() == 0, "".join(s.lines)


@pytest.fixture
def client(server: EkoServer) -> Iterator[Client]:
    c = server.client()
    yield c
    c.close()


def search(client: Client, body: dict, collection: str = "articles") -> dict:
    r = client.json("POST", f"/api/search/{collection}", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_text_search_has_the_exact_response_shape(client: Client) -> None:
    out = search(
        client, {"query": "database", "bypass_ripple": None, "bypass_cache": None, "limit": None}
    )
    assert set(out) == {"results", "total", "execution_time_ms"}
    assert isinstance(out["execution_time_ms"], int)
    assert out["total"] == 2
    first = out["results"][0]
    assert set(first) == {"record", "score", "matched_fields"}
    assert first["record"]["id"] == "b"
    assert first["record"]["title"] == {"type": "String", "value": "Python database"}
    assert first["matched_fields"] == ["body", "title"]


def test_text_search_options_in_wire_forms(client: Client) -> None:
    out = search(
        client,
        {
            "query": "pyhton",
            "fuzzy": True,
            "max_edit_distance": 2,
            "fields": "title,body",
            "weights": "title:2.0,body:1.0",
        },
    )
    assert [r["record"]["id"] for r in out["results"]] == ["b"]
    newer = {"type": "Condition", "content": {"field": "year", "operator": "Gt", "value": 2020}}
    out = search(client, {"query": "database", "filters": newer, "select_fields": ["title"]})
    assert [r["record"] for r in out["results"]] == [
        {"id": "b", "title": {"type": "String", "value": "Python database"}}
    ]


def test_vector_and_hybrid_search(client: Client) -> None:
    out = search(
        client,
        {
            "query": "",
            "vector": [1.0, 0.0],
            "vector_field": "emb",
            "vector_metric": "cosine",
            "vector_k": 2,
        },
    )
    assert [r["record"]["id"] for r in out["results"]] == ["a", "c"]
    assert out["results"][0]["matched_fields"] == ["emb"]
    assert out["results"][0]["score"] == pytest.approx(1.0)
    out = search(
        client,
        {
            "query": "garden",
            "vector": [0.0, 1.0],
            "vector_field": "emb",
            "text_weight": 0.3,
            "vector_weight": 0.7,
            "vector_k": 3,
        },
    )
    assert next(r["record"]["id"] for r in out["results"]) == "c"


def test_errors_are_json_with_code_and_message(client: Client) -> None:
    r = client.json(
        "POST", "/api/search/articles", {"query": "", "vector": [1, 2, 3], "vector_field": "emb"}
    )
    assert r.status_code == 400
    assert r.json()["code"] == 400
    r = client.json(
        "POST",
        "/api/search/articles",
        {"query": "x", "vector_metric": "manhattan", "vector": [1, 0]},
    )
    assert r.status_code == 400
    assert search(client, {"query": "x"}, "no_such_collection")["results"] == []


def test_search_is_right_after_sigkill_and_restart(tmp_path: Path) -> None:
    with EkoServer(tmp_path, durable_operations=True) as s:
        c = s.client()
        for doc in DOCS:
            assert c.json("POST", "/api/insert/articles", doc).status_code == 200
        assert c.json("DELETE", "/api/delete/articles/a").status_code == 200
        assert (
            c.json("PUT", "/api/update/articles/c", {"body": "databases in the garden"}).status_code
            == 200
        )
        c.close()
        s.kill()
    with EkoServer(tmp_path) as s:
        c = s.client()
        out = search(c, {"query": "database"})
        assert sorted(r["record"]["id"] for r in out["results"]) == ["b", "c"]
        out = search(c, {"query": "", "vector": [1.0, 0.0], "vector_field": "emb"})
        assert [r["record"]["id"] for r in out["results"]] == ["c", "b"]
        c.close()
        assert s.stop() == 0
