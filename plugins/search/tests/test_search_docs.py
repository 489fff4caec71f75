"""The runnable example of docs/tools.md runs and prints what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "tools.md"


def test_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    if not DOC.is_file():
        pytest.skip("docs/tools.md is not in this checkout")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    (example,) = [block for block in blocks if "Mount Everest" in block]  # the search tool's own example
    exec(compile(example, str(DOC), "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    assert "[1] Mount Everest (docid: everest, score:" in out
    assert "[2] Coffee (docid: coffee" in out
    assert "error: invalid arguments for search: missing required argument 'queries'" in out
