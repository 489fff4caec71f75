"""The verl side of the staged rewards: registries, the ``parl`` manager on a real DataProto, metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import verl  # noqa: F401 - loads verl_parl.trainer.verl_plugin, which registers parl and reinforce_nsc
from omegaconf import OmegaConf

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.settings import NscConfig
from verl_parl.trainer import advantage_estimator as verl_estimator
from verl_parl.trainer.reward_hooks import reward_metrics
from verl_parl.trainer.reward_manager import episode_step


def test_reinforce_nsc_is_in_verls_registry_and_broadcasts_advantages() -> None:
    from verl.trainer.ppo import core_algos

    fn = core_algos.get_adv_estimator_fn("reinforce_nsc")
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 0]])
    context = verl_estimator.EstimatorContext(nsc=NscConfig(), size=3, infra_failed=[False, False, True])
    verl_estimator.bind(core_algos, context)
    try:
        fn = core_algos.get_adv_estimator_fn("reinforce_nsc")
        adv, returns = fn(token_level_rewards=rewards, response_mask=mask, index=np.array(["a"] * 3), config=None)
    finally:
        verl_estimator.unbind(core_algos)
    # baseline over the two valid samples = 0.5; the infra-failed one gets 0
    assert adv.tolist() == [[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5], [0.0, 0.0, 0.0]]
    assert torch.equal(adv, returns)
    assert context.metrics["parl/nsc/num_infra_failed"] == 1.0
    assert context.metrics["parl/nsc/dropped_fraction"] == 0.0
    assert core_algos.get_adv_estimator_fn("reinforce_nsc") is verl_estimator.compute_reinforce_nsc_advantage
    verl_estimator.register(core_algos)  # idempotent, also while bound


def test_a_context_built_for_another_batch_is_an_error_naming_the_sizes() -> None:
    rewards, mask = torch.ones(2, 3), torch.ones(2, 3)
    stale = verl_estimator.EstimatorContext(size=3, infra_failed=[False, False, True])
    with pytest.raises(ValueError, match=r"batch of 2 samples \(it was built for 3; infra_failed has 3\)"):
        verl_estimator.compute_reinforce_nsc_advantage(rewards, mask, context=stale)
    adv, _ = verl_estimator.compute_reinforce_nsc_advantage(rewards, mask, index=["g", "g"])  # no context: defaults
    assert adv.tolist() == [[0.0] * 3] * 2


def test_reward_metrics_average_the_parl_terms() -> None:
    infos = [{"parl_r_perf": 1.0, "parl_lambda_parallel": 0.1}, {"parl_r_perf": 0.0, "parl_lambda_parallel": 0.1}, None]
    assert reward_metrics(infos) == {"parl/reward/r_perf": 0.5, "parl/lambda_parallel": 0.1}
    spurious = [{"parl_spurious_fraction": 0.0}, {"parl_spurious_fraction": 0.5}, {"parl_spurious_fraction": 1.0}]
    assert reward_metrics(spurious) == {"parl/spurious_fraction/mean": 0.5}


def test_episode_step_prefers_the_samples_global_step() -> None:
    assert episode_step({"global_steps": 3}, {"max_global_steps": 2}) == 3
    assert episode_step({}, {"max_global_steps": 2}) == 2
    assert episode_step({}, {}) == 0


class FakeTokenizer:
    """Decodes token ids as characters (ids are code points)."""

    def decode(self, ids: torch.Tensor, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)


def make_item(
    text: str, extra: dict, global_steps: int, ground_truth: str = "7", extra_info: dict | None = None
) -> object:
    from tensordict import TensorDict
    from verl import DataProto

    prompt = torch.tensor([ord("q")])
    response = torch.tensor([ord(c) for c in text])
    batch = TensorDict(
        {
            "prompts": prompt[None],
            "responses": response[None],
            "attention_mask": torch.ones(1, len(prompt) + len(response), dtype=torch.int64),
        },
        batch_size=1,
    )
    non_tensor = {
        "data_source": np.array(["test"], dtype=object),
        "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
        "extra_info": np.array([dict(extra_info or {})], dtype=object),
        "global_steps": np.array([global_steps]),
        "tool_extra_fields": np.array([extra], dtype=object),
        "__num_turns__": np.array([2]),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def exact_seven(data_source: str, solution_str: str, ground_truth: str, extra_info: dict) -> dict:
    if "boom" in solution_str:
        raise InfraFailureError("judge endpoint unreachable")
    return {"score": float(solution_str.strip() == ground_truth), "acc": float(solution_str.strip() == ground_truth)}


def make_manager(**reward: object):
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    cfg = OmegaConf.create({"parl": {"reward": reward}, "reward": {}})
    return get_reward_manager_cls("parl")(config=cfg, tokenizer=FakeTokenizer(), compute_score=exact_seven)


async def test_parl_manager_adds_the_staged_terms_at_the_episodes_step() -> None:
    manager = make_manager(lambda_parallel={"num_steps": 10}, lambda_finish={"num_steps": 10})
    extra = {"parl_num_assigned": 4, "parl_num_finished": 3, "parl_stage_sub_steps": [[4, 4], []]}
    out = await manager.run_single(make_item("7", extra, global_steps=5))
    info = out["reward_extra_info"]
    # step 5 of a 0.1 -> 0 anneal over 10 steps: λ = 0.05; 1 + 0.05*0.4 + 0.05*0.75 = 1.0575
    assert info["parl_lambda_parallel"] == pytest.approx(0.05)
    assert info["parl_lambda_finish"] == pytest.approx(0.05)
    assert (info["parl_r_perf"], info["parl_r_parallel"], info["parl_r_finish"]) == pytest.approx((1.0, 0.4, 0.75))
    assert out["reward_score"] == pytest.approx(1.0575)
    assert info["parl_infra_failed"] == 0.0
    assert "parl_spurious_fraction" not in info  # no per-assignment list: nothing to judge, paper credit
    assert info["parl_looped"] == 0.0


async def test_parl_manager_reports_a_looped_response_and_pays_it_nothing_extra() -> None:
    manager = make_manager(lambda_parallel={"num_steps": 10}, lambda_finish={"num_steps": 10})
    extra = {"parl_num_assigned": 1, "parl_num_finished": 1, "parl_stage_sub_steps": [[2], []]}
    plain = await manager.run_single(make_item("8", extra, global_steps=5))
    loop = await manager.run_single(make_item("8" + " 41 |" * 10, extra, global_steps=5))
    assert (plain["reward_extra_info"]["parl_looped"], loop["reward_extra_info"]["parl_looped"]) == (0.0, 1.0)
    assert loop["reward_score"] == plain["reward_score"]  # a diagnostic: no term reads it
    infos = [plain["reward_extra_info"], loop["reward_extra_info"]]
    assert reward_metrics(infos)["parl/looped/mean"] == 0.5


@pytest.mark.parametrize("mode", ["pay", "zero"])
async def test_an_episode_whose_own_turns_loop_earns_nothing_with_looped_zero(mode: str) -> None:
    manager = make_manager(
        lambda_parallel={"num_steps": 10}, lambda_finish={"num_steps": 10}, credit={"mode": "paper", "looped": mode}
    )
    extra = {"parl_num_assigned": 1, "parl_num_finished": 1, "parl_stage_sub_steps": [[2], []]}
    clean = await manager.run_single(make_item("7", {**extra, "parl_policy_looped": 0.0}, global_steps=5))
    loop = await manager.run_single(make_item("7", {**extra, "parl_policy_looped": 1.0}, global_steps=5))
    assert clean["reward_score"] == pytest.approx(1.0 + 0.05 * 0.0 + 0.05 * 1.0)  # one subagent: nothing off the path
    assert loop["reward_score"] == (0.0 if mode == "zero" else clean["reward_score"])
    assert loop["reward_extra_info"]["parl_r_perf"] == 1.0  # the scorer's verdict stays logged
    infos = [clean["reward_extra_info"], loop["reward_extra_info"]]
    assert reward_metrics(infos)["parl/policy_looped/mean"] == 0.5


def test_looped_must_be_pay_or_zero() -> None:
    from verl_parl.rewards.settings import CreditConfig, RewardConfigError

    with pytest.raises(RewardConfigError, match=r"credit.looped: 'sometimes' is not one of \('pay', 'zero'\)"):
        CreditConfig(looped="sometimes")


def swarm_extra(garbled_prompt: str) -> dict:
    """Two 4-step subagents in one stage, then the answer stage: one names the task, one does not."""
    sub = {"stage": 0, "steps": 4, "tool_calls": 1, "returned": True, "result": "| Germany | Berlin |"}
    return {
        "parl_num_assigned": 2,
        "parl_num_finished": 2,
        "parl_stage_sub_steps": [[4, 4], []],
        "parl_subagents": [{**sub, "prompt": "Find the capital of Germany."}, {**sub, "prompt": garbled_prompt}],
    }


@pytest.mark.parametrize(("mode", "r_parallel", "r_finish"), [("guarded", 0.0, 0.5), ("paper", 0.4, 1.0)])
async def test_parl_manager_credits_per_parl_reward_credit(mode: str, r_parallel: float, r_finish: float) -> None:
    manager = make_manager(credit={"mode": mode}, lambda_parallel={"kind": "constant", "start": 0.1})
    wide = {"keys": "country", "question": "Look up the capital of each of these countries: Germany; France."}
    item = make_item("7", swarm_extra("zzq capital table blorp"), 1, "country,capital\nGermany,Berlin\n", wide)
    info = (await manager.run_single(item))["reward_extra_info"]
    # paper: saved 4 of (1+8)+1 = 10; guarded: the garbled prompt saves nothing and does not finish
    assert (info["parl_r_parallel"], info["parl_r_finish"]) == pytest.approx((r_parallel, r_finish))
    assert info["parl_spurious_fraction"] == 0.5  # logged in both modes


async def test_parl_manager_scores_the_rows_the_subagents_returned_on_table_tasks() -> None:
    manager = make_manager()
    wide = {"keys": "country", "question": "Look up the capital of each of these countries: Germany; France."}
    item = make_item("7", swarm_extra("Find the capital of France."), 1, "country,capital\nGermany,Berlin\n", wide)
    info = (await manager.run_single(item))["reward_extra_info"]
    # both subagents returned "| Germany | Berlin |": the first row is right, its repeat is a duplicate key
    assert info["parl_results_item_f1"] == 1.0
    assert reward_metrics([info])["parl/results_item_f1/mean"] == 1.0
    assert info["parl_coverage"] == 1.0  # the one gold row, Germany, was asked for
    two = "country,capital\nGermany,Berlin\nPeru,Lima\n"
    half = await manager.run_single(make_item("7", swarm_extra("Find the capital of France."), 1, two, wide))
    assert reward_metrics([half["reward_extra_info"]])["parl/coverage/mean"] == 0.5  # Peru never asked for
    deep = (await manager.run_single(make_item("7", swarm_extra("Find 7."), 1)))["reward_extra_info"]
    assert "parl_results_item_f1" not in deep and "parl_coverage" not in deep  # a short answer, not a keyed table
    single = await manager.run_single(make_item("7", {}, 1, "country,capital\nGermany,Berlin\n", wide))
    assert "parl_results_item_f1" not in single["reward_extra_info"]  # no subagents: nothing to score
    assert "parl_coverage" not in single["reward_extra_info"]


async def test_parl_manager_reads_the_question_from_the_chat_prompt_and_reports_zero_without_subagents() -> None:
    manager = make_manager()
    item = make_item("7", swarm_extra("compute 12 * 9"), 1)
    item.non_tensor_batch["raw_prompt"] = np.array([[{"role": "user", "content": "What is 17 * 4?"}]], dtype=object)
    info = (await manager.run_single(item))["reward_extra_info"]
    # no names in "What is 17 * 4?": "Find the capital of Germany." and "compute 12 * 9" share none of {17, 4}
    assert info["parl_spurious_fraction"] == 1.0
    assert info["parl_r_parallel"] == 0.0
    single = (await manager.run_single(make_item("7", {}, 1)))["reward_extra_info"]
    assert single["parl_spurious_fraction"] == 0.0


async def test_parl_manager_blog_form_and_single_agent_episode() -> None:
    manager = make_manager(form="blog", lambda_parallel={"kind": "constant", "start": 0.1})
    out = await manager.run_single(make_item("7", {}, global_steps=1))
    assert out["reward_score"] == pytest.approx(0.9)  # (1 - 0.1) * 1, no parallelism
    wrong = await manager.run_single(make_item("8", {}, global_steps=1))
    assert wrong["reward_score"] == 0.0


async def test_parl_manager_marks_infra_failures_instead_of_scoring_them() -> None:
    out = await make_manager().run_single(make_item("boom", {}, global_steps=1))
    assert out["reward_extra_info"]["parl_infra_failed"] == 1.0
    assert "judge endpoint unreachable" in out["reward_extra_info"]["infra_reason"]


class FakeStack:
    def __init__(self, items: list) -> None:
        self.items = items

    def tolist(self) -> list:
        return self.items


class FakeTQ:
    """TransferQueue stand-in holding each sample's ``extra_fields``."""

    def __init__(self, extra_fields: list) -> None:
        self.extra_fields = extra_fields

    def kv_batch_get(self, keys: list, partition_id: str, select_fields: list) -> dict:
        assert select_fields == ["extra_fields"]
        return {"extra_fields": FakeStack([self.extra_fields[int(k)] for k in keys])}


def test_advantage_hooks_log_terms_and_feed_the_estimator(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import transfer_queue

    from verl_parl.trainer.reward_hooks import after_advantage, before_advantage

    infos = [
        {"reward_extra_info": {"parl_r_perf": 1.0, "parl_lambda_parallel": 0.03, "parl_infra_failed": 0.0}},
        {"reward_extra_info": {"parl_r_perf": 0.0, "parl_lambda_parallel": 0.03, "parl_infra_failed": 1.0}},
    ]
    monkeypatch.setattr(transfer_queue, "kv_batch_get", FakeTQ(infos).kv_batch_get, raising=False)
    trainer = types.SimpleNamespace(
        config=OmegaConf.create(
            {
                "algorithm": {"adv_estimator": "reinforce_nsc"},
                "parl": {"reward": {"nsc": {"strategy": "lowest", "fraction": 0.5}}},
            }
        ),
        global_steps=7,
    )
    metrics: dict = {}
    batch = types.SimpleNamespace(keys=["0", "1"], partition_id="train")

    from verl.trainer.ppo import core_algos

    context = before_advantage(trainer, batch, metrics)  # what the parl_sync trainer calls before verl's estimator
    assert context.nsc == NscConfig(strategy="lowest", fraction=0.5)
    assert context.infra_failed == [False, True]
    assert context.step == 7 and context.size == 2
    bound = core_algos.get_adv_estimator_fn("reinforce_nsc")
    assert bound.func is verl_estimator.compute_reinforce_nsc_advantage and bound.keywords == {"context": context}
    context.metrics = {"parl/nsc/dropped_fraction": 0.25}  # as the estimator leaves them
    after_advantage(metrics, context)
    assert core_algos.get_adv_estimator_fn("reinforce_nsc") is verl_estimator.compute_reinforce_nsc_advantage
    assert metrics == {
        "parl/reward/r_perf": 1.0,  # the infra-failed sample's 0 is not the policy's: only counted as failed
        "parl/lambda_parallel": 0.03,
        "parl/reward/infra_failed": 0.5,
        "parl/nsc/dropped_fraction": 0.25,
    }


def test_advantage_hooks_leave_infra_failed_samples_out_of_grpo(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import transfer_queue
    from verl.trainer.ppo import core_algos

    from verl_parl.trainer.reward_hooks import after_advantage, before_advantage

    infos = [{"reward_extra_info": {"parl_r_perf": 1.0, "parl_infra_failed": float(i == 2)}} for i in range(3)]
    monkeypatch.setattr(transfer_queue, "kv_batch_get", FakeTQ(infos).kv_batch_get, raising=False)
    config = {"algorithm": {"adv_estimator": "grpo"}, "reward": {"reward_manager": {"name": "parl"}}}
    trainer = types.SimpleNamespace(config=OmegaConf.create(config), global_steps=1)
    batch = types.SimpleNamespace(keys=["0", "1", "2"], partition_id="train")  # FakeTQ indexes keys as ints
    plain = core_algos.compute_grpo_outcome_advantage
    metrics: dict = {}
    context = before_advantage(trainer, batch, metrics)
    assert core_algos.compute_grpo_outcome_advantage is not plain  # what verl's GRPO path calls is masked
    rewards = torch.tensor([[1.0], [0.0], [0.0]])
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards, response_mask=torch.ones_like(rewards), index=np.array(["u"] * 3)
    )
    assert adv[:, 0].tolist() == pytest.approx([0.7071, -0.7071, 0.0], abs=1e-4)
    after_advantage(metrics, context)
    assert core_algos.compute_grpo_outcome_advantage is plain
    assert metrics["parl/infra_failed/excluded"] == 1.0
    assert metrics["parl/reward/infra_failed"] == pytest.approx(1 / 3)


def test_wrapper_stays_out_of_runs_that_use_neither() -> None:
    from verl_parl.trainer.reward_hooks import in_use

    assert not in_use(
        OmegaConf.create({"algorithm": {"adv_estimator": "grpo"}, "reward": {"reward_manager": {"name": "naive"}}})
    )
    assert in_use(OmegaConf.create({"reward": {"reward_manager": {"name": "parl"}}}))


def test_a_failed_read_still_binds_the_runs_nsc_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import transfer_queue
    from verl.trainer.ppo import core_algos

    from verl_parl.trainer.reward_hooks import after_advantage, before_advantage

    def broken(**_: object) -> None:
        raise ConnectionError("transfer queue unreachable")

    monkeypatch.setattr(transfer_queue, "kv_batch_get", broken, raising=False)
    trainer = types.SimpleNamespace(
        config=OmegaConf.create(
            {"algorithm": {"adv_estimator": "reinforce_nsc"}, "parl": {"reward": {"nsc": {"strategy": "lowest"}}}}
        ),
        global_steps=3,
    )
    metrics: dict = {}
    context = before_advantage(trainer, types.SimpleNamespace(keys=["u_0_0", "u_1_0"], partition_id="t"), metrics)
    try:
        assert context.nsc.strategy == "lowest" and context.step == 3 and context.size == 2
        assert context.infra_failed is None and context.episodes == ["u_0", "u_1"]
        assert core_algos.get_adv_estimator_fn("reinforce_nsc").keywords == {"context": context}
    finally:
        after_advantage(metrics, context)
    assert metrics == context.metrics == {}


async def test_parl_manager_uses_the_reward_form_a_plugin_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``parl.reward.form`` names a reward in the rewards registry (``verl_parl_register_rewards``)."""
    from verl_parl.host import manager as plugins
    from verl_parl.plugin import hookimpl
    from verl_parl.registry import RewardSpec
    from verl_parl.rewards.forms import EpisodeReward

    def doubled(episode: EpisodeReward) -> dict[str, float]:
        return {"parl_reward": 2.0 * episode.r_perf, "parl_step": float(episode.step)}

    class Doubling:
        @hookimpl
        def verl_parl_register_rewards(self, register):  # type: ignore[no-untyped-def]
            register(RewardSpec(name="doubled", factory=lambda: doubled, description="2 x r_perf"))

    registries = plugins.collect_registries(plugins.create_plugin_manager(extra_plugins=[Doubling()]))
    monkeypatch.setattr(plugins, "get_registries", lambda: registries)
    out = await make_manager(form="doubled").run_single(make_item("7", {}, global_steps=3))
    assert out["reward_score"] == 2.0
    assert out["reward_extra_info"]["parl_step"] == 3.0
    with pytest.raises(ValueError, match="unknown reward 'dobled'; did you mean 'doubled'"):
        make_manager(form="dobled")
