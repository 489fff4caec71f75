"""A verl ``compute_score`` that scores with any registered verl-parl scorer.

Point verl at it with::

    reward.custom_reward_function.path: <this file>      # ${parl_asset:reward_fn} in our configs
    reward.custom_reward_function.name: compute_score
    reward.custom_reward_function.reward_kwargs.scorer: number_match

The scorer is looked up in the plugin registries of the reward worker's own process. The ``parl``
reward manager passes the run's judge (``parl.reward.judge``) as ``judge=``; it reaches the scorers
that take a ``judge`` keyword (``llm_judge``, ``table``, ``widesearch``). Other ``reward_kwargs`` reach the
scorers that name them as parameters (``reward_kwargs.align=true`` for ``widesearch``); the rest are ignored.
"""

from __future__ import annotations

import inspect
from typing import Any

from verl_parl.host.manager import get_registries
from verl_parl.rewards.judge import takes_judge


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    scorer: str = "number_match",
    judge: Any = None,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """Score one response with the registered scorer ``scorer`` (``score`` is verl's reward)."""
    score_fn = get_registries().scorers.get(scorer).factory()
    extra = {"judge": judge} if judge is not None and takes_judge(score_fn) else {}
    extra.update(accepted_options(score_fn, kwargs))
    return score_fn(solution_str=solution_str, ground_truth=ground_truth, extra_info=extra_info or {}, **extra)


def accepted_options(fn: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` that ``fn`` names as keyword parameters (a scorer's own options among the reward kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    named = {
        name
        for name, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    reserved = {"solution_str", "ground_truth", "extra_info", "judge"}
    return {k: v for k, v in options.items() if k in named - reserved}
