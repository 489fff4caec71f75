"""Score answers: ``python -m verl_parl.score --help``. The command lives in :mod:`verl_parl.cli.score`."""

from __future__ import annotations

from verl_parl.cli.score import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
