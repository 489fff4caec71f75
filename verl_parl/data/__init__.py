"""Converters of released datasets into verl rows (``widesearch``), and the system prompts of their rows by agent
loop, so that :mod:`verl_parl.cli.evaluate` can run one dataset in every mode."""

from __future__ import annotations

from collections.abc import Mapping


def converted_prompts() -> dict[str, Mapping[str, str]]:
    """``data_source`` -> agent loop -> system prompt, for the rows the converters here write."""
    from verl_parl.data import widesearch

    return {widesearch.DATA_SOURCE: widesearch.SYSTEM_PROMPTS}
