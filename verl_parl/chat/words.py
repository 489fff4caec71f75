"""The words of a text as the reward's guard and the swarm's repeat rule compare them: lowercase, accents and
punctuation dropped (``"Shkodër's 2 cafés"`` → ``["shkoder", "s", "2", "cafes"]``)."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["WORD", "words"]

WORD = re.compile(r"[^\W_]+")
"""One word: a run of letters and digits (an underscore separates)."""


def words(text: str) -> list[str]:
    """Lowercase words without accents: ``"Shkodër's 2 cafés"`` → ``["shkoder", "s", "2", "cafes"]``."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return WORD.findall(plain.casefold())
