"""``python -m verl_parl.plugins list [--json]``: every plugin found and what it registered."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from verl_parl.host.manager import (
    BLOCK_PLUGINS_ENV,
    collect_registries,
    create_plugin_manager,
    describe_plugins,
)
from verl_parl.plugin import NAME
from verl_parl.registry import PluginError

__all__ = ["format_plugin_list", "main"]


def _format_plugin(row: dict[str, Any]) -> list[str]:
    if row["source"] == "entry point":
        origin = f"entry point '{row['name']} = {row['target']}', distribution {row['distribution']} {row['version']}"
    elif row["source"] == "builtin":
        origin = f"builtin module {row['target']}"
    else:
        origin = "extra plugin"
    status = f"  [blocked by {BLOCK_PLUGINS_ENV}]" if row["blocked"] else ""
    lines = [f"{row['name']}  ({origin}){status}"]
    for field_name, specs in row["registered"].items():
        lines += [f"    {field_name}: {spec['name']}  {spec['description']}".rstrip() for spec in specs]
    if not row["blocked"] and not any(row["registered"].values()):
        lines.append("    (registers nothing)")
    return lines


def format_plugin_list(rows: list[dict[str, Any]]) -> str:
    """The human-readable output of ``python -m verl_parl.plugins list``."""
    if not rows:
        return f"no verl_parl plugins found (no built-ins, no entry points in group {NAME!r})"
    blocked = sum(row["blocked"] for row in rows)
    lines = [f"{len(rows)} verl_parl plugin(s) found, {blocked} blocked:"]
    for row in rows:
        lines += _format_plugin(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m verl_parl.plugins list [--json]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m verl_parl.plugins", description="Inspect verl_parl plugins.")
    commands = parser.add_subparsers(dest="command", required=True)
    list_cmd = commands.add_parser("list", help="show every plugin found and what it registered")
    list_cmd.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    try:
        pm = create_plugin_manager()
        rows = describe_plugins(pm, collect_registries(pm))
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"plugins": rows}, indent=2) if args.json else format_plugin_list(rows))
    return 0
