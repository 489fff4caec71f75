"""``parl_token_mask``: Kimi K2.5's policy loss with token-level masking, in verl's policy-loss registry.

K2.5 (arXiv 2602.02276, §4.4.2) publishes a group-mean baseline, token-level clipping that **zeroes the
gradient of every token whose log-ratio log(π_θ/π_old) leaves [α, β], whatever the advantage's sign**,
and a squared log-ratio penalty. No verl 0.9.1 loss does exactly that (see ``docs/rewards.md``):
``vanilla``/``dppo_*`` clip with sign-dependent bounds, ``dro`` has the penalty but no mask, and the
rollout-correction token rejection (``rollout_rs``) masks against the *rollout* policy once per batch,
not against π_old as θ moves.

Per response token t (shapes ``(B, L)``)::

    r_t    = exp(log π_θ − log π_old)
    m_t    = 1[α ≤ log r_t ≤ β]                      (no gradient flows through m)
    loss_t = −m_t · r_t · A_t + ½ τ (log r_t)²

aggregated with verl's ``agg_loss`` (``actor.loss_agg_mode``). Inside the band the gradient is
``−A_t r_t ∇log π_θ`` (the plain REINFORCE gradient at r = 1); outside it only the penalty acts.

The hyper-parameters reuse verl's existing actor keys, as verl's ``dppo_*`` losses do:
``α = −actor.clip_ratio_low``, ``β = actor.clip_ratio_high`` (log-ratio bounds, not ratio deltas), and
``τ = actor.policy_loss.dro_beta`` (the coefficient verl's ``dro`` loss gives the same ½τ(log r)²
penalty). The values K2.5 used are not published **[ours: choose them]**; τ must be set explicitly.
"""

from __future__ import annotations

from typing import Any

import torch

NAME = "parl_token_mask"


def token_keep_mask(log_ratio: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """``1.0`` where ``alpha <= log_ratio <= beta``, else ``0.0``; same shape, no gradient."""
    log_ratio = log_ratio.detach()
    return ((log_ratio >= alpha) & (log_ratio <= beta)).to(log_ratio.dtype)


def token_mask_losses(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    tau: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token losses ``−m·r·A + ½τ(log r)²``, the keep mask ``m`` and ``log r``; all ``(B, L)``."""
    if not alpha < 0.0 < beta:
        raise ValueError(f"{NAME}: need alpha < 0 < beta for the log-ratio band, got [{alpha}, {beta}]")
    if tau < 0:
        raise ValueError(f"{NAME}: tau (actor.policy_loss.dro_beta) must be >= 0, got {tau}")
    log_ratio = log_prob - old_log_prob
    keep = token_keep_mask(log_ratio, alpha, beta)
    ratio = torch.exp(torch.clamp(log_ratio, min=-20.0, max=20.0))
    losses = -keep * ratio * advantages + 0.5 * tau * log_ratio.square()
    return losses, keep, log_ratio


def loss_settings(config: Any) -> tuple[float, float, float]:
    """``(alpha, beta, tau)`` from verl's actor config (see the module docstring)."""
    if config is None:
        raise ValueError(f"{NAME}: needs the actor config")
    low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    tau = config.policy_loss.dro_beta
    if tau is None:
        raise ValueError(
            f"{NAME}: set actor_rollout_ref.actor.policy_loss.dro_beta, the squared log-ratio penalty τ (0 disables it)"
        )
    return -float(low), float(high), float(tau)


def compute_policy_loss_parl_token_mask(  # noqa: PLR0917 - verl's policy-loss signature, called by keyword
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy-loss signature: ``(pg_loss, metrics)``; ``actor/pg_clipfrac`` is the masked share."""
    from verl.trainer.ppo.core_algos import agg_loss
    from verl.utils import torch_functional as verl_f

    alpha, beta, tau = loss_settings(config)
    losses, keep, log_ratio = token_mask_losses(old_log_prob, log_prob, advantages, alpha=alpha, beta=beta, tau=tau)
    if rollout_is_weights is not None:
        losses = losses * rollout_is_weights
    pg_loss = agg_loss(
        loss_mat=losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **config.global_batch_info
    )
    masked = verl_f.masked_mean(1.0 - keep, response_mask)
    metrics = {
        "actor/pg_clipfrac": masked.detach().item(),
        "actor/ppo_kl": verl_f.masked_mean(-log_ratio, response_mask).detach().item(),
        "actor/pg_clipfrac_lower": verl_f.masked_mean(
            (log_ratio.detach() < alpha).to(keep.dtype), response_mask
        ).item(),
    }
    return pg_loss, metrics


def register(core_algos: Any) -> None:
    """Add ``parl_token_mask`` to ``verl.trainer.ppo.core_algos``'s policy-loss registry (idempotent)."""
    if core_algos.POLICY_LOSS_REGISTRY.get(NAME) is not compute_policy_loss_parl_token_mask:
        core_algos.register_policy_loss(NAME)(compute_policy_loss_parl_token_mask)
