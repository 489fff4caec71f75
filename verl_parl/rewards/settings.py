"""``parl.reward``: settings of the ``parl`` reward manager and the ``reinforce_nsc`` estimator."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import OmegaConf

from verl_parl.advantages.nsc import BASELINES, STRATEGIES
from verl_parl.rewards.parl_reward import PARALLEL_KINDS
from verl_parl.rewards.schedules import ScheduleConfig, ScheduleError
from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import mapping_errors, type_errors

PREFIX = "parl.reward"


class RewardConfigError(ValueError):
    """Bad ``parl.reward`` values; ``errors`` lists each, key first."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass(frozen=True)
@yaml_defaults("reward.nsc")
class NscConfig:
    """``parl.reward.nsc``: REINFORCE baseline and negative-sample control (see ``verl_parl.advantages.nsc``)."""

    baseline: str = IN_YAML
    strategy: str = IN_YAML
    fraction: float = IN_YAML
    max_ratio: float = IN_YAML
    seed: int = IN_YAML

    def __post_init__(self) -> None:
        k, errors = f"{PREFIX}.nsc", []
        if self.baseline not in BASELINES:
            errors.append(f"{k}.baseline: {self.baseline!r} is not one of {BASELINES}")
        if self.strategy not in STRATEGIES:
            errors.append(f"{k}.strategy: {self.strategy!r} is not one of {STRATEGIES}")
        if not 0.0 <= self.fraction <= 1.0:
            errors.append(f"{k}.fraction: must be in [0, 1], got {self.fraction!r}")
        if self.max_ratio < 0:
            errors.append(f"{k}.max_ratio: must be >= 0, got {self.max_ratio!r}")
        if errors:
            raise RewardConfigError(errors)


CORRECTNESS_TEMPLATE = (
    "You grade answers. Question:\n{question}\n\nReference answer:\n{gold}\n\nCandidate answer:\n{answer}\n\n"
    "Is the candidate answer correct, i.e. equivalent to the reference? Reply with exactly one line: "
    "VERDICT: CORRECT or VERDICT: INCORRECT."
)
TEMPLATES = {"correctness": CORRECTNESS_TEMPLATE}
"""The LLM judge's prompt templates by name (``parl.reward.judge.template``); see :mod:`verl_parl.rewards.judge`."""

JUDGE_BACKENDS = ("none", "external", "frozen")


@dataclass(frozen=True)
@yaml_defaults("reward.judge")
class JudgeSettings:
    """``parl.reward.judge``: the LLM judge of the ``llm_judge`` scorer and ``llm`` table columns.

    ``backend``: ``none`` (only ``$VERL_PARL_JUDGE_BASE_URL``/``$VERL_PARL_JUDGE_MODEL``, if set),
    ``external`` (an OpenAI-compatible ``base_url`` serving ``model``) or ``frozen`` (the frozen-subagent
    group's servers, see :class:`verl_parl.rewards.judge.FrozenGroupAsk`). The environment variables,
    when both set, override the backend.
    """

    backend: str = IN_YAML
    base_url: str | None = IN_YAML
    model: str | None = IN_YAML
    template: str = IN_YAML
    concurrency: int = IN_YAML
    cache: int = IN_YAML
    timeout_s: float = IN_YAML
    max_tokens: int = IN_YAML
    api_key_env: str = IN_YAML

    def __post_init__(self) -> None:
        k, errors = f"{PREFIX}.judge", []
        if self.backend not in JUDGE_BACKENDS:
            errors.append(f"{k}.backend: {self.backend!r} is not one of {JUDGE_BACKENDS}")
        if self.backend == "external":
            if not str(self.base_url or "").startswith(("http://", "https://")):
                errors.append(f"{k}.base_url: backend=external needs an http(s) URL, got {self.base_url!r}")
            if not self.model:
                errors.append(f"{k}.model: backend=external needs the model name served at base_url")
        if self.template not in TEMPLATES:
            errors.append(f"{k}.template: {self.template!r} is not one of {sorted(TEMPLATES)}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            errors.append(f"{k}.concurrency: must be an int >= 1, got {self.concurrency!r}")
        if not isinstance(self.cache, int) or self.cache < 0:
            errors.append(f"{k}.cache: must be an int >= 0 (verdicts kept), got {self.cache!r}")
        if not isinstance(self.timeout_s, int | float) or self.timeout_s <= 0:
            errors.append(f"{k}.timeout_s: must be positive, got {self.timeout_s!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            errors.append(f"{k}.max_tokens: must be an int >= 1, got {self.max_tokens!r}")
        if errors:
            raise RewardConfigError(errors)


CREDIT_MODES = ("guarded", "paper")
LOOPED_MODES = ("pay", "zero")


@dataclass(frozen=True)
@yaml_defaults("reward.credit")
class CreditConfig:
    """``parl.reward.credit``: which subagent assignments earn ``r_parallel`` and ``r_finish``.

    ``mode``: ``guarded`` credits only useful assignments (the prompt names the task and repeats no
    earlier useful one, the result is neither an error nor empty; :mod:`verl_parl.rewards.guard`),
    ``paper`` every assignment, as the paper's terms do. ``min_overlap``: for a task without names, the
    least share of the question's content words a useful prompt repeats. ``looped``: ``pay`` rewards an
    episode whose own text loops (one of its turns writes a piece 8+ times in a row) as any other;
    ``zero`` gives it reward 0, every term (the table scorer forgives a row written again and again).
    ``spurious_cost``: what each spurious assignment takes off the reward, at every step [ours].
    """

    mode: str = IN_YAML
    min_overlap: float = IN_YAML
    looped: str = IN_YAML
    spurious_cost: float = IN_YAML

    def __post_init__(self) -> None:
        k, errors = f"{PREFIX}.credit", []
        cost = self.spurious_cost
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
            errors.append(f"{k}.spurious_cost: must be a number >= 0, got {cost!r}")
        if self.mode not in CREDIT_MODES:
            errors.append(f"{k}.mode: {self.mode!r} is not one of {CREDIT_MODES}")
        number = isinstance(self.min_overlap, int | float) and not isinstance(self.min_overlap, bool)
        if not number or not 0.0 <= self.min_overlap <= 1.0:
            errors.append(f"{k}.min_overlap: must be a number in [0, 1], got {self.min_overlap!r}")
        if self.looped not in LOOPED_MODES:
            errors.append(f"{k}.looped: {self.looped!r} is not one of {LOOPED_MODES}")
        if errors:
            raise RewardConfigError(errors)


def _default_lambda() -> ScheduleConfig:
    return ScheduleConfig()


@dataclass(frozen=True)
@yaml_defaults("reward.researcher")
class ResearcherRewardConfig:
    """Kimi-Researcher's reward: ``form: researcher`` and the gamma decay of ``reinforce_nsc``.

    ``format_penalty``: the reward of a trajectory with a format error (invalid tool calls, context or
    iteration limit exceeded) is ``-format_penalty`` whatever its answer. ``gamma``: when set, the
    ``reinforce_nsc`` estimator gives the tokens of turn i of T the advantage ``r·γ^(T−i) − baseline``
    (unpublished value; null keeps one advantage per episode).
    """

    format_penalty: float = IN_YAML
    gamma: float | None = IN_YAML

    def __post_init__(self) -> None:
        errors = []
        if not isinstance(self.format_penalty, int | float) or self.format_penalty < 0:
            errors.append(f"{PREFIX}.researcher.format_penalty: must be a number >= 0, got {self.format_penalty!r}")
        if self.gamma is not None and not (isinstance(self.gamma, int | float) and 0 < self.gamma <= 1):
            errors.append(f"{PREFIX}.researcher.gamma: must be null or in (0, 1], got {self.gamma!r}")
        if errors:
            raise RewardConfigError(errors)


@dataclass(frozen=True)
@yaml_defaults("reward")
class ParlRewardConfig:
    """``parl.reward``: the PARL staged reward (``reward.reward_manager.name=parl``) and ``reinforce_nsc``."""

    form: str = IN_YAML
    parallel_kind: str = IN_YAML
    parallel_cap: int = IN_YAML
    lambda_parallel: ScheduleConfig = IN_YAML
    lambda_finish: ScheduleConfig = IN_YAML
    nsc: NscConfig = IN_YAML
    judge: JudgeSettings = IN_YAML
    researcher: ResearcherRewardConfig = IN_YAML
    credit: CreditConfig = IN_YAML

    def __post_init__(self) -> None:
        errors = []
        errors += form_errors(self.form)
        if self.parallel_kind not in PARALLEL_KINDS:
            errors.append(f"{PREFIX}.parallel_kind: {self.parallel_kind!r} is not one of {PARALLEL_KINDS}")
        if not isinstance(self.parallel_cap, int) or self.parallel_cap <= 0:
            errors.append(f"{PREFIX}.parallel_cap: must be a positive int, got {self.parallel_cap!r}")
        if errors:
            raise RewardConfigError(errors)


def form_errors(form: str) -> list[str]:
    """``parl.reward.form`` must name a registered reward form (``verl_parl_register_rewards``)."""
    from verl_parl.host.manager import unregistered

    return unregistered("rewards", form, f"{PREFIX}.form")


def _schedule(raw: Any, key: str, errors: list[str]) -> ScheduleConfig:
    if bad := mapping_errors(raw, key):
        errors += bad
        return _default_lambda()
    raw = dict(raw or {})
    raw.pop("_target_", None)
    known = {f.name for f in fields(ScheduleConfig)} - {"key"}
    errors += [f"{key}.{name}: unknown key" for name in raw if name not in known]
    if bad := type_errors(ScheduleConfig, {k: v for k, v in raw.items() if k in known}, key):
        errors += bad
        return _default_lambda()
    try:
        return ScheduleConfig(**{k: v for k, v in raw.items() if k in known}, key=key)
    except ScheduleError as exc:
        errors.extend(exc.errors)
    except TypeError as exc:
        errors.append(f"{key}: {exc}")
    return _default_lambda()


def parse_reward_config(raw: dict[str, Any] | None) -> ParlRewardConfig:
    """A plain dict (``OmegaConf.to_container(cfg.parl.reward)``) → config; all errors in one exception."""
    if bad := mapping_errors(raw, PREFIX):
        raise RewardConfigError(bad)
    raw = dict(raw or {})
    raw.pop("_target_", None)
    errors: list[str] = []
    known = {f.name for f in fields(ParlRewardConfig)}
    errors += [f"{PREFIX}.{name}: unknown key" for name in raw if name not in known]
    lambdas = {
        name: _schedule(raw.pop(name, None), f"{PREFIX}.{name}", errors)
        for name in ("lambda_parallel", "lambda_finish")
    }
    nsc = _section(NscConfig, "nsc", raw.pop("nsc", None), errors)
    judge = _section(JudgeSettings, "judge", raw.pop("judge", None), errors)
    researcher = _section(ResearcherRewardConfig, "researcher", raw.pop("researcher", None), errors)
    credit = _section(CreditConfig, "credit", raw.pop("credit", None), errors)
    top = _build(ParlRewardConfig, {k: v for k, v in raw.items() if k in known}, errors, PREFIX)
    if errors:
        raise RewardConfigError(errors)
    assert isinstance(nsc, NscConfig) and isinstance(judge, JudgeSettings) and isinstance(top, ParlRewardConfig)
    sections = {"nsc": nsc, "judge": judge, "researcher": researcher, "credit": credit}
    return ParlRewardConfig(**{**top.__dict__, **lambdas, **sections})


def _section(cls: type, name: str, raw: Any, errors: list[str]) -> Any:
    """A nested dataclass section of ``parl.reward`` (``nsc``, ``judge``, ``researcher``, ``credit``); unknown keys
    are errors."""
    if bad := mapping_errors(raw, f"{PREFIX}.{name}"):
        errors += bad
        return cls()
    raw = dict(raw or {})
    raw.pop("_target_", None)
    known = {f.name for f in fields(cls)}
    errors += [f"{PREFIX}.{name}.{key}: unknown key" for key in raw if key not in known]
    return _build(cls, {k: v for k, v in raw.items() if k in known}, errors, f"{PREFIX}.{name}")


def _build(cls: type, values: dict[str, Any], errors: list[str], prefix: str) -> Any:
    if bad := type_errors(cls, values, prefix):
        errors += bad
        return cls()
    try:
        return cls(**values)
    except RewardConfigError as exc:
        errors.extend(exc.errors)
        return cls()


def reward_config_from(config: Any) -> ParlRewardConfig:
    """``parl.reward`` of the full config, or the defaults when the section is absent."""
    if (done := handed(config, "reward")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    section = OmegaConf.select(config, "parl.reward") if OmegaConf.is_config(config) else None
    raw = OmegaConf.to_container(section, resolve=True) if section is not None else {}
    return parse_reward_config({str(k): v for k, v in raw.items()} if isinstance(raw, dict) else {})


def check_judge(cfg: Any) -> list[str]:
    """Whole-config check: ``backend: frozen`` needs the dedicated frozen group (``parl.subagent.mode``)."""
    from omegaconf import OmegaConf

    backend = OmegaConf.select(cfg, "parl.reward.judge.backend", default="none")
    mode = OmegaConf.select(cfg, "parl.subagent.mode", default="dedicated")
    if backend == "frozen" and mode != "dedicated":
        return [f"parl.reward.judge.backend: 'frozen' needs parl.subagent.mode=dedicated, not {mode!r}"]
    return []
