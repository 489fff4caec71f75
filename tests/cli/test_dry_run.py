"""``python -m verl_parl.main --dry-run`` and ``verl_parl.cli.dryrun.dry_run``: the run's config checked as a run checks
it, each value shown with its source, and nothing built, started or written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import yaml
from omegaconf import OmegaConf

from verl_parl.cli.dryrun import PLACEHOLDER, DryRun, dry_run, format_dry_run
from verl_parl.testing.environ import child_environ

REPO = Path(__file__).resolve().parents[2]
RAY_PROCESSES = ("raylet", "gcs_server", "ray::")
MARKER = "VERL_PARL_DRY_RUN_TEST"


def run_dry(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """``python -m verl_parl.main --dry-run <overrides>`` in ``tmp_path`` (its own asset cache there), with a marker
    in its environment that every process it starts inherits; returns the result and the marker."""
    marker = uuid.uuid4().hex
    environ = child_environ({"VERL_PARL_CACHE": str(tmp_path / "cache"), MARKER: marker})
    command = [sys.executable, "-m", "verl_parl.main", "--dry-run", *overrides]
    result = subprocess.run(
        command, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300, check=False
    )
    return result, marker


def processes_with(marker: str) -> list[str]:
    """The live processes whose environment holds ``marker`` (those a test's child started, and theirs)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if process.environ().get(MARKER) == marker:
                found.append(" ".join(process.info["cmdline"] or [process.info["name"] or "?"]))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def parse_lines(stdout: str) -> dict[str, tuple[object, str]]:
    """The dry run's ``key: value  # source`` lines -> {key: (value, source)} (each value one line of YAML)."""
    table = {}
    for line in stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        entry, _, source = line.rpartition("  # ")
        key, _, value = entry.partition(": ")
        table[key] = (yaml.safe_load(value), source)
    return table


def test_dry_run_prints_each_value_with_its_source_and_builds_starts_and_writes_nothing(tmp_path: Path) -> None:
    """The default command (the demo's fanpages task, the CPU profile here) plus one override: the values on stdout
    with their sources, exit 0; no asset built, no run folder, no process left, Ray never started."""
    result, marker = run_dry(tmp_path, "trainer.total_training_steps=3")

    assert result.returncode == 0, result.stderr[-3000:]
    table = parse_lines(result.stdout)
    assert yaml.safe_load(result.stdout) == {key: value for key, (value, _) in table.items()}  # valid YAML
    assert table["parl.critical_steps_budget"] == (10, "task fanpages (embedded/fanpages.yaml)")
    assert table["data.train_batch_size"] == (4, "task fanpages (demo/tiny.yaml)")
    assert table["actor_rollout_ref.rollout.name"] == ("hf", "profile cpu")
    assert table["trainer.total_training_steps"] == (3, "command line")
    assert table["algorithm.adv_estimator"] == ("grpo", "base")
    assert table["actor_rollout_ref.actor.optim.optimizer"] == ("AdamW", "verl")
    assert table["actor_rollout_ref.model.path"] == (
        PLACEHOLDER.format(name="coldstart_model"),
        "task fanpages (demo/tiny.yaml)",
    )
    assert all(source for _, source in table.values())
    assert "nothing was built or started" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run folder (outputs/...), no cache, no asset
    assert not any(name in p for p in processes_with(marker) for name in RAY_PROCESSES)
    assert "Started a local Ray instance" not in result.stdout + result.stderr


def test_an_invalid_override_exits_2_naming_the_key(tmp_path: Path) -> None:
    result, _ = run_dry(tmp_path, "trainer.total_trainig_steps=3", f"parl.output_dir={tmp_path / 'run'}")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "trainer.total_trainig_steps" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "run").exists()


def test_help_mentions_the_dry_run() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "verl_parl.main", "--help"],
        env=child_environ(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--dry-run" in result.stdout


# ---- in process, as doc tests call it


def ray_descendants() -> list[str]:
    """Ray's processes this process started itself (``ray.init`` starts them as its children). Not deeper: the
    suite's shared runs, started beside this test, are children of this process with Ray clusters of their own."""
    return [
        " ".join(p.cmdline())
        for p in psutil.Process().children(recursive=False)
        if any(name in " ".join(p.cmdline()) for name in RAY_PROCESSES)
    ]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERL_PARL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VERL_PLATFORM", raising=False)  # a dry run sets it as a run's driver does: restored after
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(tmp_path)  # a run folder would be outputs/<now> here
    return tmp_path / "cache"


def test_dry_run_in_process_is_re_entrant_and_leaves_the_process_as_it_found_it(cache: Path) -> None:
    from hydra.core.global_hydra import GlobalHydra

    from verl_parl.cli import assets

    first = dry_run([])
    second = dry_run(["embedded=arithmetic", "parl.critical_steps_budget=7"])
    third = dry_run(["--dry-run"])  # the command's own flag, as a doc's command line has it

    assert isinstance(first, DryRun) and first.ok and first.exit_code == 0, first.errors
    assert (first.task, first.profile) == ("fanpages", "cpu")
    assert first.sources == third.sources
    assert first.sources["parl.critical_steps_budget"] == "task fanpages (embedded/fanpages.yaml)"
    assert second.ok, second.errors
    assert second.sources["parl.critical_steps_budget"] == "command line"
    assert second.config.parl.critical_steps_budget == 7
    assert second.sources["parl.embedded.task"] == "task arithmetic (embedded/arithmetic.yaml)"
    assert OmegaConf.is_config(first.config) and not OmegaConf.is_missing(first.config.parl, "output_dir")
    assert first.config.data.train_files == PLACEHOLDER.format(name="embedded_train")
    assert format_dry_run(first).count("\n") == len(first.sources) + 1
    assert not GlobalHydra.instance().is_initialized()
    # the real resolver is back: without building, an asset is None, not a placeholder
    with assets.building(False):
        assert OmegaConf.create({"m": "${parl_asset:coldstart_model}"}).m is None
    assert not cache.exists() and not Path("outputs").exists()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert ray_descendants() == []


def test_a_dry_run_reports_every_config_error_at_once(cache: Path) -> None:
    result = dry_run(["parl.embedded.n_train=0", "data.train_batch_size=6", "actor_rollout_ref.rollout.name=vlm"])
    assert result.exit_code == 2
    for key in (
        "parl.embedded.n_train",
        "actor_rollout_ref.actor.ppo_mini_batch_size: 4 does not divide data.train_batch_size=6",
        "actor_rollout_ref.rollout.name: unknown rollout backend 'vlm' (did you mean 'vllm'?)",
    ):
        assert any(error.startswith(key) for error in result.errors), (key, result.errors)
    assert not cache.exists()


def test_a_recipe_in_a_config_dir_is_the_command_lines(cache: Path, tmp_path: Path) -> None:
    """``--config-dir DIR +recipe=NAME`` as in a run (examples/gpu's recipes): the recipe's values are the command
    line's, the task's stay the task's."""
    recipes = tmp_path / "recipes" / "recipe"
    recipes.mkdir(parents=True)
    (recipes / "short.yaml").write_text("# @package _global_\ntrainer:\n  total_training_steps: 5\n")

    result = dry_run(["--config-dir", str(recipes.parent), "+recipe=short", "embedded=arithmetic"])

    assert result.ok, result.errors
    assert result.config.trainer.total_training_steps == 5
    assert result.sources["trainer.total_training_steps"] == "command line"
    assert result.sources["parl.critical_steps_budget"] == "task arithmetic (demo/tiny.yaml)"
    missing = dry_run(["--config-dir", str(tmp_path / "nowhere"), "-m", "embedded=arithmetic"])
    assert missing.exit_code == 2
    assert [error.split(":", 1)[0] for error in missing.errors] == ["-m", "--config-dir"]


# ---- the documented WideSearch training command (docs/tasks.md, "Training on it")


def documented_widesearch_command() -> list[str]:
    """The overrides of the ``python -m verl_parl.main`` command in the first bash block after docs/tasks.md's
    "Training on it"."""
    text = (REPO / "docs" / "tasks.md").read_text()
    block = re.search(r"Training on it\b.*?```bash\n(.*?)```", text, re.S)
    assert block, "docs/tasks.md: no bash block after 'Training on it'"
    commands = block.group(1).replace("\\\n", " ")
    line = next(line for line in commands.splitlines() if line.strip().startswith("python -m verl_parl.main"))
    return shlex.split(line)[3:]


SHIPPED_MODEL = REPO / "plugins" / "demo" / "verl_parl_demo" / "modelbuild" / "weights" / "coldstart-research"
"""A Hugging Face folder for the command's ``MODEL`` (the docs' own test takes the same)."""

WEB_SEARCH_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import ToolSpec


class WebSearch:
    schema = {"type": "function", "function": {"name": "web_search", "description": "search", "parameters": {}}}

    async def run(self, arguments):
        return ""


@hookimpl
def verl_parl_register_tools(register):
    register(ToolSpec(name="web_search", factory=WebSearch, description="the web search a plugin registers"))
"""


@pytest.fixture
def widesearch_command(
    tmp_path: Path, cache: Path, install_plugin: Callable[[str, dict[str, str]], dict[str, str]]
) -> list[str]:
    """The documented command on the converted sample (tests/data/widesearch), its placeholders filled: the rows,
    the tool config, the ``web_search`` tool a plugin registers, and the model."""
    from verl_parl.data.widesearch.__main__ import main as widesearch

    sample = REPO / "tests" / "data" / "widesearch"
    rows = tmp_path / "data" / "widesearch"
    argv = ["convert", "--tasks", str(sample / "widesearch.jsonl"), "--gold-dir", str(sample / "widesearch_gold")]
    assert widesearch([*argv, "--out", str(rows), "--val", "1"]) == 0
    tools = tmp_path / "WEB_TOOLS.yaml"
    tools.write_text("tools: []\n")
    install_plugin("vp-web-search", {"web_search": WEB_SEARCH_PLUGIN})
    filled = {"data/widesearch/": f"{rows}/", "WEB_TOOLS.yaml": str(tools), "=$MODEL": f"={SHIPPED_MODEL}"}
    command = documented_widesearch_command()
    for placeholder, value in filled.items():
        command = [arg.replace(placeholder, value) for arg in command]
    if not any(arg.startswith("actor_rollout_ref.model.path=") for arg in command):
        command.append(f"actor_rollout_ref.model.path={SHIPPED_MODEL}")  # the reader's model
    return command


def test_the_documented_widesearch_command_takes_nothing_from_a_task(widesearch_command: list[str]) -> None:
    result = dry_run(widesearch_command)

    assert result.ok, result.errors
    assert result.task is None and result.config.parl.embedded.task is None
    from_tasks = {key: source for key, source in result.sources.items() if source.startswith("task")}
    assert from_tasks == {}
    train = next(arg.split("=", 1)[1] for arg in widesearch_command if arg.startswith("data.train_files="))
    assert result.config.data.train_files == train
    assert result.sources["data.train_files"] == "command line"
    assert result.sources["reward.custom_reward_function.reward_kwargs.scorer"] == "command line"
    assert result.sources["parl.swarm.subagent_tools"] == "command line"
    assert result.sources["parl.critical_steps_budget"] == "base"  # null: the demo's budget stays with the demo


def test_the_widesearch_command_with_a_task_stops_naming_the_conflict(widesearch_command: list[str]) -> None:
    result = dry_run([*widesearch_command, "embedded=fanpages"])
    assert result.exit_code == 2
    assert len(result.errors) == 1
    assert result.errors[0].startswith("data.train_files, data.val_files: your own data, and embedded=fanpages")
    assert result.sources == {}
