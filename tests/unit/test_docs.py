"""The docs are tested (datasette's habit): every Python block of README.md, docs/*.md and examples/**/README.md runs,
every ``python -m verl_parl.main`` command line in them composes and validates (``verl_parl.cli.dryrun.dry_run``:
nothing built or started), and every other command line of ours is accepted by its argument parser. What is read
and how (placeholders, the ``<!-- docs-test: ... -->`` markers): ``tests/docs_blocks.py``; the checks:
``tests/docs_checks.py``; the samples and stubs the markers name: ``tests/docs_samples.py``.

The last tests plant broken examples and check that the checker fails on them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docs_blocks
import docs_samples
import pytest
from docs_blocks import (
    PYTHON_LANGS,
    REPO,
    Block,
    Command,
    Marker,
    MarkerError,
    block_commands,
    parse_markdown,
    span_commands,
)
from docs_checks import main_argv, parse_errors, path_errors, pytest_errors, run_python_block
from docs_samples import SAMPLES, STUBS

MAX_EXEMPTIONS = 2
"""Blocks a ``skip`` marker may exempt, in all the docs (each with its reason)."""


def collect(paths: list[Path]) -> tuple[list[Block], list[Command]]:
    blocks, commands = [], []
    for path in paths:
        found, spans = parse_markdown((REPO / path).read_text(), str(path))
        blocks += found
        commands += [c for block in found for c in block_commands(block)]
        commands += [c for span in spans for c in span_commands(span)]
    return blocks, commands


BLOCKS, COMMANDS = collect(docs_blocks.doc_files())
PYTHON_BLOCKS = [block for block in BLOCKS if block.lang in PYTHON_LANGS]
MAIN_COMMANDS = [c for c in COMMANDS if c.kind == "main"]
CLI_COMMANDS = [c for c in COMMANDS if c.kind in ("module", "script")]
PATH_COMMANDS = [c for c in COMMANDS if c.kind in ("pytest", "bash", "pip")]


def ids(items: list[Block] | list[Command]) -> list[str]:
    """``file:line`` of each item; a second command on one line gets ``#2``, a third ``#3``."""
    seen: dict[str, int] = {}
    named = []
    for item in items:
        seen[item.where] = seen.get(item.where, 0) + 1
        named.append(item.where if seen[item.where] == 1 else f"{item.where}#{seen[item.where]}")
    return named


# ---- the folder, samples and stubs of a block -------------------------------------------------------------------


@pytest.fixture(scope="session")
def sample() -> Iterator[Callable[[str], Path]]:
    """``sample(name)``: the sample of :data:`docs_samples.SAMPLES`, built once per session."""
    built: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="docs_samples_") as root:

        def get(name: str) -> Path:
            if name not in built:
                path = Path(root) / name
                SAMPLES[name](path)
                built[name] = path
            return built[name]

        yield get


@pytest.fixture
def block_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sample: Callable[[str], Path],
    install_plugin: Callable[[str, dict[str, str]], dict[str, str]],
) -> Callable[[Marker], Path]:
    """``prepare(marker)``: the current folder becomes a mirror of the repository root with the marker's files, its
    stubs installed and its environment set (all undone when the test ends)."""

    def prepare(marker: Marker) -> Path:
        folder = docs_samples.mirror_repository(tmp_path / "root")
        for dest, source in marker.files:
            target = folder / dest
            assert not target.exists() and not target.is_symlink(), f"files marker: {dest} is in the repository"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(sample(source[1:]) if source.startswith("@") else REPO / source)
        for stub in marker.stubs:
            install_plugin(*STUBS[stub])
        for name, value in marker.env:
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(folder)
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a block's temporary folders go with the test's
        return folder

    (tmp_path / "root").mkdir()
    return prepare


# ---- the docs' python blocks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=ids(PYTHON_BLOCKS))
def test_python_block_runs(block: Block, block_folder: Callable[[Marker], Path]) -> None:
    """The block runs in a fresh module; a block of hook implementations loads as a plugin and registers
    something (its specs built for real: a wrong field fails here)."""
    if block.marker.skip:
        pytest.skip(f"exempt ({block.where}): {block.marker.skip}")
    block_folder(block.marker)
    with contextlib.redirect_stdout(io.StringIO()):
        registered = run_python_block(block)
    if "@hookimpl" in block.text and "def verl_parl_register_" in block.text:
        assert registered, f"{block.where}: its registration hooks registered nothing"


# ---- python -m verl_parl.main command lines ---------------------------------------------------------------------

_DRY_RUNS: dict[tuple[Any, ...], list[str]] = {}


def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's CPU backend (the ``hf`` rollout, platform ``cpu``) active in this process, as in a CPU run's driver.

    A dry run sets ``VERL_PLATFORM=cpu`` for a CPU-profile command, which loads the backend only if verl is not
    imported yet: after a GPU-profile command (or another test) imported verl first, a CPU command would be refused
    with "unknown rollout backend 'hf'". So the backend is activated before any dry run (idempotent)."""
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    import verl  # noqa: F401 - its plugin loading, with the CPU platform selected

    from verl_parl.cpu import activate

    activate()


def dry_run_errors(command: Command, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``dry_run``'s errors for the command (in the prepared folder); one dry run per distinct command line, marker
    and environment (the same command in several docs is composed once)."""
    env = dict(os.environ)
    argv = main_argv(command, env)
    key = (tuple(argv), command.env, command.marker.files, command.marker.stubs)
    if key not in _DRY_RUNS:
        from verl_parl.cli.dryrun import dry_run

        cpu_backend(monkeypatch)
        monkeypatch.delenv("VERL_PLATFORM", raising=False)  # a dry run sets it as a run's driver does; restored
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        for name, value in command.env:
            monkeypatch.setenv(name, value)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _DRY_RUNS[key] = list(dry_run(argv).errors)
    return _DRY_RUNS[key]


@pytest.mark.parametrize("command", MAIN_COMMANDS, ids=ids(MAIN_COMMANDS))
def test_main_command_composes_and_validates(
    command: Command, block_folder: Callable[[Marker], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if command.marker.skip:
        pytest.skip(f"exempt ({command.where}): {command.marker.skip}")
    block_folder(command.marker)
    errors = dry_run_errors(command, monkeypatch)
    assert not errors, f"{command.describe()}\n  dry run: " + "\n  ".join(errors)


# ---- the other command lines ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=ids(CLI_COMMANDS))
def test_cli_command_is_accepted_by_its_parser(
    command: Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m <ours> ...`` / ``python scripts/x.py ...`` exists, reaches its parser (in this process, in an empty
    folder) and the parser accepts the command line (an inline mention: its flags)."""
    if command.marker.skip:
        pytest.skip(f"exempt ({command.where}): {command.marker.skip}")
    monkeypatch.chdir(tmp_path)
    errors = parse_errors(command)
    assert not errors, f"{command.describe()}: {errors}"


@pytest.mark.parametrize("command", PATH_COMMANDS, ids=ids(PATH_COMMANDS))
def test_pytest_bash_and_pip_lines_name_what_exists(command: Command) -> None:
    errors = pytest_errors(command) if command.kind == "pytest" else path_errors(command)
    assert not errors, f"{command.describe()}: {errors}"


# ---- what was found -----------------------------------------------------------------------------------------------


def test_the_docs_hold_what_the_checks_expect() -> None:
    """The reader finds the docs' blocks and commands (a broken reader would pass every check above by finding
    nothing), your_task.md included once it is written."""
    paths = {str(p) for p in docs_blocks.doc_files()}
    assert {"README.md", "docs/plugins.md", "docs/tasks.md", "examples/gpu/README.md"} <= paths
    assert not any(p.startswith("docs/experiments/") for p in paths)
    assert (REPO / "docs" / "your_task.md").exists() == ("docs/your_task.md" in paths)
    assert len(PYTHON_BLOCKS) >= 8 and len(MAIN_COMMANDS) >= 30 and len(CLI_COMMANDS) >= 40
    assert any(not c.inline for c in MAIN_COMMANDS) and any(c.inline for c in MAIN_COMMANDS)


def test_exemptions_are_few_and_each_says_why() -> None:
    exempt = [item for item in [*BLOCKS, *COMMANDS] if item.marker.skip]
    blocks = {(item.path, item.marker) for item in exempt}
    assert len(blocks) <= MAX_EXEMPTIONS, "exempted: " + ", ".join(f"{i.where} ({i.marker.skip})" for i in exempt)
    assert all(item.marker.skip.strip() for item in exempt)


# ---- the checker itself ---------------------------------------------------------------------------------------------

BROKEN_DOC = """\
# A page

Text with a mention: `python -m verl_parl.plots RUN_DIR --no-such-flag`.

```python
from verl_parl.registry import ToolSpec

ToolSpec(name="echo", factory=print, no_such_field=1)
```

```python
from pathlib import Path

from verl_parl.plugin import hookimpl
from verl_parl.registry import TaskSpec


@hookimpl
def verl_parl_register_tasks(register):
    register(TaskSpec(name="mine", factory=lambda d, s: {}, scorer="table", defaults={"a": 1}))
```

```bash
python -m verl_parl.main embedded=arithmetic parl.no_such_key=1 \\
    trainer.total_training_steps=2
python -m verl_parl.data.widesearch convert --tasks t.jsonl --out x  # --gold-dir is required
```
"""


def test_the_checker_fails_a_python_block_that_raises() -> None:
    blocks, _ = parse_markdown(BROKEN_DOC, "planted.md")
    with pytest.raises(TypeError, match="no_such_field"):
        run_python_block(blocks[0])


def test_the_checker_builds_the_specs_a_hook_registers() -> None:
    """The hook's TaskSpec is built when the block loads as a plugin: ``defaults=`` (a field TaskSpec never had)
    fails, as docs/tasks.md's example did."""
    blocks, _ = parse_markdown(BROKEN_DOC, "planted.md")
    with pytest.raises(TypeError, match="defaults"):
        run_python_block(blocks[1])


def test_the_checker_fails_an_invalid_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocks, _ = parse_markdown(BROKEN_DOC, "planted.md")
    first, second = block_commands(blocks[2])
    assert first.kind == "main" and first.line == 24 and first.argv[-1] == "trainer.total_training_steps=2"
    monkeypatch.chdir(tmp_path)
    errors = dry_run_errors(first, monkeypatch)
    assert errors and errors[0].startswith("parl.no_such_key"), errors
    assert second.kind == "module" and parse_errors(second) == [
        "exit 2: python -m verl_parl.data.widesearch convert: error: the following arguments are required: --gold-dir"
    ]


def test_the_checker_fails_an_unknown_flag_in_a_mention_and_a_missing_module() -> None:
    _, spans = parse_markdown(BROKEN_DOC, "planted.md")
    (mention,) = [c for span in spans for c in span_commands(span)]
    assert mention.inline and mention.line == 3
    assert parse_errors(mention) == ["--no-such-flag is not a flag of python -m verl_parl.plots"]
    missing = Command("m.md", 7, ("python", "-m", "verl_parl.no_such_cli", "x"), (), Marker(), inline=True)
    with pytest.raises(AssertionError, match=r"no module verl_parl\.no_such_cli"):
        parse_errors(missing)


def test_markers_must_be_known_and_a_skip_must_say_why() -> None:
    with pytest.raises(MarkerError, match="unknown marker key 'skipp'"):
        parse_markdown("<!-- docs-test: skipp: x -->\n```python\npass\n```\n", "m.md")
    with pytest.raises(MarkerError, match="must say why"):
        parse_markdown("<!-- docs-test: skip: -->\n```python\npass\n```\n", "m.md")
    with pytest.raises(MarkerError, match="unknown sample"):
        parse_markdown("<!-- docs-test: files: a=@nothing -->\n```bash\nls\n```\n", "m.md")
    (block,), _ = parse_markdown(
        "<!-- docs-test: setup: x = 1 -->\n\n<!-- docs-test: skip: needs a GPU -->\n```python\nassert x\n```\n", "m.md"
    )
    assert block.marker == Marker(setup="x = 1", skip="needs a GPU") and block.line == 4


def test_placeholders_and_shell_syntax_are_read_by_the_rules() -> None:
    doc = """\
```console
$ FOO=1 python -m verl_parl.score --scorer widesearch --answers A.jsonl [--align] [MORE.jsonl …] ...
output line
```

```bash
bash scripts/install.sh && python -m verl_parl.main parl.researcher.tools=[search] [more overrides]  # comment
python -m verl_parl.data.widesearch convert --tasks t.jsonl --gold-dir g \\
    --out d [--val 20 --seed 0] > log.txt 2>&1
```

```
python -m verl_parl.traces view RUN_DIR [--step N]
error: not a command
```
"""
    blocks, _ = parse_markdown(doc, "m.md")
    commands = [c for block in blocks for c in block_commands(block)]
    assert [(c.line, c.env, shlex.join(c.argv)) for c in commands] == [
        (2, (("FOO", "1"),), "python -m verl_parl.score --scorer widesearch --answers A.jsonl --align"),
        (7, (), "bash scripts/install.sh"),
        (7, (), "python -m verl_parl.main 'parl.researcher.tools=[search]'"),
        (8, (), "python -m verl_parl.data.widesearch convert --tasks t.jsonl --gold-dir g --out d --val 20 --seed 0"),
        (13, (), "python -m verl_parl.traces view RUN_DIR --step N"),
    ]
    assert [c.kind for c in commands] == ["module", "bash", "main", "module", "module"]
    assert parse_errors(commands[-1]) == []  # N is read as a number by --step


def test_gpu_commands_are_checked_on_the_machine_they_expect() -> None:
    recipe = Command(
        "m.md",
        1,
        ("python", "-m", "verl_parl.main", "--config-dir", "examples/gpu", "+recipe=qwen3_vllm_swarm"),
        (),
        Marker(),
        inline=False,
    )
    assert main_argv(recipe, {}) == [
        "--config-dir",
        "examples/gpu",
        "+recipe=qwen3_vllm_swarm",
        "profile=gpu",
        "ray_kwargs.ray_init.num_gpus=8",
    ]
    marked = Command("m.md", 1, ("python", "-m", "verl_parl.main", "profile=cpu", "x=$X"), (), Marker(gpus=2), False)
    assert main_argv(marked, {"X": "1"}) == ["profile=cpu", "x=1"]
    with pytest.raises(KeyError, match="docs-test: env: Y="):
        main_argv(Command("m.md", 1, ("python", "-m", "verl_parl.main", "y=$Y"), (), Marker(), False), {})
