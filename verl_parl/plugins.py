"""List plugins: ``python -m verl_parl.plugins list [--json]``. The command lives in :mod:`verl_parl.cli.plugins`."""

from __future__ import annotations

from verl_parl.cli.plugins import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
