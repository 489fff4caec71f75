"""Run code right after a module is imported, without importing it early.

verl-parl hooks into verl modules that are expensive to import (the FSDP engine, the agent-loop
machinery); registering with them only in the processes that actually import them keeps
``import verl`` cheap everywhere else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _AfterImportLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, callbacks: list[Callable[[ModuleType], None]]) -> None:
        self._loader = loader
        self._callbacks = callbacks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for callback in self._callbacks:
            callback(module)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Runs callbacks right after a named module's code has executed."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        callbacks = self.callbacks.pop(fullname, None)
        if callbacks is None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                spec.loader = _AfterImportLoader(spec.loader, callbacks)
                return spec
        return None


_FINDER = _AfterImportFinder()


def when_imported(module_name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once ``module_name`` is imported (now, if it already is)."""
    module = sys.modules.get(module_name)
    if module is not None:
        callback(module)
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.callbacks.setdefault(module_name, []).append(callback)
