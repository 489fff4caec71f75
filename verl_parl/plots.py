"""Plot a run folder: ``python -m verl_parl.plots RUN_DIR``. The command lives in :mod:`verl_parl.cli.plots`."""

from __future__ import annotations

from verl_parl.cli.plots import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
