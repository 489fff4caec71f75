"""docs/tools.md documents the code sandbox: every option, and no Python example that another test would run."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from verl_parl_sandbox.config import SandboxConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "tools.md"


def sandbox_section() -> str:
    if not DOC.is_file():
        pytest.skip("docs/tools.md is not in this checkout")
    text = DOC.read_text()
    start = text.index("## The code sandbox")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_option_is_documented() -> None:
    section = sandbox_section()
    documented = set(re.findall(r"`([a-z_]+)`", section))
    missing = [f.name for f in dataclasses.fields(SandboxConfig) if f.name not in documented]
    assert missing == []


def test_the_section_has_no_python_block() -> None:
    # the search plugin's docs test executes the page's last ```python block: this section must not add one
    assert "```python" not in sandbox_section()
