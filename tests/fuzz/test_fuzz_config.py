"""The ``parl:`` section with arbitrary values at its keys: a parsed config or a ConfigError naming keys."""

from __future__ import annotations

from typing import Any

from fuzz_strategies import JSON_VALUES
from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError, parse_parl

# (path inside parl, what it holds by default) for the sections users override most
KEYS = [
    "profile",
    "embedded.task",
    "embedded.n_train",
    "embedded.n_val",
    "embedded.options",
    "swarm.max_subagents_per_turn",
    "swarm.max_orchestrator_steps",
    "swarm.critical_steps_budget",
    "swarm.subagent_tools",
    "swarm.subagent_limits",
    "swarm.subagent_limits.max_steps",
    "subagent",
    "reward.lambda_parallel",
    "reward.lambda_parallel.start",
    "reward.lambda_finish.kind",
    "reward.credit",
    "reward.credit.mode",
    "reward.credit.min_overlap",
    "reward.nsc.fraction",
    "context",
    "context.policy",
    "researcher.tools",
    "tools",
    "tools.search",
]
VALUES = JSON_VALUES | st.sampled_from([-1, 0, 10**12, float("nan"), float("inf"), "", "cpu", [], {}, "${oops}"])


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        child = tree.get(part)
        tree[part] = child = child if isinstance(child, dict) else {}
        tree = child
    tree[leaf] = value


@given(st.lists(st.tuples(st.sampled_from(KEYS), VALUES), min_size=1, max_size=4))
def test_any_values_give_a_config_or_a_config_error_naming_keys(changes: list[tuple[str, Any]]) -> None:
    raw: dict[str, Any] = {"output_dir": "out", "embedded": {"task": "arithmetic"}}
    for path, value in changes:
        _set(raw, path, value)
    try:
        section = OmegaConf.create(raw)
        OmegaConf.to_container(section, resolve=True)
    except Exception:  # noqa: BLE001 - a value OmegaConf itself refuses never reaches verl-parl
        return
    try:
        parse_parl(section)
    except ConfigError as error:
        assert error.errors and all(isinstance(e, str) and e.startswith("parl.") for e in error.errors), error.errors
