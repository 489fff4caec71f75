"""``python -m verl_parl.tasks.research``: the command lives in :mod:`verl_parl.cli.research`."""

from __future__ import annotations

from verl_parl.cli.research import main

if __name__ == "__main__":
    raise SystemExit(main())
