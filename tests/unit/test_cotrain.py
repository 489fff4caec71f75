"""Co-trained subagents: a run's recorded segments, its outputs, the credit rules, their metrics, and the settings."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from verl_parl.rewards.scorers import result_precision
from verl_parl.settings.errors import ConfigError
from verl_parl.swarm.cotrain import RecordingBackend, subagent_outputs
from verl_parl.swarm.credit import BatchRoles, CreditRows, apply_credit, episode_credit, result_credit
from verl_parl.swarm.settings import cotrain_errors, parse_swarm
from verl_parl.trainer.cotrain import run_rewards


def recorded(*calls: tuple[list[int], list[int]]) -> RecordingBackend:
    backend = RecordingBackend(server_manager=None)
    for version, (prompt, tokens) in enumerate(calls):
        backend.record(prompt, tokens, [-0.1 * t for t in tokens], {"global_steps": version})
    return backend


def test_a_continued_prompt_extends_the_segment_and_another_opens_one() -> None:
    backend = recorded(
        ([1, 2], [3, 4]),  # the first generation
        ([1, 2, 3, 4, 5, 6], [7]),  # the tool result 5, 6 came back: the same segment, masked out
        ([1, 9], [8]),  # the context was rewritten: a new segment
    )
    first, second = backend.segments
    assert (first.prompt_ids, first.response_ids, first.response_mask) == ([1, 2], [3, 4, 5, 6, 7], [1, 1, 0, 0, 1])
    assert first.response_logprobs == pytest.approx([-0.3, -0.4, 0.0, 0.0, -0.7])
    assert (first.turns, first.versions.fields()) == (2, {"min_global_steps": 0, "max_global_steps": 1})
    assert (second.prompt_ids, second.response_ids, second.response_mask) == ([1, 9], [8], [1])
    short = RecordingBackend(server_manager=None)
    short.record([1], [2, 3], [-1.0], {})  # fewer log-probs than tokens: the segment reports none
    assert short.segments[0].without_logprobs


def test_subagent_outputs_are_one_per_segment_cut_to_the_response_limit() -> None:
    runs = [recorded(([1, 2], [3, 4]), ([1, 2, 3, 4, 5, 6], [7])).segments, recorded(([1], [2])).segments]
    outputs = subagent_outputs(runs, response_length=4)
    assert [o.extra_fields["subagent_run"] for o in outputs] == [0, 1]
    assert outputs[0].response_ids == [3, 4, 5, 6] and outputs[0].response_mask == [1, 1, 0, 0]
    assert len(outputs[0].response_logprobs) == 4 and outputs[0].extra_fields["subagent_cut_tokens"] == 1
    assert outputs[1].extra_fields["subagent_cut_tokens"] == 0 and outputs[1].num_turns == 2
    assert subagent_outputs([[]], response_length=4) == []  # a run that never generated trains nothing


def rows(runs: list[int | None], rewards: list[float | None], groups: list[str] | None = None) -> CreditRows:
    groups = groups or ["u"] * len(runs)
    return CreditRows(
        groups=groups,
        episodes=[f"{g}_{i // 2}" for i, g in enumerate(groups)],  # rows 0-1 episode 0, 2-3 episode 1, ...
        runs=runs,
        rewards=rewards,
        advantages=torch.tensor([0.5] * len(runs)),
    )


def test_episode_credit_gives_every_row_its_episodes_advantage() -> None:
    batch = rows([0, None, 0, None], [1.0, None, 0.0, None])
    assert episode_credit(batch).tolist() == [0.5] * 4


def test_result_credit_normalises_each_run_once_in_its_group() -> None:
    # episode 0: run 0 right (2 segments: rows 0-1); episode 1: run 0 wrong (row 2), the orchestrator's row 3
    batch = CreditRows(
        groups=["u"] * 4,
        episodes=["u_0", "u_0", "u_1", "u_1"],
        runs=[0, 0, 0, None],
        rewards=[1.0, 1.0, 0.0, None],
        advantages=torch.tensor([0.5, 0.5, -0.5, -0.5]),
    )
    credited = result_credit(batch)
    spread = torch.tensor([1.0, 0.0]).std().item()  # the two runs, each once
    assert credited.tolist() == pytest.approx([0.5 / spread, 0.5 / spread, -0.5 / spread, -0.5], rel=1e-4)
    alone = result_credit(rows([0, None], [1.0, None], groups=["a", "a"]))
    assert alone[0] == 0.0  # a run alone in its group has no baseline
    unverified = result_credit(rows([0, None, 1, None], [None, None, 0.3, None]))
    assert unverified[0] == 0.5  # a run its task cannot verify keeps its episode's advantage
    centred = result_credit(CreditRows(**{**batch.__dict__, "norm_by_std": False}))
    assert centred[:3].tolist() == pytest.approx([0.5, 0.5, -0.5])


def test_apply_credit_rewrites_subagent_rows_on_their_trained_tokens_and_reports_metrics() -> None:
    mask = torch.tensor([[1, 0, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]])  # the last: verl's padding, a copied row
    data = SimpleNamespace(
        batch={
            "response_mask": mask,
            "advantages": torch.tensor([[0.2, 0.0, 0.2], [0.2, 0.2, 0.2], [0.0, -0.2, -0.2], [0.0, 0.0, 0.0]]),
            "returns": torch.zeros(4, 3),
            "token_level_rewards": torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0] * 3]),
        }
    )
    roles = BatchRoles(
        keys=["u_0_0", "u_0_1", "u_1_0", "pad_0_0"],
        runs=[0, None, None, 0],
        rewards=[None] * 4,
        versions=[2, 2, 2, 2],
        cut_tokens=[3, 0, 0, 0],
    )
    metrics: dict[str, float] = {}
    apply_credit(data, roles, lambda r: torch.full_like(r.advantages, 9.0), norm_by_std=True, metrics=metrics)
    assert data.batch["advantages"][0].tolist() == [9.0, 0.0, 9.0]  # the subagent row, on its mask only
    assert data.batch["returns"][0].tolist() == [9.0, 0.0, 9.0]
    assert data.batch["advantages"][1:3].flatten().tolist() == pytest.approx([0.2, 0.2, 0.2, 0.0, -0.2, -0.2])  # kept
    assert data.batch["advantages"][3].tolist() == [0.0] * 3  # padding trains nothing
    assert metrics["parl/subagent/tokens"] == 2 and metrics["parl/subagent/token_share"] == pytest.approx(2 / 7)
    assert metrics["parl/subagent/rows"] == 1 and metrics["parl/subagent/cut_tokens"] == 3
    assert metrics["parl/subagent/advantage/orchestrator"] == pytest.approx(0.0)  # 0.2 and -0.2 (first trained)
    assert metrics["parl/subagent/reward/orchestrator"] == pytest.approx(0.5)
    assert metrics["parl/subagent/advantage/subagent"] == 9.0 and metrics["parl/subagent/policy_version"] == 2
    with pytest.raises(ValueError, match="2 rows read for a batch of 4"):
        apply_credit(
            data,
            BatchRoles(["a", "b"], [None] * 2, [None] * 2, [None] * 2, [0, 0]),
            episode_credit,
            norm_by_std=True,
            metrics={},
        )


GOLD = {"csv": "word,number\nlima,42\nherat,7\n", "keys": "word", "metrics": {"number": "number"}}


def test_a_runs_own_reward_is_its_rows_precision_against_the_gold() -> None:
    assert result_precision("| word | number |\n| lima | 42 |", GOLD) == 1.0
    assert result_precision("| word | number |\n| lima | 41 |", GOLD) == 0.5  # the key right, the number wrong
    assert result_precision("nothing found", GOLD) == 0.0
    assert result_precision("42", "42", {"keys": ""}) is None  # not a keyed table: the task cannot verify a run
    records = [{"result": "| word | number |\n| lima | 42 |"}, {"result": "| word | number |\n| herat | 8 |"}]
    extras = [{"subagent_run": 1}, {"subagent_run": 0}, {"parl_subagents": records}, {"subagent_run": 5}]
    keys = ["u_0_0", "u_0_1", "u_0_2", "u_1_0"]  # the last row's episode has no records
    rewards = run_rewards(keys, extras, [(GOLD, {})] * 4)
    assert rewards == [0.5, 1.0, None, None]


def parsed(**subagent: object) -> object:
    return parse_swarm({}, {"mode": "shared", "temperature": None, **subagent}, "model")


def test_cotrained_settings_name_what_is_wrong() -> None:
    assert parsed(train=True).subagent.credit == "episode"
    assert parsed(train=True).subagent.sampling({"logprobs": True, "temperature": 0.7})["logprobs"] is True
    assert parsed().subagent.sampling({"logprobs": True})["logprobs"] is False  # nothing trains on a frozen run's
    with pytest.raises(ConfigError, match=r"needs parl\.subagent\.mode=shared, not 'dedicated'"):
        parsed(train=True, mode="dedicated")
    with pytest.raises(ConfigError, match=r"set parl\.subagent\.temperature=null, not 0"):
        parsed(train=True, temperature=0)
    with pytest.raises(ConfigError, match="unknown credit rule 'results'; did you mean 'result'"):
        parsed(train=True, credit="results")
    settings = parsed(train=True)
    config = OmegaConf.create({"trainer": {"use_v1": False}, "parl": {"reward": {"researcher": {"gamma": 0.9}}}})
    problems = cotrain_errors(settings, config)  # type: ignore[arg-type]
    assert len(problems) == 2 and "trainer.use_v1=true" in problems[0] and "gamma=null" in problems[1]
    assert cotrain_errors(parsed(), config) == []  # type: ignore[arg-type]


HALVED_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import CreditSpec


@hookimpl
def verl_parl_register_credits(register):
    def halved(rows):
        return rows.advantages / 2

    register(CreditSpec(name="halved", factory=halved, description="half the episode's advantage"))
"""


def test_a_plugin_credit_rule_is_selected_by_name(
    install_plugin: Callable[[str, dict[str, str]], dict[str, str]],
) -> None:
    """A third party's rule (``verl_parl_register_credits``) is what ``parl.subagent.credit`` names."""
    from verl_parl.swarm.credit import credit_rule

    install_plugin("vp-halved", {"halved": HALVED_PLUGIN})
    assert parsed(train=True, credit="halved").subagent.credit == "halved"
    assert credit_rule("halved")(rows([0, None], [None, None])).tolist() == [0.25, 0.25]
    with pytest.raises(ConfigError, match="Known credit rule names: episode, halved, result"):
        parsed(train=True, credit="nope")
