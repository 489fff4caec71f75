"""What a command line selects before anything is composed: the task (the plugins' default when it names no task
and no data), the hardware profile, and verl's config folder on Hydra's search path. Used by
:mod:`verl_parl.cli.main` and :mod:`verl_parl.cli.dryrun` alike, so that a dry run selects as a run does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from verl_parl.settings.errors import ConfigError

CONFIG_MODULE = "verl_parl.configs"
CONFIG_NAME = "parl_trainer"
DRY_RUN = "--dry-run"


def gpu_visible() -> bool:
    """torch sees a GPU. Without a GPU's device nodes (NVIDIA's, or ROCm's ``/dev/kfd``) it cannot, and the
    answer comes without importing torch (~3 s): a config error is then reported in about a second."""
    if not any(Path("/dev").glob("nvidia[0-9]*")) and not Path("/dev/kfd").exists():
        return False
    import torch

    return torch.cuda.is_available()


def verl_config_searchpath(argv: list[str]) -> list[str]:
    """``argv`` with verl's config folder on Hydra's search path as a ``file://`` path, found without importing
    verl: ``pkg://verl.trainer.config`` (the entry config's, for Hydra's compose API) imports verl, and with it
    torch and transformers, ~7 s before the first override is checked. A search path given on the command line
    is left as it is."""
    if any(arg.lstrip("+").startswith("hydra.searchpath") for arg in argv):
        return argv
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return argv  # Hydra names the missing package
    folder = Path(spec.submodule_search_locations[0]) / "trainer" / "config"
    return [*argv, f"hydra.searchpath=[file://{folder}]"]


def task_config_dirs() -> list[str]:
    """The Hydra search paths of the registered tasks' own settings (``TaskSpec.config_dir``), which Hydra's
    search-path plugin of verl-parl (``hydra_plugins/verl_parl_tasks``) appends whenever verl-parl's config is
    composed, so that ``embedded=<task>`` selects a plugin's task. A broken plugin is left for the driver's plugin
    check to report."""
    from verl_parl.host.manager import get_registries
    from verl_parl.registry import PluginError

    try:
        tasks = get_registries().tasks
    except PluginError:
        return []
    return list(dict.fromkeys(spec.config_dir for spec in tasks if spec.config_dir))


DATA_KEYS = ("data.train_files", "data.val_files")
"""The keys that give a run its own data."""


def _override_value(argv: list[str], key: str) -> str | None:
    """The value ``argv`` gives ``key`` (``key=v``, ``+key=v``, ``++key=v``), None when it gives none."""
    for arg in argv:
        name, sep, value = arg.lstrip("+").partition("=")
        if sep and name == key:
            return value
    return None


def composes_a_group(argv: list[str]) -> bool:
    """Whether ``argv`` adds a config group option (``+recipe=qwen3_vllm_swarm``), which may select the task itself
    (``override /embedded: research``): then no default task is added."""
    return any(
        arg.startswith("+") and not arg.startswith("++") and "=" in arg and "." not in arg.partition("=")[0]
        for arg in argv
    )


def select_task(argv: list[str]) -> list[str]:
    """``argv`` with the task made explicit: as given; ``embedded=<the plugins' default task>`` when it names no
    task and no data (``python -m verl_parl.main`` alone trains the demo's default); unchanged when it gives data
    (``data.train_files``/``val_files``: the user's own, with the base's task-free values) or adds a config group
    option that may name the task (a GPU recipe's ``+recipe=...``).

    Raises:
        ConfigError: a plugin does not load (before Hydra looks for the tasks' YAML), a task and data of one's own
            are both given (the task would bring its data, model and settings beside the user's), or neither is
            and no plugin names a default task.
    """
    from verl_parl.host.manager import default_task, get_plugin_manager
    from verl_parl.registry import PluginError

    try:
        pm = get_plugin_manager()
    except PluginError as exc:
        raise ConfigError([f"plugins: {exc}"]) from exc
    task = _override_value(argv, "embedded")
    if any(arg.startswith("~embedded") for arg in argv) or task in ("null", ""):
        task = None
    data = [key for key in DATA_KEYS if _override_value(argv, key) is not None]
    if task is not None and data:
        raise ConfigError(
            [
                f"{', '.join(data)}: your own data, and embedded={task}, whose YAML brings its own data, model, scorer "
                f"and settings: drop embedded={task} to train on your data with the base's task-free values "
                f"(docs/your_task.md), or drop {' and '.join(data)} to train the {task} task"
            ]
        )
    named = task is not None or "embedded" in {arg.lstrip("+~").partition("=")[0] for arg in argv}
    if named or data or composes_a_group(argv):
        return argv
    try:
        default = default_task(pm)
    except PluginError as exc:
        raise ConfigError([f"plugins: {exc}"]) from exc
    if default is None:
        raise ConfigError(
            [
                "no task and no data: select a registered task with embedded=<name> "
                "(python -m verl_parl.plugins list), or give your own: data.train_files=... data.val_files=... "
                "actor_rollout_ref.model.path=... reward.custom_reward_function.reward_kwargs.scorer=... "
                "(docs/your_task.md)"
            ]
        )
    return [*argv, f"embedded={default}"]


def choose_profile(argv: list[str]) -> tuple[str, list[str]]:
    """The profile named on the command line, else ``cpu`` without a GPU; returns (profile, argv)."""
    for arg in argv:
        if arg.startswith("profile="):
            return arg.split("=", 1)[1], argv
    profile = "gpu" if gpu_visible() else "cpu"
    return profile, [*argv, f"profile={profile}"]
