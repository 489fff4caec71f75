"""The tantivy engine: building, searching, lookup, and clear errors on bad corpora and missing indexes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from search_corpus import corpus_rows, write_corpus
from verl_parl_search.engine import (
    CorpusError,
    IndexNotFoundError,
    LocalIndex,
    build_index,
    snippet,
    to_query_text,
)


def test_index_holds_every_document(local_index: LocalIndex) -> None:
    assert len(local_index) == len(corpus_rows())
    assert local_index.meta["documents"] == len(corpus_rows())


def test_best_hit_is_the_relevant_document(local_index: LocalIndex) -> None:
    hits = local_index.search("highest mountain Himalayas", 3)
    assert hits[0].docid == "doc-everest"
    assert hits[0].title == "Mount Everest" and hits[0].url == "https://example.org/everest"
    assert hits[0].score > 0 and all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_k_bounds_the_number_of_hits(local_index: LocalIndex) -> None:
    assert len(local_index.search("lorem ipsum", 7)) == 7
    assert local_index.search("zzzunknownword", 5) == []


@pytest.mark.parametrize("query", ['"python', "title:python AND (", "python -- +++ ::", "NOT python OR"])
def test_query_syntax_never_raises(local_index: LocalIndex, query: str) -> None:
    assert local_index.search(query, 3)[0].docid == "doc-python"


def test_query_of_punctuation_only_finds_nothing(local_index: LocalIndex) -> None:
    assert to_query_text("?!:()") == ""
    assert local_index.search("?!:()", 3) == []


def test_get_by_docid(local_index: LocalIndex) -> None:
    hit = local_index.get("doc-coffee")
    assert hit is not None and hit.title == "Coffee" and "roasted" in hit.text
    assert local_index.get("no-such-doc") is None


def test_missing_index_names_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="python -m verl_parl_search build"):
        LocalIndex(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", ":2: not valid JSON"),
        ('{"title": "x", "text": "y"}', ":2: 'docid' must be a non-empty string"),
        ('{"docid": "a2", "text": 5}', ":2: 'text' must be a string (document 'a2')"),
        ('{"docid": "a1", "text": "again"}', ":2: duplicate docid 'a1'"),
        ("[1, 2]", ":2: a document must be a JSON object"),
    ],
)
def test_bad_corpus_line_is_named_and_nothing_is_left(tmp_path: Path, line: str, needle: str) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(json.dumps({"docid": "a1", "text": "fine"}) + "\n" + line + "\n")
    with pytest.raises(CorpusError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        build_index(corpus, tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_integer_docids_and_missing_title_are_accepted(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", [{"docid": 7, "text": "seven samurai"}])  # type: ignore[dict-item]
    build_index(corpus, tmp_path / "idx")
    (hit,) = LocalIndex(tmp_path / "idx").search("samurai", 5)
    assert (hit.docid, hit.title) == ("7", "")


def test_existing_index_needs_overwrite(corpus_path: Path, tmp_path: Path) -> None:
    build_index(corpus_path, tmp_path / "idx")
    with pytest.raises(FileExistsError, match="--overwrite"):
        build_index(corpus_path, tmp_path / "idx")
    small = write_corpus(tmp_path / "small.jsonl", corpus_rows()[:2])
    assert build_index(small, tmp_path / "idx", overwrite=True) == 2
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a verl_parl_search index"):
        build_index(small, tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "precious.txt").exists()


def test_snippet_centres_on_the_query_and_marks_cuts() -> None:
    text = "alpha " * 100 + "needle in the haystack " + "omega " * 100
    piece = snippet(text, "needle", 80)
    assert "needle" in piece and piece.startswith("…") and piece.endswith("…")
    assert len(piece) <= 82
    assert snippet("short text", "x", 80) == "short text"


def test_empty_corpus_builds_an_empty_index(tmp_path: Path) -> None:
    corpus = tmp_path / "empty.jsonl"
    corpus.write_text("\n")
    assert build_index(corpus, tmp_path / "idx") == 0
    index = LocalIndex(tmp_path / "idx")
    assert len(index) == 0 and index.search("anything", 3) == [] and index.get("x") is None


def test_index_of_an_old_format_asks_for_a_rebuild(corpus_path: Path, tmp_path: Path) -> None:
    build_index(corpus_path, tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "verl_parl_search.json").read_text())
    (tmp_path / "idx" / "verl_parl_search.json").write_text(json.dumps({**meta, "format": 1}))
    with pytest.raises(IndexNotFoundError, match="rebuild it with --overwrite"):
        LocalIndex(tmp_path / "idx")


def test_unicode_documents_round_trip(tmp_path: Path) -> None:
    rows = [{"docid": "é-1", "title": "Zürich", "text": "Die größte Stadt der Schweiz 🇨🇭", "url": "u"}]
    build_index(write_corpus(tmp_path / "c.jsonl", rows), tmp_path / "idx")
    (hit,) = LocalIndex(tmp_path / "idx").search("größte", 1)
    assert (hit.docid, hit.title, hit.text) == ("é-1", "Zürich", rows[0]["text"])


def test_separator_characters_in_fields_do_not_break_the_store(tmp_path: Path) -> None:
    rows = [{"docid": "s1", "title": "a\x1fb", "text": "unit\x1fseparator inside", "url": ""}]
    build_index(write_corpus(tmp_path / "c.jsonl", rows), tmp_path / "idx")
    (hit,) = LocalIndex(tmp_path / "idx").search("separator", 1)
    assert (hit.docid, hit.title, hit.text) == ("s1", "a b", "unit separator inside")


def test_hits_of_equal_score_come_back_in_corpus_order_in_every_build(tmp_path: Path) -> None:
    # 400 documents with the same text score the same for any query; a build with several indexing
    # threads spread them over segments by timing, and the tie order changed between builds.
    rows = [{"docid": f"d{i}", "title": "Saint-Denis", "text": "a town of the island", "url": ""} for i in range(400)]
    corpus = write_corpus(tmp_path / "c.jsonl", rows)
    orders = []
    for build in range(3):
        build_index(corpus, tmp_path / f"idx{build}")
        orders.append([hit.docid for hit in LocalIndex(tmp_path / f"idx{build}").search("Saint-Denis", 400)])
    assert orders[0] == orders[1] == orders[2] == [f"d{i}" for i in range(400)]
