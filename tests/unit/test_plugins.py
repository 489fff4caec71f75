"""Tests of the plugin host (``verl_parl.host.manager``) against real throwaway plugin distributions.

Each test writes tiny plugin packages plus hand-made ``*.dist-info`` directories (``METADATA`` and an
``entry_points.txt`` declaring the ``[verl_parl]`` group) into a temporary site directory and puts it
on ``sys.path``: ``importlib.metadata`` finds them exactly as it finds a pip-installed distribution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from verl_parl.cli.plugins import format_plugin_list
from verl_parl.host import manager as plugins
from verl_parl.host.manager import (
    BLOCK_PLUGINS_ENV,
    TRACE_HOOKS_ENV,
    InvalidHookError,
    PluginLoadError,
    collect_registries,
    create_plugin_manager,
    describe_plugins,
    get_plugin_manager,
    get_registries,
    reset_plugin_manager,
    validate_config,
)
from verl_parl.plugin import hookimpl
from verl_parl.registry import DuplicateNameError, PluginError, ToolSpec
from verl_parl.testing import write_plugin_distribution

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE_PREFIX = "vp_test_plugin_"

ECHO_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import ToolSpec


def make_echo(**kwargs):
    return ("echo", kwargs)


@hookimpl
def verl_parl_register_tools(register):
    register(ToolSpec(name="echo", factory=make_echo, description="Echo the input back"))
"""


def write_distribution(site: Path, dist: str, entry_points: dict[str, str], version: str = "0.1.0") -> dict[str, str]:
    return write_plugin_distribution(site, dist, entry_points, version=version, module_prefix=MODULE_PREFIX)


@pytest.fixture(autouse=True)
def clean_plugin_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(BLOCK_PLUGINS_ENV, raising=False)
    monkeypatch.delenv(TRACE_HOOKS_ENV, raising=False)
    # these tests describe the host itself: no built-in components unless a test installs some
    monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", ())
    reset_plugin_manager()
    yield
    reset_plugin_manager()
    for name in [name for name in sys.modules if name.startswith(MODULE_PREFIX)]:
        del sys.modules[name]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """An empty site directory; write distributions into it, then activate it with ``on_path``."""
    path = tmp_path / "site"
    path.mkdir()
    return path


def on_path(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    monkeypatch.syspath_prepend(str(site))


def run_cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VERL_PARL_")}
    environ.update(env, PYTHONPATH=os.pathsep.join([str(site), str(REPO_ROOT)]))
    command = [sys.executable, *args]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120, check=False)


# ---------------------------------------------------------------------------------------- discovery


def test_entry_point_plugin_is_loaded_and_its_tool_recorded(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules = write_distribution(site, "vp-echo-plugin", {"echo_plugin": ECHO_PLUGIN}, version="1.2.3")
    on_path(monkeypatch, site)

    pm = create_plugin_manager()
    registries = collect_registries(pm)

    assert pm.get_plugin("echo_plugin") is sys.modules[modules["echo_plugin"]]
    spec = registries.tools.get("echo")
    assert spec.plugin == "echo_plugin"
    assert spec.description == "Echo the input back"
    assert spec.factory(x=1) == ("echo", {"x": 1})


def test_list_cli_names_the_plugin_and_its_tool(site: Path) -> None:
    write_distribution(site, "vp-echo-plugin", {"echo_plugin": ECHO_PLUGIN}, version="1.2.3")

    text = run_cli(site, "-m", "verl_parl.plugins", "list")
    assert text.returncode == 0, text.stderr
    assert "echo_plugin" in text.stdout
    assert "vp-echo-plugin 1.2.3" in text.stdout
    assert "tools: echo  Echo the input back" in text.stdout

    as_json = run_cli(site, "-m", "verl_parl.plugins", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    [row] = [row for row in json.loads(as_json.stdout)["plugins"] if row["name"] == "echo_plugin"]
    assert row["source"] == "entry point"
    assert (row["distribution"], row["version"], row["blocked"], row["loaded"]) == (
        "vp-echo-plugin",
        "1.2.3",
        False,
        True,
    )
    assert row["registered"]["tools"] == [{"name": "echo", "description": "Echo the input back"}]


def test_the_built_in_plugins_and_their_registries_import_neither_verl_nor_torch(site: Path) -> None:
    """Loading every built-in plugin and listing what they register stays light (about a second, not the 15 s
    of importing verl): ``verl-parl plugins list`` and a config error of ``main`` need neither."""
    code = (
        "import sys; from verl_parl.cli.plugins import main; main(['list']); "
        "print('HEAVY', sorted(m for m in ('verl', 'torch', 'ray', 'transformers') if m in sys.modules))"
    )
    listed = run_cli(site, "-c", code)
    assert listed.returncode == 0, listed.stderr
    assert "HEAVY []" in listed.stdout


def test_importing_the_host_loads_nothing_but_the_cli_fails_loudly(site: Path) -> None:
    write_distribution(site, "vp-broken", {"broken": "raise RuntimeError('boom at import')\n"})

    imported = run_cli(site, "-c", "import verl_parl.host.manager, verl_parl.hookspecs, verl_parl.plugin")
    assert imported.returncode == 0, imported.stderr

    listed = run_cli(site, "-m", "verl_parl.plugins", "list")
    assert listed.returncode == 1
    assert "entry point 'broken = vp_test_plugin_broken_" in listed.stderr
    assert "RuntimeError: boom at import" in listed.stderr


def test_a_plugin_that_fails_to_import_raises_plugin_load_error(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules = write_distribution(site, "vp-broken", {"broken": "raise RuntimeError('boom')\n"}, version="2.0")
    on_path(monkeypatch, site)

    with pytest.raises(PluginLoadError) as info:
        create_plugin_manager()

    message = str(info.value)
    assert f"entry point 'broken = {modules['broken']}'" in message
    assert "distribution vp-broken 2.0" in message
    assert "RuntimeError: boom" in message
    assert f"{BLOCK_PLUGINS_ENV}=broken" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_entry_point_to_a_missing_module_raises_plugin_load_error(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist_info = site / "vp_missing-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: vp-missing\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[verl_parl]\nghost = vp_test_plugin_no_such_module:plugin\n")
    on_path(monkeypatch, site)

    with pytest.raises(PluginLoadError, match="'ghost = vp_test_plugin_no_such_module:plugin'") as info:
        create_plugin_manager()
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_load_entry_points_false_uses_only_builtins_and_extra_plugins(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_distribution(site, "vp-echo-plugin", {"echo_plugin": ECHO_PLUGIN})
    on_path(monkeypatch, site)

    class InlineTools:
        @hookimpl
        def verl_parl_register_tools(self, register):
            register(ToolSpec(name="inline", factory=dict))

    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[InlineTools()])
    registries = collect_registries(pm)

    assert not pm.has_plugin("echo_plugin")
    assert registries.tools.names() == ["inline"]
    assert registries.tools["inline"].plugin == "InlineTools"


# ---------------------------------------------------------------------------------------- registration


EVERYTHING_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import ContextPolicySpec, RewardSpec, ScorerSpec


@hookimpl
def verl_parl_register_rewards(register):
    register(RewardSpec(name="parl", factory=lambda: "parl reward"))


@hookimpl
def verl_parl_register_scorers(register):
    register(ScorerSpec(name="exact_match", factory=lambda answer, gold: float(answer == gold)))


@hookimpl
def verl_parl_register_context_policies(register):
    register(ContextPolicySpec(name="keep_recent", factory=lambda: "policy", description="Keep recent turns"))
"""


def test_every_register_hook_fills_its_own_registry(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_distribution(site, "vp-everything", {"everything": EVERYTHING_PLUGIN, "echo_plugin": ECHO_PLUGIN})
    on_path(monkeypatch, site)

    registries = collect_registries(create_plugin_manager())

    assert "echo" in registries.tools
    assert registries.rewards["parl"].plugin == "everything"
    assert registries.scorers["exact_match"].factory("a", "a") == 1.0
    assert registries.context_policies["keep_recent"].description == "Keep recent turns"
    assert "parl" not in registries.tools


def test_duplicate_tool_names_across_two_plugins_name_both(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_distribution(site, "vp-first", {"first_plugin": ECHO_PLUGIN})
    write_distribution(site, "vp-second", {"second_plugin": ECHO_PLUGIN})
    on_path(monkeypatch, site)
    pm = create_plugin_manager()

    with pytest.raises(DuplicateNameError) as info:
        collect_registries(pm)

    assert info.value.plugins == ("first_plugin", "second_plugin")  # entry points load sorted by name
    assert "tool 'echo' is registered twice: first by plugin 'first_plugin', then by plugin 'second_plugin'" in str(
        info.value
    )


def test_builtins_register_before_entry_points(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (site / f"{MODULE_PREFIX}builtin_tools.py").write_text(textwrap.dedent(ECHO_PLUGIN))
    write_distribution(site, "vp-third-party", {"third_party": ECHO_PLUGIN})
    on_path(monkeypatch, site)
    monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", (f"{MODULE_PREFIX}builtin_tools",))

    with pytest.raises(DuplicateNameError) as info:
        collect_registries(create_plugin_manager())
    assert info.value.plugins == (f"{MODULE_PREFIX}builtin_tools", "third_party")


def test_two_plugins_under_one_name_are_an_error() -> None:
    class Same:
        pass

    with pytest.raises(PluginError, match="plugin name 'Same' is taken twice"):
        create_plugin_manager(load_entry_points=False, extra_plugins=[Same(), Same()])


# ---------------------------------------------------------------------------------------- blocking


def test_blocked_entry_points_are_neither_imported_nor_registered(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules = write_distribution(site, "vp-pair", {"kept": ECHO_PLUGIN, "blocked_one": "raise RuntimeError('x')\n"})
    on_path(monkeypatch, site)
    monkeypatch.setenv(BLOCK_PLUGINS_ENV, " some_other , blocked_one,")

    pm = create_plugin_manager()
    registries = collect_registries(pm)

    assert pm.is_blocked("blocked_one")
    assert pm.is_blocked("some_other")
    assert modules["blocked_one"] not in sys.modules
    assert registries.tools["echo"].plugin == "kept"
    rows = {row["name"]: row for row in describe_plugins(pm, registries)}
    assert (rows["blocked_one"]["blocked"], rows["blocked_one"]["loaded"]) == (True, False)
    assert (rows["kept"]["blocked"], rows["kept"]["loaded"]) == (False, True)
    assert f"blocked_one  (entry point 'blocked_one = {modules['blocked_one']}'" in format_plugin_list(
        list(rows.values())
    )
    assert f"[blocked by {BLOCK_PLUGINS_ENV}]" in format_plugin_list([rows["blocked_one"]])


def test_blocked_builtin_is_not_imported(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = f"{MODULE_PREFIX}builtin_blocked"
    (site / f"{builtin}.py").write_text("raise RuntimeError('must not be imported')\n")
    on_path(monkeypatch, site)
    monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", (builtin,))
    monkeypatch.setenv(BLOCK_PLUGINS_ENV, builtin)

    pm = create_plugin_manager(load_entry_points=False)

    assert pm.is_blocked(builtin)
    assert builtin not in sys.modules


def test_blocked_extra_plugin_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    class Noisy:
        @hookimpl
        def verl_parl_register_tools(self, register):
            register(ToolSpec(name="noisy", factory=dict))

    monkeypatch.setenv(BLOCK_PLUGINS_ENV, "Noisy")
    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[Noisy()])
    assert len(collect_registries(pm).tools) == 0


# ---------------------------------------------------------------------------------------- hook checks


def test_misspelled_hook_fails_check_pending_naming_the_plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    typo = """
    from verl_parl.plugin import hookimpl

    @hookimpl
    def verl_parl_register_tool(register):
        pass
    """
    write_distribution(site, "vp-typo", {"typo_plugin": typo})
    on_path(monkeypatch, site)

    with pytest.raises(InvalidHookError) as info:
        create_plugin_manager()

    assert str(info.value) == (
        "invalid verl_parl hook implementation: plugin 'typo_plugin' implements unknown hook "
        "'verl_parl_register_tool'; did you mean 'verl_parl_register_tools'?"
    )
    assert isinstance(info.value, PluginError)


def test_every_unknown_hook_is_reported_at_once() -> None:
    class First:
        @hookimpl
        def verl_parl_validate_cfg(self, config):
            return []

    class Second:
        @hookimpl
        def verl_parl_totally_new_hook(self):
            pass

    with pytest.raises(InvalidHookError) as info:
        create_plugin_manager(load_entry_points=False, extra_plugins=[First(), Second()])

    assert len(info.value.problems) == 2
    assert "plugin 'First' implements unknown hook 'verl_parl_validate_cfg'" in str(info.value)
    assert "plugin 'Second' implements unknown hook 'verl_parl_totally_new_hook'" in str(info.value)


def test_hookimpl_with_an_unknown_argument_fails_naming_the_plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong_argument = """
    from verl_parl.plugin import hookimpl

    @hookimpl
    def verl_parl_register_tools(registry):
        pass
    """
    write_distribution(site, "vp-wrong-arg", {"wrong_arg": wrong_argument})
    on_path(monkeypatch, site)

    with pytest.raises(InvalidHookError, match=r"(?s)plugin 'wrong_arg' \(entry point 'wrong_arg = .*\{'registry'\}"):
        create_plugin_manager()


# ---------------------------------------------------------------------------------------- tracing


class TracedPlugin:
    @hookimpl
    def verl_parl_register_tools(self, register):
        register(ToolSpec(name="traced_tool", factory=dict))


def test_trace_env_var_writes_hook_calls_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TRACE_HOOKS_ENV, "1")

    collect_registries(create_plugin_manager(load_entry_points=False, extra_plugins=[TracedPlugin()]))

    err = capsys.readouterr().err
    assert "verl_parl_register_tools [hook]" in err
    assert "register: <register tool for plugin 'TracedPlugin'>" in err
    assert "finish verl_parl_register_tools --> [] [hook]" in err


def test_no_trace_output_without_the_env_var(capsys: pytest.CaptureFixture[str]) -> None:
    collect_registries(create_plugin_manager(load_entry_points=False, extra_plugins=[TracedPlugin()]))
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------- config validation


class PositiveTimeout:
    @hookimpl
    def verl_parl_validate_config(self, config: DictConfig) -> list[str]:
        timeout = config.parl.tools.search.timeout_s
        return [] if timeout > 0 else [f"parl.tools.search.timeout_s: must be positive, got {timeout}"]


class KnownPolicy:
    @hookimpl
    def verl_parl_validate_config(self, config: DictConfig) -> list[str]:
        errors = []
        if config.parl.context.policy not in ("keep_recent", "discard_all"):
            errors.append(f"parl.context.policy: unknown policy {config.parl.context.policy!r}")
        if config.parl.context.keep < 1:
            errors.append("parl.context.keep: must be at least 1")
        return errors


class HappyPlugin:
    @hookimpl
    def verl_parl_validate_config(self, config: DictConfig) -> list[str]:
        return []


def make_config(timeout_s: float, policy: str, keep: int) -> DictConfig:
    return OmegaConf.create(
        {"parl": {"tools": {"search": {"timeout_s": timeout_s}}, "context": {"policy": policy, "keep": keep}}}
    )


def test_validate_config_collects_every_plugins_errors_in_order() -> None:
    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[PositiveTimeout(), HappyPlugin(), KnownPolicy()])

    assert validate_config(pm, make_config(timeout_s=-1, policy="summarize", keep=0)) == [
        "parl.tools.search.timeout_s: must be positive, got -1",
        "parl.context.policy: unknown policy 'summarize'",
        "parl.context.keep: must be at least 1",
    ]
    assert validate_config(pm, make_config(timeout_s=5, policy="keep_recent", keep=3)) == []


def test_validate_config_rejects_a_plugin_returning_a_bare_string() -> None:
    class Sloppy:
        @hookimpl
        def verl_parl_validate_config(self, config):
            return "parl.x: wrong"

    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[Sloppy()])
    with pytest.raises(PluginError, match="plugin 'Sloppy': verl_parl_validate_config must return a list of strings"):
        validate_config(pm, OmegaConf.create({}))


# ---------------------------------------------------------------------------------------- per-process cache


def test_process_cache_builds_once_and_reset_rebuilds(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_distribution(site, "vp-echo-plugin", {"echo_plugin": ECHO_PLUGIN})
    on_path(monkeypatch, site)

    pm, registries = get_plugin_manager(), get_registries()
    assert get_plugin_manager() is pm
    assert get_registries() is registries
    assert registries.tools["echo"].plugin == "echo_plugin"

    reset_plugin_manager()
    assert get_plugin_manager() is not pm
    assert get_registries() is not registries
    assert "echo" in get_registries().tools.names()  # rebuilt: the echo plugin registered again
