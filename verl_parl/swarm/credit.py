"""Credit of co-trained subagents' tokens (``parl.subagent.credit``), applied after verl's advantage estimator.

verl's estimator gives every row of a session its episode's advantage: its GRPO path computes the group statistics on
each session's last output (the orchestrator's, :mod:`verl_parl.swarm.cotrain`) and broadcasts the result, and an
estimator that runs on every row sees the episode's reward on each of them. A credit rule, registered through
``verl_parl_register_credits``, then decides what the subagent rows get:

- ``episode``: the episode's advantage, unchanged, on every subagent token. This is WideSeek-R1's base rule, and the
  default: it needs nothing of the task, and every role is trained toward the one reward.
- ``result`` (ours): a run whose task can verify its result gets its own advantage. Its reward is the precision of
  the table rows it returned against the gold table (:func:`verl_parl.rewards.scorers.result_precision`, computed by
  the trainer hook from the episode's ``parl_subagents`` records, :mod:`verl_parl.trainer.cotrain`). It is
  normalised among the runs of its prompt's group, counting each run once however many segments it has, and divided
  by their std as verl's GRPO does (``algorithm.norm_adv_by_std_in_grpo``). A run alone in its group gets 0, and a
  run the task cannot verify keeps its episode's advantage.

:func:`bind` wraps verl's ``compute_advantage_for_multi_trajectories`` for one step. The orchestrator's rows are left
as the estimator made them. The step's ``parl/subagent/*`` metrics are written then.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

TRAINER_MODULE = "verl.trainer.ppo.v1.trainer_base"
FUNCTION = "compute_advantage_for_multi_trajectories"


@dataclass(frozen=True)
class CreditRows:
    """What a credit rule knows of one step's batch, per row."""

    groups: list[str]  # its prompt group (verl's uid)
    episodes: list[str]  # its episode (``{uid}_{session}``)
    runs: list[int | None]  # its subagent run's index in the episode; None: an orchestrator row
    rewards: list[float | None]  # the run's own reward; None: the task cannot verify it (or an orchestrator row)
    advantages: torch.Tensor  # (B,) the episode's advantage verl's estimator gave the row
    norm_by_std: bool = True  # algorithm.norm_adv_by_std_in_grpo

    def subagent_rows(self) -> list[int]:
        return [row for row, run in enumerate(self.runs) if run is not None]


def episode_credit(rows: CreditRows) -> torch.Tensor:
    """Registered credit ``episode``: every subagent row keeps its episode's advantage."""
    return rows.advantages.clone()


def result_credit(rows: CreditRows, epsilon: float = 1e-6) -> torch.Tensor:
    """Registered credit ``result``: a verifiable run's own reward against the other runs of its group."""
    advantages = rows.advantages.clone()
    runs: dict[tuple[str, int], float] = {}  # (episode, run) -> its reward: a run counts once
    group_of: dict[tuple[str, int], str] = {}
    for row in rows.subagent_rows():
        reward = rows.rewards[row]
        if reward is not None:
            key = (rows.episodes[row], int(rows.runs[row]))  # type: ignore[arg-type]  # a subagent row's run
            runs[key], group_of[key] = float(reward), rows.groups[row]
    by_group: dict[str, list[float]] = {}
    for key, reward in runs.items():
        by_group.setdefault(group_of[key], []).append(reward)
    for row in rows.subagent_rows():
        if rows.rewards[row] is None:
            continue
        rewards = by_group[rows.groups[row]]
        if len(rewards) < 2:
            advantages[row] = 0.0
            continue
        centred = float(rows.rewards[row]) - statistics.fmean(rewards)  # type: ignore[arg-type]
        advantages[row] = centred / (statistics.stdev(rewards) + epsilon) if rows.norm_by_std else centred
    return advantages


CreditRule = Callable[[CreditRows], torch.Tensor]


@dataclass(frozen=True)
class BatchRoles:
    """Per row of a step's batch: its TransferQueue key, its subagent run (None: the orchestrator's), the run's own
    reward (None: unverifiable), the policy version of its newest token, and its response tokens cut before training.
    """

    keys: list[str]
    runs: list[int | None]
    rewards: list[float | None]
    versions: list[int | None]
    cut_tokens: list[int]

    @classmethod
    def from_extra_fields(
        cls, keys: Sequence[str], extras: Sequence[Any], rewards: Sequence[float | None] | None = None
    ) -> BatchRoles:
        """The roles of rows whose ``extra_fields`` are ``extras``; ``rewards``: each row's run's own reward."""
        from verl_parl.swarm.cotrain import CUT_FIELD, RUN_FIELD

        rows = [extra if isinstance(extra, dict) else {} for extra in extras]
        return cls(
            keys=list(keys),
            runs=[None if row.get(RUN_FIELD) is None else int(row[RUN_FIELD]) for row in rows],
            rewards=list(rewards) if rewards is not None else [None] * len(rows),
            versions=[None if row.get("max_global_steps") is None else int(row["max_global_steps"]) for row in rows],
            cut_tokens=[int(row.get(CUT_FIELD) or 0) for row in rows],
        )


def credit_rule(name: str) -> CreditRule:
    """The credit rule registered as ``name``."""
    from verl_parl.host.manager import get_registries

    rule: CreditRule = get_registries().credits.get(name).factory
    return rule


def apply_credit(data: Any, roles: BatchRoles, rule: CreditRule, *, norm_by_std: bool, metrics: dict[str, Any]) -> None:
    """Give ``data``'s subagent rows (a verl ``DataProto`` after the estimator) the advantage ``rule`` says, on their
    mask-1 tokens, and write the step's ``parl/subagent/*`` metrics into ``metrics``."""
    batch = data.batch
    mask = batch["response_mask"]
    if len(roles.keys) != mask.shape[0]:
        raise ValueError(f"subagent credit: {len(roles.keys)} rows read for a batch of {mask.shape[0]}")
    advantages = batch["advantages"]
    first = mask.float().argmax(dim=1)  # verl's own rule: each row's value at its first trained token
    scalars = advantages[torch.arange(mask.shape[0]), first] * (mask.sum(dim=1) > 0)
    rows = CreditRows(
        groups=[key.rsplit("_", 2)[0] for key in roles.keys],
        episodes=[key.rsplit("_", 1)[0] for key in roles.keys],
        runs=roles.runs,
        rewards=roles.rewards,
        advantages=scalars.detach().float(),
        norm_by_std=norm_by_std,
    )
    credited = rule(rows)
    subagent = rows.subagent_rows()
    if subagent:
        index = torch.tensor(subagent)
        values = credited[index].to(advantages.dtype).unsqueeze(-1) * mask[index].to(advantages.dtype)
        advantages[index] = values
        batch["returns"][index] = values
    metrics.update(step_metrics(rows, credited, mask, batch["token_level_rewards"], roles))


def step_metrics(
    rows: CreditRows, credited: torch.Tensor, mask: torch.Tensor, rewards: torch.Tensor, roles: BatchRoles
) -> dict[str, float]:
    """``parl/subagent/*``: trained subagent tokens and their share of the batch's, rows, the per-role reward and
    advantage, the policy version the subagents generated with, and tokens cut before training. Rows without a
    trained token (verl's padding rows, which copy a real row's fields) count in none of them."""
    tokens = mask.sum(dim=1).float()
    subagent = [row for row in rows.subagent_rows() if tokens[row] > 0]
    orchestrator = [row for row, run in enumerate(rows.runs) if run is None and tokens[row] > 0]
    trained = float(tokens[subagent].sum()) if subagent else 0.0
    metrics = {
        "parl/subagent/rows": float(len(subagent)),
        "parl/subagent/tokens": trained,
        "parl/subagent/token_share": trained / max(1.0, float(tokens.sum())),
        "parl/subagent/cut_tokens": float(sum(roles.cut_tokens)),
    }
    if orchestrator:
        metrics["parl/subagent/advantage/orchestrator"] = float(rows.advantages[orchestrator].mean())
        metrics["parl/subagent/reward/orchestrator"] = float(rewards[orchestrator].sum(dim=1).mean())
    if subagent:
        metrics["parl/subagent/advantage/subagent"] = float(credited[subagent].mean())
    own = {(rows.episodes[row], rows.runs[row]): rows.rewards[row] for row in subagent if rows.rewards[row] is not None}
    if own:  # each run once
        metrics["parl/subagent/reward/subagent"] = statistics.fmean(float(r) for r in own.values())  # type: ignore[arg-type]
    versions = [roles.versions[row] for row in subagent if roles.versions[row] is not None]
    if versions:
        metrics["parl/subagent/policy_version"] = float(min(versions))
    return metrics


def bind(module: Any, roles: BatchRoles, rule: CreditRule, metrics: dict[str, Any]) -> Callable[[], None]:
    """Wrap ``module``'s ``compute_advantage_for_multi_trajectories`` (verl's v1 trainer calls it by that name) so that
    its result gets :func:`apply_credit`; returns what restores it."""
    original = getattr(module, FUNCTION)

    @functools.wraps(original)
    def credited(data: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(data, *args, **kwargs)
        norm = bool(kwargs.get("norm_adv_by_std_in_grpo", True))
        apply_credit(result, roles, rule, norm_by_std=norm, metrics=metrics)
        return result

    setattr(module, FUNCTION, credited)
    return lambda: setattr(module, FUNCTION, original)
