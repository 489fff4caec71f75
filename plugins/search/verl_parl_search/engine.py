"""The local engine: a tantivy BM25 index over a JSONL corpus of ``{"docid", "title", "text", "url"}`` rows.

Layout of an index directory:

* tantivy's files. Schema: ``docid`` (raw: exact lookup), ``body`` (title and text, tokenized, not
  stored: one field to search is ~2.5x faster than two) and ``ord`` (the document's ordinal, an i64
  fast field). No unsigned-int fields: feeding Python ints to tantivy's unsigned fields killed the
  writer (see TOOLS.md);
* ``docs.bin`` + ``docs.offsets.npy``: the documents as UTF-8 ``docid␟title␟text␟url`` records (␟ is
  the unit separator 0x1F, replaced by a space inside fields) and the byte offset of each, read
  through ``mmap``: a document costs ~2 µs to fetch, where tantivy's compressed doc store costs ~20 µs
  and a JSON line ~10 µs;
* ``verl_parl_search.json``, which marks the directory as ours and records the corpus it came from.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

META_FILE = "verl_parl_search.json"
DOCS_FILE = "docs.bin"
_SEP = "\x1f"
OFFSETS_FILE = "docs.offsets.npy"
FORMAT = 3
SEARCH_FIELDS = ["body"]
_QUERY_SYNTAX = re.compile(r"[^\w\s]+")
_WORD = re.compile(r"\w+")


class CorpusError(ValueError):
    """A corpus line is not a valid document; the message names the file and line."""


class IndexNotFoundError(FileNotFoundError):
    """The index directory is missing or was not built by ``python -m verl_parl_search build``."""


@dataclasses.dataclass(frozen=True)
class Document:
    docid: str
    title: str
    text: str
    url: str = ""


@dataclasses.dataclass(frozen=True)
class Hit:
    """One search result; ``text`` is the whole stored text (the tool shows a snippet of it)."""

    docid: str
    title: str
    text: str
    score: float
    url: str = ""

    def as_json(self, snippet_chars: int, query: str = "") -> dict[str, Any]:
        return {
            "docid": self.docid,
            "title": self.title,
            "score": round(self.score, 4),
            "url": self.url,
            "snippet": snippet(self.text, query, snippet_chars),
        }


def parse_document(line: str, where: str) -> Document:
    """One JSONL line → :class:`Document`; ``docid`` and ``text`` required, ``title``/``url`` optional."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: a document must be a JSON object")
    docid = row.get("docid", row.get("id"))
    if isinstance(docid, int) and not isinstance(docid, bool):
        docid = str(docid)
    if not isinstance(docid, str) or not docid:
        raise CorpusError(f"{where}: 'docid' must be a non-empty string")
    text = row.get("text", row.get("contents"))
    if not isinstance(text, str):
        raise CorpusError(f"{where}: 'text' must be a string (document {docid!r})")
    title, url = row.get("title") or "", row.get("url") or ""
    if not isinstance(title, str) or not isinstance(url, str):
        raise CorpusError(f"{where}: 'title' and 'url' must be strings (document {docid!r})")
    return Document(docid, title, text, url)


def read_corpus(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[Document]:
    """Documents of a JSONL corpus, in order; blank lines skipped; duplicate docids are an error."""
    if not path.is_file():
        raise CorpusError(f"corpus file {str(path)!r} does not exist")
    seen: set[str] = set()
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if on_bytes is not None:
                on_bytes(len(raw))
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            doc = parse_document(line, f"{path}:{number}")
            if doc.docid in seen:
                raise CorpusError(f"{path}:{number}: duplicate docid {doc.docid!r}")
            seen.add(doc.docid)
            yield doc


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("docid", tokenizer_name="raw")
    builder.add_text_field("body", index_option="freq")
    builder.add_integer_field("ord", fast=True)
    return builder.build()


def build_index(
    corpus: Path,
    index_dir: Path,
    *,
    overwrite: bool = False,
    heap_mb: int = 256,
    on_bytes: Callable[[int], None] | None = None,
) -> int:
    """Index ``corpus`` into ``index_dir``; returns the number of documents.

    Raises ``FileExistsError`` when ``index_dir`` is not empty (unless ``overwrite``) and
    :class:`CorpusError` on a bad corpus line (nothing is left half-built in that case).
    """
    import tantivy

    _prepare_dir(index_dir, overwrite)
    index = tantivy.Index(_schema(), path=str(index_dir))
    # One indexing thread: with several, documents land in segments by timing, and hits of equal score
    # come back in a different order from one build of the same corpus to the next.
    writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=1)
    try:
        count = _write_documents(writer, read_corpus(corpus, on_bytes), index_dir)
        writer.commit()
        writer.wait_merging_threads()
    except BaseException:
        writer.rollback()
        del writer, index  # release tantivy's files and lock before removing the half-built index
        shutil.rmtree(index_dir, ignore_errors=True)
        raise
    meta = {"engine": "tantivy", "documents": count, "corpus": str(corpus.resolve()), "format": FORMAT}
    (index_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return count


def _write_documents(writer: Any, docs: Iterator[Document], index_dir: Path) -> int:
    import numpy as np
    import tantivy

    offsets = [0]
    with (index_dir / DOCS_FILE).open("wb") as store:
        for ordinal, doc in enumerate(docs):
            body = f"{doc.title}\n{doc.text}"
            writer.add_document(tantivy.Document(docid=doc.docid, body=body, ord=ordinal))
            fields = (doc.docid, doc.title, doc.text, doc.url)
            line = _SEP.join(field.replace(_SEP, " ") for field in fields).encode()
            store.write(line)
            offsets.append(offsets[-1] + len(line))
    np.save(index_dir / OFFSETS_FILE, np.asarray(offsets, dtype=np.int64))
    return len(offsets) - 1


def _prepare_dir(index_dir: Path, overwrite: bool) -> None:
    if index_dir.exists() and any(index_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"index directory {str(index_dir)!r} is not empty (use --overwrite to replace it)")
        if not (index_dir / META_FILE).exists():
            raise FileExistsError(f"refusing to overwrite {str(index_dir)!r}: it is not a verl_parl_search index")
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)


def to_query_text(query: str) -> str:
    """The query as plain words: tantivy query syntax (quotes, colons, +/-, AND/OR) is neutralised."""
    return _QUERY_SYNTAX.sub(" ", query).lower().strip()


def snippet(text: str, query: str, max_chars: int) -> str:
    """About ``max_chars`` of ``text`` around the first query word found (the start when none is)."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    lowered = flat.lower()
    positions = [lowered.find(w) for w in _WORD.findall(query.lower()) if len(w) > 2]
    first = min((p for p in positions if p >= 0), default=0)
    start = max(0, first - max_chars // 4)
    if start:
        start = flat.find(" ", start) + 1 or start
    piece = flat[start : start + max_chars].rsplit(" ", 1)[0] if start + max_chars < len(flat) else flat[start:]
    return ("…" if start else "") + piece + ("…" if start + len(piece) < len(flat) else "")


class LocalIndex:
    """A built index opened for search; thread-safe for concurrent searches."""

    def __init__(self, index_dir: Path | str) -> None:
        import tantivy

        self.path = Path(index_dir)
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise IndexNotFoundError(
                f"no search index at {str(self.path)!r}; build one with "
                f"`python -m verl_parl_search build --corpus CORPUS.jsonl --index {self.path}`"
            )
        self.meta = json.loads(meta_path.read_text())
        if self.meta.get("format") != FORMAT:
            raise IndexNotFoundError(f"index at {str(self.path)!r} has an old format; rebuild it with --overwrite")
        self._index = tantivy.Index.open(str(self.path))
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self._store = DocStore(self.path)

    def __len__(self) -> int:
        return int(self._searcher.num_docs)

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best BM25 hits of ``query`` over title and text (``[]`` for a query of no words)."""
        return [self._store.hit(ordinal, score) for score, ordinal in self.rank(query, k)]

    def rank(self, query: str, k: int) -> list[tuple[float, int]]:
        """``(score, document ordinal)`` of the ``k`` best hits, without fetching the documents."""
        words = to_query_text(query)
        if not words:
            return []
        parsed, _errors = self._index.parse_query_lenient(words, SEARCH_FIELDS)
        hits = self._searcher.search(parsed, k, count=False).hits
        ordinals = self._searcher.fast_field_values("ord", [address for _, address in hits])
        return [(float(score), int(ordinal)) for (score, _), ordinal in zip(hits, ordinals, strict=True)]

    def get(self, docid: str) -> Hit | None:
        """The document stored as ``docid`` (score 0), or None."""
        import tantivy

        query = tantivy.Query.term_query(self._schema, "docid", docid)
        hits = self._searcher.search(query, 1, count=False).hits
        if not hits:
            return None
        (ordinal,) = self._searcher.fast_field_values("ord", [hits[0][1]])
        return self._store.hit(ordinal, 0.0)


class DocStore:
    """The documents of an index by ordinal, read from ``docs.bin`` through mmap (thread-safe)."""

    def __init__(self, index_dir: Path) -> None:
        import mmap

        import numpy as np

        self._offsets = np.load(index_dir / OFFSETS_FILE)  # 8 bytes a document, in memory: fast indexing
        with (index_dir / DOCS_FILE).open("rb") as stream:
            size = stream.seek(0, 2)
            self._data = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def hit(self, ordinal: int, score: float) -> Hit:
        start, end = self._offsets[ordinal : ordinal + 2].tolist()
        docid, title, text, url = self._data[start:end].decode().split(_SEP)
        return Hit(docid, title, text, float(score), url)


class LocalIndexer:
    """The ``search`` tool's indexer (``ToolSpec.indexer``, verl-parl's ``CorpusIndexer`` protocol): how a task
    builds and opens a local index of its corpus without importing this plugin."""

    def build(self, corpus: Path, index_dir: Path, *, on_bytes: Callable[[int], None] | None = None) -> int:
        """:func:`build_index` over what ``index_dir`` holds."""
        return build_index(Path(corpus), Path(index_dir), overwrite=True, on_bytes=on_bytes)

    def is_built(self, index_dir: Path) -> bool:
        return (Path(index_dir) / META_FILE).is_file()

    def open(self, index_dir: Path) -> LocalIndex:
        return LocalIndex(index_dir)


INDEXER = LocalIndexer()
