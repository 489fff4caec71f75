"""Command line for the offline models.

``python -m verl_parl.models build [--cache-dir DIR] [--hidden-size N ...]`` builds the tiny Qwen2 model
(or finds it in the cache) and prints its folder on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from verl_parl.models.tiny import TinyModelSpec, build_tiny_model


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.models", description="Offline models for verl-parl.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the tiny Qwen2 model (cached) and print its folder")
    build.add_argument(
        "--cache-dir", type=Path, default=None, help="default: $VERL_PARL_CACHE or ~/.cache/verl_parl/models"
    )
    build.add_argument("--quiet", action="store_true", help="no progress output")
    for field in dataclasses.fields(TinyModelSpec):
        flag = "--" + field.name.replace("_", "-")
        build.add_argument(flag, type=int, default=field.default, help=f"default: {field.default}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        spec = TinyModelSpec(**{field.name: getattr(args, field.name) for field in dataclasses.fields(TinyModelSpec)})
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    path = build_tiny_model(spec, args.cache_dir, progress=not args.quiet)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
