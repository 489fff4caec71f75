"""Fixtures of the search plugin's tests: a small corpus and its index, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_corpus import corpus_rows, write_corpus
from verl_parl_search.engine import LocalIndex, build_index


@pytest.fixture(scope="session")
def corpus_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", corpus_rows())


@pytest.fixture(scope="session")
def index_dir(corpus_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("index") / "idx"
    build_index(corpus_path, directory)
    return directory


@pytest.fixture(scope="session")
def local_index(index_dir: Path) -> LocalIndex:
    return LocalIndex(index_dir)
