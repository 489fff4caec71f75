"""Evaluate a checkpoint: ``python -m verl_parl.evaluate --help``.

The command lives in :mod:`verl_parl.cli.evaluate`.
"""

from __future__ import annotations

from verl_parl.cli.evaluate import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
