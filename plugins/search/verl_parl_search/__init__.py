"""verl-parl search plugin: a ``search`` tool over a local tantivy index or a Search-R1 ``/retrieve`` server.

Build an index and query it::

    python -m verl_parl_search build --corpus corpus.jsonl --index ./index
    python -m verl_parl_search query --index ./index -k 3 "first query" "second query"

The ``search`` tool is registered through the ``verl_parl`` entry point (:mod:`verl_parl_search.plugin`).
"""

from __future__ import annotations

__version__ = "0.1.0"
