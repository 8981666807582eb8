"""Full-text search on a small known corpus: BM25 order, stemming, stop words, fuzzy,
case, fields and weights, boost_exact, filters before ranking, min_score, projections,
and index upkeep across updates, deletes, transactions and reopen."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import pytest

from tuffdb.documents import Database
from tuffdb.documents.fulltext.analyzer import edit_distance, terms
from tuffdb.documents.fulltext.stemmer import stem
from tuffdb.documents.search_index import state_for

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CORPUS = [
    {"id": "a", "title": "Rust databases", "body": "A database written in Rust is fast",
     "year": 2020},
    {"id": "b", "title": "Python database", "body": "Python databases and database indexes",
     "year": 2021},
    {"id": "c", "title": "Gardening", "body": "Running water for the garden; the runner runs",
     "year": 2019},
    {"id": "d", "title": "Cooking", "body": "Boiling pasta in salted water", "year": 2022},
    {"id": "e", "title": "Search engines", "body": "Full text search ranks documents with BM25",
     "year": 2023},
]  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database.open(tmp_path / "docs")
    d.collection("posts").insert_many([dict(r) for r in CORPUS])
    yield d
    assert d.check() == []
    d.close()


def ids(result: dict) -> list[str]:
    return [r["record"]["id"] for r in result["results"]]


def test_porter_stemmer_and_analyzer_basics() -> None:
    assert [stem(w) for w in ("running", "runs", "databases", "relational", "happy")] == [
        "run",
        "run",
        "databas",
        "relat",
        "happi",
    ]
    assert terms("The Quick brown fox is in the box") == ["quick", "brown", "fox", "box"]
    assert edit_distance("databse", "database", 2) == 1
    assert edit_distance("kitten", "sitting", 2) == 3  # limit + 1: gave up


def test_bm25_ranks_the_record_with_more_and_denser_matches_first(db: Database) -> None:
    out = db.collection("posts").search("database")
    assert ids(out) == ["b", "a"]  # b: database x3 over two fields; a: x2
    assert out["total"] == 2
    assert set(out) == {"results", "total", "execution_time_ms"}
    assert out["results"][0]["matched_fields"] == ["body", "title"]
    assert out["results"][0]["score"] > out["results"][1]["score"] > 0


def test_stemming_matches_word_forms_and_can_be_turned_off(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("run")) == ["c"]
    assert ids(posts.search("run", enable_stemming=False)) == []
    assert sorted(ids(posts.search("databases", enable_stemming=False))) == ["a", "b"]


def test_stop_words_alone_match_nothing(db: Database) -> None:
    assert db.collection("posts").search("the and in")["results"] == []


def test_fuzzy_finds_typos_with_lower_scores_than_exact(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("pyhton")) == []
    fuzzy = posts.search("pyhton", fuzzy=True, max_edit_distance=2)
    assert ids(fuzzy) == ["b"]
    exact = posts.search("python")
    assert fuzzy["results"][0]["score"] < exact["results"][0]["score"]
    assert ids(posts.search("pyhton", fuzzy=True, max_edit_distance=1)) == []  # transposition = 2


def test_fuzzy_finds_words_added_after_its_first_use(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("garden", fuzzy=True)) == ["c"]  # builds the fuzzy index
    posts.insert({"id": "k", "body": "kubernetes clusters"})
    assert ids(posts.search("kubernets", fuzzy=True)) == ["k"]
    # a budget of 3 walks the vocabulary instead (also finds "rust" for "clustr": 3 edits)
    assert ids(posts.search("kubernetes clustr", fuzzy=True, max_edit_distance=3)) == ["k", "a"]


def test_case_sensitive_search(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("rust", case_sensitive=True)) == []
    assert ids(posts.search("Rust", case_sensitive=True)) == ["a"]
    assert ids(posts.search("rust")) == ["a"]


def test_fields_and_weights_change_the_order(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("water", fields="title")) == []
    assert ids(posts.search("database", fields=["title"])) == ["b", "a"]
    # body-only match ('c', 'd' both mention water once); weights flip a title/body tie
    posts.insert({"id": "f", "title": "water", "body": "nothing relevant"})
    assert ids(posts.search("water", weights="title:5.0"))[0] == "f"
    assert ids(posts.search("water", weights={"title": 0.01, "body": 1.0}))[-1] == "f"


def test_boost_exact_prefers_the_verbatim_phrase(db: Database) -> None:
    posts = db.collection("posts")
    posts.insert({"id": "g", "title": "x", "body": "text search and full documents"})
    plain = ids(posts.search("full text search"))
    boosted = ids(posts.search("full text search", boost_exact=True))
    assert boosted[0] == "e"
    assert set(plain) == set(boosted)


def test_filters_apply_before_ranking_and_min_score_and_limit_cut(db: Database) -> None:
    posts = db.collection("posts")
    newer = {"type": "Condition", "content": {"field": "year", "operator": "Gte", "value": 2021}}
    out = posts.search("database", filters=newer)
    assert ids(out) == ["b"]
    assert out["total"] == 1
    top = posts.search("database")["results"][0]["score"]
    assert ids(posts.search("database", min_score=top)) == ["b"]
    assert ids(posts.search("database water", limit=1)) == ["b"]
    assert posts.search("database water", limit=1)["total"] == 4


def test_projections_apply_to_result_records(db: Database) -> None:
    out = db.collection("posts").search("cooking", select_fields=["title"])
    assert out["results"][0]["record"] == {"id": "d", "title": "Cooking"}
    out = db.collection("posts").search("cooking", exclude_fields="body,year")
    assert out["results"][0]["record"] == {"id": "d", "title": "Cooking"}


def test_updates_deletes_and_transactions_are_reflected(db: Database) -> None:
    posts = db.collection("posts")
    assert ids(posts.search("pasta")) == ["d"]
    posts.update("d", {"body": "Grilled fish"})
    assert ids(posts.search("pasta")) == []
    assert ids(posts.search("fish")) == ["d"]
    posts.delete("d")
    assert ids(posts.search("fish")) == []
    tx = db.transaction()
    tx.insert("posts", {"id": "t", "title": "transactional pasta"})
    assert ids(posts.search("pasta")) == []  # staged, not visible
    tx.commit()
    assert ids(posts.search("pasta")) == ["t"]
    assert state_for(posts).text.check() == []


def test_index_is_rebuilt_from_records_after_reopen(tmp_path: Path) -> None:
    with Database.open(tmp_path / "docs") as db:
        posts = db.collection("posts")
        posts.insert_many([dict(r) for r in CORPUS])
        assert ids(posts.search("database")) == ["b", "a"]
        posts.delete("b")
        posts.insert({"id": "z", "body": "late database"})
    with Database.open(tmp_path / "docs") as db:
        assert sorted(ids(db.collection("posts").search("database"))) == ["a", "z"]


def test_schema_text_index_limits_fields_and_language(tmp_path: Path) -> None:
    with Database.open(tmp_path / "docs") as db:
        db.create_collection(
            "notes",
            {
                "fields": {
                    "title": {
                        "field_type": "String",
                        "index": {"type": "text", "language": "english"},
                    },
                    "tag": {"field_type": "String"},
                }
            },
        )
        notes = db.collection("notes")
        notes.insert({"id": "n1", "title": "alpha", "tag": "beta"})
        assert ids(notes.search("alpha")) == ["n1"]
        assert ids(notes.search("beta")) == []  # tag has no text index


def reference_bm25(corpus: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """Textbook BM25 over one field (Lucene's idf), written independently of the engine;
    the tokenizer is the engine's (analyzer.terms)."""
    docs = {rid: terms(text) for rid, text in corpus.items()}
    avg = sum(map(len, docs.values())) / len(docs)
    scores: dict[str, float] = {}
    for q in dict.fromkeys(terms(query)):
        holders = {rid: toks.count(q) for rid, toks in docs.items() if q in toks}
        idf = math.log(1 + (len(docs) - len(holders) + 0.5) / (len(holders) + 0.5))
        for rid, tf in holders.items():
            norm = k1 * (1 - b + b * len(docs[rid]) / avg)
            scores[rid] = scores.get(rid, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return scores


def test_top_10_agrees_with_a_reference_bm25_on_a_fixed_corpus(db: Database) -> None:
    rng = random.Random(2024)
    vocab = [f"w{i}" for i in range(400)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    corpus = {f"d{i:04d}": " ".join(rng.choices(vocab, weights, k=rng.randint(5, 60)))
              for i in range(3000)}
    docs = db.collection("bm")
    docs.insert_many([{"id": rid, "body": text} for rid, text in corpus.items()])
    docs.delete("d0001")  # a dead slot must not disturb the statistics
    del corpus["d0001"]
    agreements = []
    for _ in range(40):
        query = " ".join(rng.choices(vocab, weights, k=rng.randint(2, 3)))
        ref = reference_bm25(corpus, query)
        want = sorted(ref, key=lambda r: (-ref[r], r))[:10]
        got = [r["record"]["id"] for r in docs.search(query, limit=10)["results"]]
        agreements.append(len(set(want) & set(got)))
    assert min(agreements) >= 9, agreements


def test_dead_slots_are_compacted_and_searches_stay_exact(db: Database,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tuffdb.documents.fulltext import postings  # noqa: PLC0415 - the knob under test

    monkeypatch.setattr(postings, "COMPACT_MIN_DEAD", 8)
    docs = db.collection("churn")
    words = ["red", "green", "blue", "cyan"]
    model = {f"r{i}": words[i % 4] + " " + words[(i + 1) % 4] for i in range(40)}
    docs.insert_many([{"id": rid, "body": text} for rid, text in model.items()])
    docs.search("red")
    index = state_for(docs).text
    for round_ in range(3):  # every record updated: 120 dead slots over 40 live ones
        for i, rid in enumerate(sorted(model)):
            model[rid] = words[(i + round_) % 4] + " " + words[(i * 3 + round_) % 4]
        for rid, text in model.items():
            docs.update(rid, {"body": text})
    for rid in sorted(model)[:10]:
        docs.delete(rid)
        del model[rid]
    assert index.check() == []
    assert index.capacity < 2 * len(model) + 8  # renumbered, not grown by every update
    for word in words:
        got = {r["record"]["id"] for r in docs.search(word, limit=100)["results"]}
        assert got == {rid for rid, text in model.items() if word in text.split()}


def test_batch_terms_match_per_text_tokens() -> None:
    from tuffdb.documents.fulltext.analyzer import GAP, batch_terms, tokens  # noqa: PLC0415

    rng = random.Random(7)
    alphabet = "aB9_ -,.;\t\n\x00\x1fÉéßİ日本\u0307"
    for ascii_only in (True, False):
        chars = alphabet[:13] if ascii_only else alphabet
        texts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 30))) for _ in range(50)]
        want = []
        for i, text in enumerate(texts):
            if i:
                want.append(GAP)
            want.extend(t.lower() for t in tokens(text))
        assert batch_terms(texts) == want


@pytest.mark.parametrize("select", [None, ["n"]])
def test_records_expired_since_indexed_are_skipped_and_the_limit_still_filled(
        tmp_path: Path, select: list[str] | None) -> None:
    """The first ``limit`` results are read in one engine call; the ones that expired
    are passed over and the next are read one by one (documents/search.py)."""
    now = [1.8e9]  # the store's clock, moved past the TTLs below
    with Database.open(tmp_path / "docs", clock=lambda: now[0]) as d:
        c = d.collection("c")
        short = [c.insert({"id": f"s{i}", "body": "apple pie apple pie", "n": i}, ttl="1h")
                 for i in range(4)]
        long = [c.insert({"id": f"l{i}", "body": f"apple pie and {'more ' * i}", "n": 10 + i})
                for i in range(4)]
        res = c.search("apple pie", limit=3, select_fields=select)
        assert [r["record"]["id"] for r in res["results"]] == short[:3]
        if select is None:
            assert all("ttl" in r["record"] for r in res["results"])
        else:
            assert [sorted(r["record"]) for r in res["results"]] == [["id", "n"]] * 3
        now[0] += 7200
        res = c.search("apple pie", limit=3, select_fields=select)
        assert [r["record"]["id"] for r in res["results"]] == long[:3]
        assert [r["record"]["n"] for r in res["results"]] == [10, 11, 12]
        assert res["total"] == 4  # the eight matches less the four that expired
