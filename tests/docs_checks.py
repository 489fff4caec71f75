"""The checks of the docs' blocks and commands that ``tests/docs_blocks.py`` reads: a ``main`` command's arguments
for ``dry_run``, a CLI's parser reached in this process, the paths of ``pytest``/``bash``/``pip`` lines, and a Python
block run in a fresh module and loaded as a plugin."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import re
import runpy
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from docs_blocks import PLACEHOLDER, REPO, Block, Command

# ---- command lines ---------------------------------------------------------------------------------------------------


def expand_env(argv: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """``$NAME`` / ``${NAME}`` replaced from ``env``; an unknown one is an error naming the marker to add."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in env:
            raise KeyError(f"${name} has no value: add <!-- docs-test: env: {name}=... --> above the block")
        return env[name]

    return [re.sub(r"\$(?:\{(\w+)\}|(\w+))", value, word) for word in argv]


def recipe_gpus(argv: list[str]) -> int | None:
    """The GPUs of the machine a ``+recipe=NAME`` of ``examples/gpu`` expects (its header), None without one."""
    for word in argv:
        if word.startswith("+recipe="):
            header = (REPO / "examples" / "gpu" / "recipe" / f"{word.split('=', 1)[1]}.yaml").read_text()
            found = re.search(r"Expected: 1 node x (\d+) GPUs", header)
            return int(found.group(1)) if found else None
    return None


def main_argv(command: Command, env: dict[str, str]) -> list[str]:
    """The ``python -m verl_parl.main`` command's arguments as the check passes them to ``dry_run``: ``$NAME``
    expanded, ``--dry-run`` dropped; on a GPU machine (the block's ``gpus`` marker, or a recipe's header)
    ``profile=gpu`` unless a profile is named, and the machine's GPUs as ``ray_kwargs.ray_init.num_gpus`` unless they
    are (a command that names ``profile=cpu`` is left as it is)."""
    argv = [word for word in expand_env(command.argv[3:], env) if word != "--dry-run"]  # the check is a dry run
    gpus = recipe_gpus(argv) or command.marker.gpus
    if gpus is not None and "profile=cpu" not in argv:
        if not any(word.startswith("profile=") for word in argv):
            argv.append("profile=gpu")
        if not any(word.lstrip("+").startswith("ray_kwargs.ray_init.num_gpus=") for word in argv):
            argv.append(f"ray_kwargs.ray_init.num_gpus={gpus}")
    return argv


class _Parsed(BaseException):
    """Raised in place of a CLI's own work, once its parser has been reached (not an ``Exception``, so that no
    ``except Exception`` of the CLI swallows it)."""

    def __init__(self, parser: argparse.ArgumentParser, args: list[str], known: bool) -> None:
        super().__init__(parser.prog)
        self.parser, self.args, self.known = parser, args, known


@contextlib.contextmanager
def _parser_reached() -> Iterator[None]:
    """While active, the first ``parse_args``/``parse_known_args`` call raises :class:`_Parsed` with its parser
    and arguments instead of parsing."""
    original_args, original_known = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def parse_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Parsed(self, list(sys.argv[1:] if args is None else args), known=False)

    def parse_known_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Parsed(self, list(sys.argv[1:] if args is None else args), known=True)

    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original_args  # type: ignore[method-assign]
        argparse.ArgumentParser.parse_known_args = original_known  # type: ignore[method-assign]


@contextlib.contextmanager
def _placeholders_read_as_numbers() -> Iterator[None]:
    """An upper-case placeholder given to a numeric option (``--step N``) converts as 1."""
    original = argparse.ArgumentParser._get_value

    def get_value(self: argparse.ArgumentParser, action: argparse.Action, arg_string: str) -> Any:
        if action.type in (int, float) and PLACEHOLDER.match(arg_string):
            return action.type(1)
        return original(self, action, arg_string)

    argparse.ArgumentParser._get_value = get_value  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser._get_value = original  # type: ignore[method-assign]


def reach_parser(command: Command) -> _Parsed:
    """Run the command (``python -m MODULE`` or ``python SCRIPT.py``) in this process until it parses its
    arguments; return its parser and arguments. Raises AssertionError when it never reaches one."""
    if command.argv[1] == "-m":
        module, args = command.argv[2], list(command.argv[3:])
        assert _module_exists(module), f"{command.where}: no module {module} (python -m {module})"
        target: Callable[[], Any] = lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)  # noqa: E731
        program = module
    else:
        script, args = REPO / command.argv[1], list(command.argv[2:])
        assert script.is_file(), f"{command.where}: {command.argv[1]} does not exist"
        target = lambda: runpy.run_path(str(script), run_name="__main__")  # noqa: E731
        program = str(script)
    saved, saved_path = sys.argv, list(sys.path)
    sys.argv = [program, *args]
    if command.argv[1] != "-m":
        sys.path.insert(0, str(script.parent))  # as ``python SCRIPT`` puts its folder first (sibling imports)
    try:
        with _parser_reached(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # runpy's "found in sys.modules" for a module that is imported already
            target()
    except _Parsed as parsed:
        return parsed
    finally:
        sys.argv, sys.path[:] = saved, saved_path
    raise AssertionError(f"{command.describe()}: finished without parsing any arguments")


def _module_exists(module: str) -> bool:
    """``python -m MODULE`` can start: the module, or the package with its ``__main__``."""
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(f"{module}.__main__")
    except ImportError:  # a parent package is missing
        return False
    return spec is not None


def parse_errors(command: Command) -> list[str]:
    """What the command's parser says about it: nothing when it accepts it.

    A command line of a block is parsed whole; an inline mention (``--modes ...`` in a sentence) only has its
    flags checked against the parser's (and its sub-command's)."""
    parsed = reach_parser(command)
    if command.inline:
        return _unknown_flags(parsed.parser, parsed.args)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), _placeholders_read_as_numbers():
            if parsed.known:
                _, extra = argparse.ArgumentParser.parse_known_args(parsed.parser, parsed.args)
            else:
                argparse.ArgumentParser.parse_args(parsed.parser, parsed.args)
                extra = []
    except SystemExit as exc:
        return [f"exit {exc.code}: {stderr.getvalue().strip().splitlines()[-1]}"]
    return [f"not a flag or a key=value override: {word!r}" for word in extra if "=" not in word or word[0] == "-"]


def _unknown_flags(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    known = {option for action in parser._actions for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = next((word for word in args if not word.startswith("-")), None)
            if sub is not None and sub not in action.choices:
                return [f"{sub!r} is not a command of {parser.prog}: {sorted(action.choices)}"]
            if sub is not None:
                known |= {option for a in action.choices[sub]._actions for option in a.option_strings}
    flags = [word.lstrip("([").split("=")[0] for word in args if word.lstrip("([").startswith("--")]
    return [f"{flag} is not a flag of {parser.prog}" for flag in flags if flag not in known]


def pytest_errors(command: Command) -> list[str]:
    """A ``python -m pytest`` line: the paths it names exist and its ``-m`` markers are registered."""
    import tomllib

    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    markers = {line.split(":")[0].split("(")[0].strip() for line in settings["markers"]}
    errors, words = [], list(command.argv[3:])
    for i, word in enumerate(words):
        previous = words[i - 1] if i else ""
        if previous == "-m":
            names = set(re.findall(r"[A-Za-z_]\w*", word)) - {"not", "and", "or"}
            errors += [f"-m {word}: marker {name!r} is not registered" for name in sorted(names - markers)]
        elif not word.startswith("-") and previous not in ("-k", "-p", "-m") and "/" in word:
            path = word.split("::")[0]
            if not (REPO / path).exists():
                errors.append(f"{path} does not exist")
    return errors


def path_errors(command: Command) -> list[str]:
    """``bash SCRIPT ...`` and ``pip install -e PATH``: the script or the folder exists."""
    path = command.argv[1] if command.kind == "bash" else command.argv[3]
    return [] if (REPO / path).exists() else [f"{path} does not exist"]


# ---- python blocks ---------------------------------------------------------------------------------------------


def run_python_block(block: Block) -> dict[str, list[str]]:
    """Run a python block in a fresh module (its marker's ``setup`` first), in the current folder; call its
    ``test_*`` functions; load its ``@hookimpl`` functions as a plugin and call the registration hooks. Returns
    what it registered: registry name -> spec names (empty without hooks)."""
    from verl_parl.host.manager import collect_registries, create_plugin_manager
    from verl_parl.plugin import NAME

    name = "docs_block_" + re.sub(r"\W", "_", block.where)
    module = types.ModuleType(name)
    module.__file__ = str(REPO / block.path)
    sys.modules[name] = module  # dataclasses and pickle look a class's module up
    try:
        if block.marker.setup:
            exec(compile(block.marker.setup, f"{block.where} (setup marker)", "exec"), module.__dict__)
        exec(compile(block.text, block.where, "exec"), module.__dict__)
        for test in [v for k, v in vars(module).items() if k.startswith("test_") and callable(v)]:
            test()
        hooks = [k for k, v in vars(module).items() if callable(v) and hasattr(v, f"{NAME}_impl")]
        if not hooks:
            return {}
        pm = create_plugin_manager(load_entry_points=False, extra_plugins=[module])
        registries = collect_registries(pm)
        registered = {
            field.name: [spec.name for spec in getattr(registries, field.name) if spec.plugin == name]
            for field in dataclasses.fields(registries)
        }
        _check_registered(registries, name)
        return {kind: names for kind, names in registered.items() if names}
    finally:
        sys.modules.pop(name, None)


def _check_registered(registries: Any, plugin: str) -> None:
    """A context policy the block registers keeps the contract (``verl_parl.testing.check_context_policy``)."""
    from verl_parl.testing import check_context_policy

    for spec in registries.context_policies:
        if spec.plugin == plugin:
            check_context_policy(spec.factory())
