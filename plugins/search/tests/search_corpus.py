"""The search plugin tests' small corpus (a module with a unique name, importable from every test file)."""

from __future__ import annotations

import json
from pathlib import Path

TOPICS = {
    "volcano": ("Volcanoes of Iceland", "Eyjafjallajokull erupted in 2010 and grounded flights across Europe."),
    "python": ("The Python language", "Python is a programming language created by Guido van Rossum in 1991."),
    "tantivy": ("Tantivy search engine", "Tantivy is a full-text search engine library written in Rust."),
    "everest": ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    "coffee": ("Coffee", "Coffee is a beverage brewed from roasted coffee beans of the Coffea plant."),
}


def corpus_rows() -> list[dict[str, str]]:
    rows = [
        {"docid": f"doc-{key}", "title": title, "text": text, "url": f"https://example.org/{key}"}
        for key, (title, text) in TOPICS.items()
    ]
    filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor"
    rows += [{"docid": f"filler-{i}", "title": f"Filler {i}", "text": f"{filler} {i}"} for i in range(40)]
    return rows


def write_corpus(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
