"""``parl.cluster``: what the nodes of a joined Ray cluster share, and how long the run waits for Ray to place its
workers (on any cluster, the private one too)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, did_you_mean
from verl_parl.settings.typecheck import type_errors


@dataclass(frozen=True)
@yaml_defaults("cluster")
class ClusterSettings:
    """See ``configs/parl_trainer.yaml`` (``parl.cluster``) for each field."""

    shared_dir: str | None = IN_YAML
    placement_timeout_s: float | None = IN_YAML

    def __post_init__(self) -> None:
        errors = []
        if self.shared_dir is not None and not os.path.isabs(self.shared_dir):
            errors.append(
                f"parl.cluster.shared_dir: {self.shared_dir!r} must be an absolute path (the same on every node)"
            )
        wait = self.placement_timeout_s
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0):
            errors.append(
                f"parl.cluster.placement_timeout_s: {wait!r} must be a positive number of seconds, or null to wait "
                "as long as Ray does (a cluster whose autoscaler adds nodes)"
            )
        if errors:
            raise ConfigError(errors)

    def shares(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is under :attr:`shared_dir` (read in place on every node)."""
        if self.shared_dir is None:
            return False
        root, target = os.path.normpath(self.shared_dir), os.path.normpath(os.fspath(path))
        return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def parse_cluster(raw: dict[str, Any]) -> ClusterSettings:
    """``parl.cluster`` dict -> settings; unknown keys and bad values in one :class:`ConfigError`."""
    known = [f.name for f in fields(ClusterSettings)]
    errors = [f"parl.cluster.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in known]
    errors += type_errors(ClusterSettings, raw, "parl.cluster")
    if errors:
        raise ConfigError(errors)
    return ClusterSettings(**raw)
