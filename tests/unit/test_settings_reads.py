"""Settings are parsed once: only a component's settings module reads raw ``parl.*`` keys.

A read is a call given a ``parl...`` key, as a string or as a module constant holding one
(``OmegaConf.select(cfg, "parl.x")``, ``config_section(cfg, KEY)``, ``cfg.get("parl")``), a subscript with one
(``cfg["parl"]``, ``cfg["parl.swarm"]``), or ``<expr>.parl``. Everything else gets its typed settings from its
component's accessor (``swarm_settings(config)``, ...), which returns what the driver parsed and handed over
(:mod:`verl_parl.settings.handoff`). The package and the plugins under ``plugins/`` are checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl_parl"
PLUGINS = ROOT / "plugins"
KEY = re.compile(r"^parl(\.[a-z_]+)*$")

ALLOWED = {
    "cli/config.py": "the driver's settings module: parses the whole section (build_settings)",
    "cli/assets.py": "resolves ${parl_asset:...} while the config is composed, before there are settings",
    "cli/launch.py": "the driver: applies task defaults and reads the composed config before validating it",
    "cli/main.py": "sets parl.output_dir on the composed config (a write)",
    "cli/dryrun.py": "as cli/main.py and cli/assets.py: sets parl.output_dir, shows unbuilt assets of the task",
    "cli/parts.py": "what the run asks Ray for: names parl.subagent.instances in its messages, reads parsed settings",
    "trainer/reward_manager.py": "registers verl's reward manager named 'parl' (a name, not a config key)",
}

PLUGIN_ALLOWED = {
    "plugins/demo/verl_parl_demo/plugin.py": "its assets resolve while the config is composed, as cli/assets.py's",
    "plugins/demo/verl_parl_demo/task_settings.py": "the demo's settings module: reads a task's YAML outside a run",
}


def _is_settings_module(relative: str) -> bool:
    return relative.endswith("/settings.py") or relative.startswith("settings/")


def raw_reads(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every raw ``parl`` read in ``source``, in line order."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }

    def key(arg: ast.AST) -> str | None:
        value = arg.value if isinstance(arg, ast.Constant) else None
        if isinstance(arg, ast.Name):
            value = constants.get(arg.id)
        return value if isinstance(value, str) and KEY.match(value) else None

    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if (value := key(arg)) is not None:
                    found.append((node.lineno, f"{ast.unparse(node.func)}({value!r})"))
        elif (isinstance(node, ast.Subscript) and (value := key(node.slice)) is not None) or (
            isinstance(node, ast.Attribute) and node.attr == "parl"
        ):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_raw_reads_by_hand() -> None:
    source = (
        'x = OmegaConf.select(cfg, "parl.swarm.max_turns")\n'
        'KEY = "parl.subagent.schedule"\n'
        "y = cfg.parl.profile + config_section(cfg, KEY)\n"
        'z = f("parl.swarm: must be a mapping")\n'
        'w = OmegaConf.select(cfg, "trainer.use_v1")\n'
        'v = cfg["parl"]["swarm"]\n'  # a planted subscript read
        'u = cfg.get("parl", {})\n'
        't = cfg["trainer"]\n'
        "s = cfg[KEY]\n"
    )
    assert [line for line, _ in raw_reads(source)] == [1, 3, 3, 6, 7, 9]


def test_only_settings_modules_read_parl_keys() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("configs/") or _is_settings_module(relative) or relative in ALLOWED:
            continue
        offenders += [f"verl_parl/{relative}:{line}: {what}" for line, what in raw_reads(path.read_text())]
    for path in sorted(PLUGINS.glob("*/verl_parl_*/**/*.py")):  # the plugins' code, not their tests
        if path.relative_to(ROOT).as_posix() in PLUGIN_ALLOWED:
            continue
        offenders += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in raw_reads(path.read_text())]
    assert not offenders, "raw parl.* reads outside a settings module:\n" + "\n".join(offenders)


def test_every_component_section_has_a_settings_module() -> None:
    from verl_parl.settings.sections import SECTIONS

    owners = {
        "cluster": "cluster/settings.py",
        "embedded": "cli/config.py",
        "swarm": "swarm/settings.py",
        "subagent": "swarm/settings.py",
        "context": "context/settings.py",
        "researcher": "agents/settings.py",
        "tools": "tools/settings.py",
        "reward": "rewards/settings.py",
        "traces": "traces/settings.py",
        "partial_rollout": "partial_rollout/settings.py",
        "loop_stop": "chat/settings.py",
    }
    assert set(owners) == set(SECTIONS)
    for section, module in owners.items():
        assert f"parl.{section}" in (PACKAGE / module).read_text(), (section, module)
