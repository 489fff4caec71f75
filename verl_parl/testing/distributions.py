"""Throwaway plugin distributions, found by ``importlib.metadata`` exactly like installed ones."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

_module_ids = itertools.count()


def write_plugin_distribution(
    site: Path,
    dist: str,
    entry_points: dict[str, str],
    *,
    version: str = "0.1.0",
    module_prefix: str = "vp_test_plugin_",
) -> dict[str, str]:
    """Write modules plus a ``*.dist-info`` declaring them in the ``verl_parl`` entry-point group.

    ``entry_points`` maps entry-point name to module source. Put ``site`` on ``sys.path`` (or on
    ``PYTHONPATH`` for subprocesses and Ray workers) to install it. Returns entry-point name ->
    the unique module name its source was written as.
    """
    modules = {ep_name: f"{module_prefix}{ep_name}_{next(_module_ids)}" for ep_name in entry_points}
    for ep_name, source in entry_points.items():
        (site / f"{modules[ep_name]}.py").write_text(textwrap.dedent(source))
    dist_info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = [f"{ep_name} = {module}" for ep_name, module in modules.items()]
    (dist_info / "entry_points.txt").write_text("[verl_parl]\n" + "\n".join(lines) + "\n")
    return modules
