"""Pluggable tasks: ``verl_parl_register_tasks`` fills the task registry, and everything that depends on
the task (validation, assets, where its settings live) reads it; the demo's cold starts (demonstrations, recipe)
are the demo's own registry (:mod:`verl_parl_demo.coldstarts`)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from verl_parl_demo import coldstarts
from verl_parl_demo.modelbuild.coldstart import default_spec
from verl_parl_demo.modelbuild.tiny import MARKER_NAME
from verl_parl_demo.tasks.demos import DEMO_SOURCES, make_demos

from verl_parl.cli.config import EmbeddedTaskConfig
from verl_parl.host import manager as plugins
from verl_parl.host.manager import collect_registries, create_plugin_manager, reset_plugin_manager
from verl_parl.registry import DuplicateNameError, PluginError, TaskSpec, UnknownNameError, load_target
from verl_parl.settings.errors import ConfigError
from verl_parl.testing import write_plugin_distribution

MODULE_PREFIX = "vp_test_task_"

# A third-party task: its dataset writer writes two small files, and a second task needs a module nobody has
# installed.
SPELLING_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import TaskSpec


def write(directory, settings):
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / f"{name}.parquet" for name in ("train", "val")}
    for path in paths.values():
        path.write_text(str(settings["n_train"]))
    return {**paths, "tools": directory / "tools.yaml"}


@hookimpl
def verl_parl_register_tasks(register):
    register(
        TaskSpec(
            name="spelling",
            factory=write,
            scorer="number_match",
            agent_loops=("tool_agent",),
            config_dir="file:///opt/spelling/configs",  # its embedded/spelling.yaml: embedded=spelling
        )
    )
    needs = {"vp_no_such_module": "pip install vp-no-such"}
    register(TaskSpec(name="needs_module", factory=write, scorer="x", requires=needs))
"""


@pytest.fixture(autouse=True)
def spelling_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The built-in tasks plus the ``spelling`` plugin above, installed as an entry point."""
    site = tmp_path / "site"
    site.mkdir()
    write_plugin_distribution(site, "vp-spelling", {"spelling": SPELLING_PLUGIN}, module_prefix=MODULE_PREFIX)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(DEMO_SOURCES, "_sources", {})
    monkeypatch.setattr(DEMO_SOURCES, "_renamers", {})
    reset_plugin_manager()
    yield
    reset_plugin_manager()
    for name in [name for name in sys.modules if name.startswith(MODULE_PREFIX)]:
        del sys.modules[name]


def test_built_in_tasks_are_registered_through_the_hook() -> None:
    tasks = plugins.get_registries().tasks
    assert {"arithmetic", "research", "spelling"} <= set(tasks.names())
    assert tasks["arithmetic"].plugin == "arithmetic"  # the demo distribution's entry points
    assert tasks["research"].plugin == "research"
    assert tasks["fanpages"].config_dir == "pkg://verl_parl_demo.configs"
    assert tasks["research"].scorer == "research" and tasks["research"].tools == ("search",)
    assert tasks["spelling"].plugin == "spelling"


def test_a_plugin_task_s_settings_folder_joins_hydra_s_search_path() -> None:
    from hydra._internal.config_search_path_impl import ConfigSearchPathImpl

    from hydra_plugins.verl_parl_tasks import TaskConfigSearchPath
    from verl_parl.cli.main import task_config_dirs

    assert {"pkg://verl_parl_demo.configs", "file:///opt/spelling/configs"} <= set(task_config_dirs())
    ours, other = ConfigSearchPathImpl(), ConfigSearchPathImpl()
    ours.append("main", "pkg://verl_parl.configs")
    other.append("main", "pkg://someone_else.configs")
    for search_path in (ours, other):
        TaskConfigSearchPath().manipulate_search_path(search_path)
    paths = [element.path for element in ours.get_path()]
    assert "file:///opt/spelling/configs" in paths  # so that embedded=spelling finds its YAML
    assert paths.count("pkg://verl_parl_demo.configs") == 1
    assert [element.path for element in other.get_path()] == ["pkg://someone_else.configs"]  # another Hydra app


def test_unknown_task_has_a_did_you_mean_hint() -> None:
    with pytest.raises(UnknownNameError, match="unknown task 'speling'; did you mean 'spelling'"):
        plugins.get_registries().tasks.get("speling")
    with pytest.raises(ConfigError) as info:
        EmbeddedTaskConfig(task="arithmetik")
    assert "parl.embedded.task: unknown task 'arithmetik'; did you mean 'arithmetic'?" in info.value.errors[0]


def test_a_second_task_of_the_same_name_names_both_plugins() -> None:
    from verl_parl.plugin import hookimpl

    class First:
        @hookimpl
        def verl_parl_register_tasks(self, register):  # type: ignore[no-untyped-def]
            register(TaskSpec(name="arithmetic", factory=dict, scorer="number_match"))

    class Second:  # another plugin, its own task of the same name
        @hookimpl
        def verl_parl_register_tasks(self, register):  # type: ignore[no-untyped-def]
            register(TaskSpec(name="arithmetic", factory=dict, scorer="exact_match"))

    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[First(), Second()])
    both = "task 'arithmetic' is registered twice: first by plugin 'First', then by plugin 'Second'"
    with pytest.raises(DuplicateNameError, match=both):
        collect_registries(pm)


def test_the_task_decides_agent_loops_options_and_requirements() -> None:
    with pytest.raises(ConfigError) as info:
        EmbeddedTaskConfig(task="spelling", agent_loop="parl_swarm", options={"size": 3})
    assert info.value.errors == [
        "parl.embedded.agent_loop: 'parl_swarm' is not one of the spelling task's ('tool_agent',)",
        "parl.embedded.options: the spelling task takes no options",
    ]
    with pytest.raises(ConfigError) as info:
        EmbeddedTaskConfig(task="needs_module", agent_loop="tool_agent")
    assert info.value.errors == [
        "parl.embedded.task: the 'needs_module' task (plugin 'spelling') needs the module 'vp_no_such_module', "
        "which is not installed: pip install vp-no-such"
    ]
    assert EmbeddedTaskConfig(task="spelling", agent_loop="tool_agent").task == "spelling"


def test_research_option_errors_come_from_its_plugin() -> None:
    with pytest.raises(ConfigError) as info:
        EmbeddedTaskConfig(task="research", options={"seed": 1, "wide_minn": 2})
    assert "parl.embedded.options.seed: set parl.embedded.seed instead" in info.value.errors
    hint = "parl.embedded.options.wide_minn: unknown field (did you mean 'wide_min'"
    assert any(e.startswith(hint) for e in info.value.errors)


def test_demonstrations_and_cold_start_recipe_come_from_the_demos_cold_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coldstarts, "COLDSTARTS", dict(coldstarts.COLDSTARTS))
    spelling = coldstarts.ColdStart(demos={"agent": "verl_parl_demo.tasks.demos:arithmetic_agent"}, recipe={"steps": 7})
    coldstarts.register_coldstart("spelling", spelling)
    with pytest.raises(ValueError, match="already has a cold start"):
        coldstarts.register_coldstart("spelling", spelling)
    assert "spelling" in DEMO_SOURCES.tasks()
    assert DEMO_SOURCES.roles("spelling") == ["agent"]
    demo = make_demos("spelling", ["agent"], 1, seed=0)[0]
    assert demo.role == "agent" and demo.tools is not None
    assert demo.tools[0]["function"]["name"] == "calculator"  # the arithmetic source the target names
    assert default_spec("spelling").steps == 7
    from verl_parl_demo.modelbuild.coldstart import READER_RECIPE

    assert default_spec("research") == default_spec("research", reader=True)  # research names READER_RECIPE
    assert default_spec("research").steps == READER_RECIPE["steps"]
    assert default_spec("arithmetic").steps == 800
    with pytest.raises(KeyError, match="did you mean 'spelling'"):
        DEMO_SOURCES.get("speling", "agent")


def test_the_task_writer_builds_the_embedded_assets(tmp_path: Path) -> None:
    from verl_parl.cli import assets

    embedded = {"task": "spelling", "agent_loop": "tool_agent", "n_train": 4}
    root = OmegaConf.create({"parl": {"cache_dir": str(tmp_path), "embedded": embedded}})
    train = Path(assets.resolve_asset("embedded_train", root))
    assert train.read_text() == "4"
    assert Path(assets.resolve_asset("embedded_tools", root)).name == "tools.yaml"
    with pytest.raises(KeyError, match="the spelling task has no index"):
        assets.resolve_asset("embedded_index", root)


def test_the_cold_start_is_found_once_per_process_while_its_build_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_parl_demo import plugin as demo_plugin
    from verl_parl_demo.modelbuild import coldstart

    from verl_parl.cli import assets

    built: list[Path] = []

    def build(spec: coldstart.ColdStartSpec, cache_dir: Path) -> Path:
        folder = cache_dir / f"coldstart-{len(built)}"
        folder.mkdir(parents=True)
        (folder / MARKER_NAME).write_text("{}")
        built.append(folder)
        return folder

    monkeypatch.setattr(coldstart, "build_coldstart_model", build)
    monkeypatch.setattr(demo_plugin, "_coldstart_built", {})
    root = OmegaConf.create({"parl": {"cache_dir": str(tmp_path), "embedded": {"task": "arithmetic"}}})
    first = assets.resolve_asset("coldstart_model", root)
    assert assets.resolve_asset("coldstart_model", root) == first  # model.path named twice: built once
    assert len(built) == 1
    (built[0] / MARKER_NAME).unlink()  # the build went away (a cleaned cache): found again
    assert assets.resolve_asset("coldstart_model", root) != first
    assert len(built) == 2


def test_the_task_writer_runs_once_per_process_while_its_files_are_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from verl_parl.cli import assets

    calls: list[Path] = []

    def write(directory: Path, settings: dict) -> dict[str, Path]:
        calls.append(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = {name: directory / name for name in ("train", "val", "tools")}
        for path in paths.values():
            path.write_text("x")
        return paths

    task = SimpleNamespace(factory=write, missing_requirements=lambda: [])
    monkeypatch.setattr(plugins, "get_registries", lambda: SimpleNamespace(tasks={"counted": task}))
    monkeypatch.setattr(assets, "_embedded_written", {})
    root = OmegaConf.create({"parl": {"cache_dir": str(tmp_path), "embedded": {"task": "counted"}}})
    asked = ("embedded_train", "embedded_val", "embedded_tools")
    names = [Path(assets.resolve_asset(name, root)).name for name in asked]
    assert names == ["train", "val", "tools"]
    assert len(calls) == 1  # three assets, one run of the writer (one "reusing" line)
    (calls[0] / "val").unlink()  # a file went away: the writer runs again
    assert Path(assets.resolve_asset("embedded_val", root)).exists()
    assert len(calls) == 2


def test_load_target_names_what_it_cannot_load() -> None:
    assert load_target("random:Random") is random.Random
    with pytest.raises(PluginError, match="not a 'module:attribute' reference"):
        load_target("random.Random")
    with pytest.raises(PluginError, match="cannot load 'random:Nope'"):
        load_target("random:Nope")


def test_the_research_task_without_the_search_plugin_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "verl_parl_search", None)  # what find_spec sees when it is not installed
    with pytest.raises(ConfigError) as info:
        EmbeddedTaskConfig(task="research")
    assert info.value.errors == [
        "parl.embedded.task: the 'research' task (plugin 'research') needs the module "
        "'verl_parl_search', which is not installed: pip install -e plugins/search "
        "(bash scripts/install.sh installs it)"
    ]
