"""A verl ``compute_score`` that scores with any registered verl-parl scorer.

Point verl at it with::

    reward.custom_reward_function.path: <this file>      # ${parl_asset:reward_fn} in our configs
    reward.custom_reward_function.name: compute_score
    reward.custom_reward_function.reward_kwargs.scorer: number_match

The scorer is looked up in the plugin registries of the reward worker's own process.
"""

from __future__ import annotations

from typing import Any

from verl_parl.plugins import get_registries


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    scorer: str = "number_match",
    **kwargs: Any,
) -> float | dict[str, Any]:
    """Score one response with the registered scorer ``scorer`` (``score`` is verl's reward)."""
    score_fn = get_registries().scorers.get(scorer).factory()
    return score_fn(solution_str=solution_str, ground_truth=ground_truth, extra_info=extra_info or {})
