"""Generate the research suite or pass@N-filter a dataset: ``python -m verl_parl.research --help``. The command
lives in :mod:`verl_parl.cli.research`."""

from __future__ import annotations

from verl_parl.cli.research import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
