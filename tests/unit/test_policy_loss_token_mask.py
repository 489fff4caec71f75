"""``parl_token_mask`` (K2.5's token-masked policy loss) on crafted tensors, through verl's registry."""

from __future__ import annotations

import math

import pytest
import torch
from verl.trainer.ppo import core_algos
from verl.workers.config.actor import ActorConfig, PolicyLossConfig

from verl_parl.advantages.token_mask import NAME, token_keep_mask, token_mask_losses

# log-ratios per token: inside [-0.2, 0.2], above, below, on both edges, inside
LOG_RATIOS = torch.tensor([[0.1, 0.5, -0.5, 0.2], [-0.2, 0.0, 0.3, -0.05]])
ADVANTAGES = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0]])
EXPECTED_KEEP = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 1.0]])


def actor_config(low: float = 0.2, high: float = 0.2, tau: float | None = 0.0) -> ActorConfig:
    return ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=2,
        clip_ratio_low=low,
        clip_ratio_high=high,
        policy_loss=PolicyLossConfig(loss_mode=NAME, dro_beta=tau),
    )


def loss_and_grad(config: ActorConfig, response_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    old = torch.zeros_like(LOG_RATIOS)  # log r = LOG_RATIOS exactly (the band edges are inclusive)
    new = (old + LOG_RATIOS).clone().requires_grad_(True)
    mask = torch.ones_like(LOG_RATIOS) if response_mask is None else response_mask
    loss_fn = core_algos.get_policy_loss_fn(config.policy_loss.loss_mode)
    loss, metrics = loss_fn(
        old_log_prob=old,
        log_prob=new,
        advantages=ADVANTAGES,
        response_mask=mask,
        loss_agg_mode="token-sum",
        config=config,
    )
    loss.backward()
    assert metrics["actor/pg_clipfrac"] == pytest.approx(float((1 - EXPECTED_KEEP)[mask.bool()].mean()))
    assert new.grad is not None
    return loss.detach(), new.grad


def test_keep_mask_is_the_log_ratio_band_inclusive() -> None:
    assert torch.equal(token_keep_mask(LOG_RATIOS, -0.2, 0.2), EXPECTED_KEEP)


def test_registered_in_verls_policy_loss_registry_by_the_plugin_hook() -> None:
    """``import verl`` loads verl_parl.trainer.verl_plugin (entry point), which registers it with core_algos."""
    assert core_algos.get_policy_loss_fn(NAME).__name__ == "compute_policy_loss_parl_token_mask"


def test_gradient_is_zero_on_masked_tokens_whatever_the_advantage_sign() -> None:
    _, grad = loss_and_grad(actor_config(tau=0.0))
    # masked: (0,1) log r = 0.5 with A > 0; (0,2) log r = -0.5 with A > 0; (1,2) log r = 0.3 with A < 0
    assert grad[0, 1] == 0 and grad[0, 2] == 0 and grad[1, 2] == 0
    # kept: d(-r·A)/d log π = -A·r
    for i, j in [(0, 0), (0, 3), (1, 0), (1, 1), (1, 3)]:
        expected = -ADVANTAGES[i, j] * math.exp(float(LOG_RATIOS[i, j]))
        assert float(grad[i, j]) == pytest.approx(float(expected), rel=1e-5)


def test_loss_value_matches_hand_computation_with_the_penalty() -> None:
    tau = 0.5
    loss, grad = loss_and_grad(actor_config(tau=tau))
    r = torch.exp(LOG_RATIOS)
    expected = (-EXPECTED_KEEP * r * ADVANTAGES + 0.5 * tau * LOG_RATIOS**2).sum()
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    # masked tokens keep only the penalty's gradient tau * log r
    assert float(grad[0, 1]) == pytest.approx(tau * 0.5, rel=1e-5)
    assert float(grad[1, 2]) == pytest.approx(tau * 0.3, rel=1e-5)


def test_response_mask_drops_padding_and_asymmetric_bounds() -> None:
    response_mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    _, grad = loss_and_grad(actor_config(tau=0.0), response_mask)
    assert grad[0, 3] == 0  # padding
    losses, keep, _ = token_mask_losses(
        torch.zeros(1, 3), torch.tensor([[-0.5, 0.5, 0.9]]), torch.ones(1, 3), alpha=-0.1, beta=0.6, tau=0.0
    )
    assert keep.tolist() == [[0.0, 1.0, 0.0]]
    assert losses[0, 0] == 0 and losses[0, 2] == 0


def test_differs_from_verls_vanilla_clip_which_depends_on_the_sign() -> None:
    """vanilla PPO keeps the gradient of a token with A > 0 and ratio below the band; ours zeroes it."""
    config = actor_config(tau=0.0)
    old = torch.zeros(1, 1)
    new = torch.tensor([[-0.5]], requires_grad=True)
    vanilla = core_algos.get_policy_loss_fn("vanilla")
    loss, _ = vanilla(
        old_log_prob=old, log_prob=new, advantages=torch.ones(1, 1), response_mask=torch.ones(1, 1), config=config
    )
    loss.backward()
    assert new.grad is not None and float(new.grad) != 0.0
    _, keep, _ = token_mask_losses(old, new.detach(), torch.ones(1, 1), alpha=-0.2, beta=0.2, tau=0.0)
    assert float(keep) == 0.0


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="dro_beta"):
        loss_and_grad(actor_config(tau=None))
    with pytest.raises(ValueError, match="alpha < 0 < beta"):
        token_mask_losses(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), alpha=0.1, beta=0.2, tau=0.0)
