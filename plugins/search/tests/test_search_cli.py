"""The real command line: ``python -m verl_parl_search build`` then ``query``, and its error exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from search_corpus import corpus_rows, write_corpus


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "verl_parl_search", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_build_then_query_prints_json_hits(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", corpus_rows())
    built = cli("build", "--corpus", str(corpus), "--index", str(tmp_path / "idx"))
    assert built.returncode == 0, built.stderr
    assert f"indexed {len(corpus_rows())} documents" in built.stdout
    assert "indexing" in built.stderr  # the progress bar
    queried = cli("query", "--index", str(tmp_path / "idx"), "-k", "2", "coffee beans", "Mount Everest")
    assert queried.returncode == 0, queried.stderr
    results = json.loads(queried.stdout)["results"]
    assert [r["query"] for r in results] == ["coffee beans", "Mount Everest"]
    top = results[0]["hits"][0]
    assert top["docid"] == "doc-coffee" and top["title"] == "Coffee" and top["score"] > 0
    assert top["url"] == "https://example.org/coffee" and "roasted coffee beans" in top["snippet"]
    assert results[1]["hits"][0]["docid"] == "doc-everest"


def test_errors_exit_2_with_a_message(tmp_path: Path) -> None:
    missing = cli("query", "--index", str(tmp_path / "none"), "x")
    assert missing.returncode == 2 and "error: no search index" in missing.stderr
    bad_k = cli("query", "--index", str(tmp_path / "none"), "-k", "0", "x")
    assert bad_k.returncode == 2 and "-k must be between 1 and 1000" in bad_k.stderr
    no_corpus = cli("build", "--corpus", str(tmp_path / "nope.jsonl"), "--index", str(tmp_path / "i"))
    assert no_corpus.returncode == 2 and "does not exist" in no_corpus.stderr
    (tmp_path / "bad.jsonl").write_text('{"docid": "a"}\n')
    bad = cli("build", "--corpus", str(tmp_path / "bad.jsonl"), "--index", str(tmp_path / "i"), "--no-progress")
    assert bad.returncode == 2 and "bad.jsonl:1: 'text' must be a string" in bad.stderr
