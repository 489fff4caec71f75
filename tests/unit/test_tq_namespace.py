"""TransferQueue's actors go to the run's own Ray namespace (two runs on one cluster each keep their queue)."""

from __future__ import annotations

import importlib
import types
from typing import Any

import pytest

from verl_parl.trainer import tq_namespace
from verl_parl.trainer.tq_namespace import (
    MODULES,
    ActorClassInRun,
    RayInRun,
    TransferQueueCompatibilityError,
    patch_module,
)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_transfer_queue_still_names_the_fixed_namespace_and_is_patched(name: str) -> None:
    """Guards the patch: TransferQueue's modules still create their actor in the namespace "transfer_queue" (if
    this fails after an upgrade, the patch must be revisited), and verl-parl's verl plugin has patched them."""
    import verl  # noqa: F401 - loads verl-parl's verl plugin, which installs the patch

    module = importlib.import_module(name)
    assert isinstance(module.ray, RayInRun)
    assert isinstance(getattr(module, MODULES[name]), ActorClassInRun)
    patch_module(module)  # idempotent
    assert not isinstance(module.ray._ray, RayInRun)


class FakeRay:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []

    def get_actor(self, name: str, namespace: str | None = None) -> str:
        self.asked.append((name, namespace))
        return name

    def get(self, value: Any) -> Any:
        return value


class FakeActorClass:
    def __init__(self) -> None:
        self.options_seen: list[dict[str, Any]] = []

    def options(self, **options: Any) -> FakeActorClass:
        self.options_seen.append(options)
        return self


def test_the_fixed_namespace_becomes_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tq_namespace, "current_namespace", lambda: "verl_parl_run_a")
    ray, actor_class = FakeRay(), FakeActorClass()
    stand_in, actors = RayInRun(ray), ActorClassInRun(actor_class)  # type: ignore[arg-type]
    stand_in.get_actor("TransferQueueController", namespace="transfer_queue")
    stand_in.get_actor("other", namespace="elsewhere")
    actors.options(name="TransferQueueController", namespace="transfer_queue")
    assert ray.asked == [("TransferQueueController", "verl_parl_run_a"), ("other", "elsewhere")]
    assert actor_class.options_seen == [{"name": "TransferQueueController", "namespace": "verl_parl_run_a"}]
    assert stand_in.get(3) == 3  # everything else passes through


def test_a_changed_transfer_queue_fails_loudly() -> None:
    module = types.ModuleType("transfer_queue.interface")
    module.ray = FakeRay()  # type: ignore[attr-defined]
    with pytest.raises(TransferQueueCompatibilityError, match="no longer creates TransferQueueController"):
        patch_module(module)
