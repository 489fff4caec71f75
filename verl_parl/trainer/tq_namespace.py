"""TransferQueue inside the run's own Ray namespace, so that two runs can share a cluster.

TransferQueue 0.1.x, the data plane of verl's v1 trainer, creates its controller as the named actor
``TransferQueueController`` (and its Ray storage backend's ``RayObjectRefStorage``) in the fixed Ray namespace
``transfer_queue``, and every process that finds one there attaches to it. On a cluster that two runs share, the
second run's trainer would join the first run's queue (and silently ignore its own settings). A run's Ray namespace
is its own (:func:`verl_parl.cli.launch.run_namespace`), so these two modules' lookups and creations of the
``transfer_queue`` namespace are sent to the calling process's namespace instead: their module globals ``ray`` and
the actor class are replaced by stand-ins that rewrite that one argument and pass everything else through.

This is a patch of TransferQueue's private surface: :func:`install` checks that each module still names the
namespace and the class, and raises :class:`TransferQueueCompatibilityError` when it does not
(``tests/unit/test_tq_namespace.py`` guards it).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

__all__ = ["MODULES", "TQ_NAMESPACE", "TransferQueueCompatibilityError", "in_run", "install"]

TQ_NAMESPACE = "transfer_queue"
MODULES = {
    "transfer_queue.interface": "TransferQueueController",
    "transfer_queue.storage.clients.ray_storage_client": "RayObjectRefStorage",
}
"""TransferQueue's modules that name actors in :data:`TQ_NAMESPACE`, and the actor class each creates."""


class TransferQueueCompatibilityError(RuntimeError):
    """TransferQueue no longer names its actors as this patch expects."""


def in_run(namespace: str | None) -> str | None:
    """The namespace TransferQueue asks for, with :data:`TQ_NAMESPACE` replaced by the caller's own."""
    if namespace != TQ_NAMESPACE:
        return namespace
    return current_namespace()


def current_namespace() -> str:
    """The calling process's Ray namespace (its job's: the run's)."""
    import ray

    return str(ray.get_runtime_context().namespace)


class RayInRun:
    """Stands for the ``ray`` module inside a TransferQueue module: ``get_actor`` looks in the run's namespace."""

    def __init__(self, ray: ModuleType) -> None:
        self._ray = ray

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ray, name)

    def get_actor(self, name: str, namespace: str | None = None) -> Any:
        return self._ray.get_actor(name, namespace=in_run(namespace))


class ActorClassInRun:
    """Stands for a TransferQueue actor class: ``options(namespace=...)`` creates it in the run's namespace."""

    def __init__(self, actor_class: Any) -> None:
        self._actor_class = actor_class

    def __getattr__(self, name: str) -> Any:
        return getattr(self._actor_class, name)

    def options(self, **options: Any) -> Any:
        if "namespace" in options:
            options["namespace"] = in_run(options["namespace"])
        return self._actor_class.options(**options)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._actor_class.remote(*args, **kwargs)


def patch_module(module: ModuleType) -> None:
    """Send ``module``'s ``transfer_queue``-namespace actors to the caller's namespace (idempotent)."""
    class_name = MODULES[module.__name__]
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):  # no source to check
        source = ""
    actor_class = getattr(module, class_name, None)
    if f'namespace="{TQ_NAMESPACE}"' not in source or actor_class is None or not hasattr(module, "ray"):
        raise TransferQueueCompatibilityError(
            f"{module.__name__} no longer creates {class_name} in the Ray namespace {TQ_NAMESPACE!r} through its "
            "module globals `ray` and the class: verl_parl.trainer.tq_namespace must be updated, or two runs on one "
            "cluster would share one TransferQueue"
        )
    if not isinstance(module.ray, RayInRun):
        module.ray = RayInRun(module.ray)
    if not isinstance(actor_class, ActorClassInRun):
        setattr(module, class_name, ActorClassInRun(actor_class))


def install() -> None:
    """Patch each of :data:`MODULES` when it is imported (now, if it already is)."""
    from verl_parl.host.imports import when_imported

    for name in MODULES:
        when_imported(name, patch_module)
