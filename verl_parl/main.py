"""Train: ``python -m verl_parl.main [overrides...]``. The command lives in :mod:`verl_parl.cli.main`."""

from __future__ import annotations

from verl_parl.cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
