"""The demo's plugin of its models: the ``tiny_model`` and ``coldstart_model`` assets, and the default task.

``${parl_asset:tiny_model}`` is the untrained tiny Qwen2 (:mod:`verl_parl_demo.modelbuild.tiny`);
``${parl_asset:coldstart_model}`` is it after cold-start SFT on the selected task's demonstrations
(:mod:`verl_parl_demo.modelbuild.coldstart`): the shipped weights when the recipe matches them, else built once
into ``<cache>/models``. ``python -m verl_parl.main`` with no task and no data trains :data:`DEFAULT_TASK`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import AssetSpec, Register

DEFAULT_TASK = "fanpages"
"""The task of ``python -m verl_parl.main`` without arguments (docs/default_run.md)."""


def tiny_model(root: Any, cache_dir: Path) -> str:
    """The untrained tiny model's folder (built once into ``<cache>/models``)."""
    from verl_parl_demo.modelbuild.tiny import build_tiny_model

    return str(build_tiny_model(cache_dir=cache_dir / "models"))


_coldstart_built: dict[tuple[str, str], Path] = {}  # (recipe, cache folder) -> the build found in this process


def coldstart_model(root: Any, cache_dir: Path) -> str:
    """The tiny model after cold-start SFT on the selected task's tool-use demonstrations.

    Its cache folder is named by a digest of the demonstrations, which takes seconds to write, and verl's config
    refers to ``model.path`` more than once: each process finds the build once and reuses it while it is there."""
    from verl_parl_demo.modelbuild.coldstart import build_coldstart_model, default_spec
    from verl_parl_demo.modelbuild.tiny import is_complete_build

    task = root.parl.embedded.get("task")
    if task is None:
        raise KeyError("${parl_asset:coldstart_model} is the cold start of the selected task, and none is selected")
    share = root.parl.embedded.get("parallel_share")
    spec = default_spec(str(task), parallel_share=None if share is None else float(share))
    folder = cache_dir / "models"
    key = (repr(spec), str(folder))
    found = _coldstart_built.get(key)
    if found is None or not is_complete_build(found):
        found = _coldstart_built[key] = build_coldstart_model(spec, cache_dir=folder)
    return str(found)


@hookimpl
def verl_parl_register_assets(register: Register[AssetSpec]) -> None:
    register(AssetSpec(name="tiny_model", factory=tiny_model, description="the demo's untrained tiny Qwen2 (1.3 M)"))
    register(
        AssetSpec(
            name="coldstart_model",
            factory=coldstart_model,
            description="the tiny model cold-started on the selected demo task's demonstrations",
        )
    )


@hookimpl
def verl_parl_default_task() -> str:
    return DEFAULT_TASK
