"""``parl.swarm`` and ``parl.subagent``: limits of the orchestrator loop and where subagents run."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.agents.settings import BUDGET_DEFAULT, BUDGET_KEY
from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import mapping_errors, name_list_errors, type_errors
from verl_parl.swarm.episode import SwarmLimits
from verl_parl.swarm.frozen.engine import REPLICA_KEYS
from verl_parl.swarm.frozen.schedule import KEY, CheckpointStage, FrozenGroupSchedule, parse_schedule, vocab_errors
from verl_parl.swarm.subagent import SubagentLimits

SUBAGENT_MODES = ("dedicated", "external", "shared")

SUBAGENT_ENGINES = ("hf", "vllm", "sglang")  # hf: our CPU server; vllm/sglang: verl rollout replicas


@dataclass(frozen=True)
@yaml_defaults("subagent")
class SubagentServing:
    """Where frozen subagents generate.

    ``dedicated``: ``instances`` frozen servers loaded from ``model_path``, never weight-synced, on
    ``engine`` (``hf``: named Ray actors ``parl_frozen_<i>``, restarted by Ray up to ``max_restarts``
    times when their process dies, each computing with ``num_threads`` torch threads; ``vllm``/``sglang``:
    verl rollout replicas owned by the ``parl_frozen_group`` actor; None: the policy's rollout name); ``external``: an
    OpenAI-compatible endpoint (``base_url``, ``model``); ``shared``: the live policy server (an ablation: NOT frozen).
    ``train`` (shared mode only) makes the subagents' own tokens trainable outputs of their episode, with the credit
    rule registered as ``credit`` (:mod:`verl_parl.swarm.cotrain`).
    ``temperature`` is the subagents' sampling temperature in training and validation alike (0: greedy); None
    samples them as the policy is sampled (verl's rollout settings in training, ``val_kwargs`` in validation).
    ``engine_options`` are keys of verl's rollout config that each vllm/sglang replica takes (the YAML's default
    interpolates the policy rollout's; a null value: verl's default). ``tensor_parallel_size`` is each vllm/sglang
    replica's tensor-parallel size, i.e. its GPUs.
    """

    mode: str = IN_YAML
    train: bool = IN_YAML  # co-trained subagents (shared mode): their tokens are trained
    credit: str = IN_YAML  # with train: the registered credit rule of their tokens
    model_path: str | None = IN_YAML
    engine: str | None = IN_YAML
    instances: int = IN_YAML
    tensor_parallel_size: int = IN_YAML  # GPUs of each vllm/sglang replica
    max_model_len: int = IN_YAML
    max_restarts: int = IN_YAML
    num_threads: int = IN_YAML
    base_url: str | None = IN_YAML
    model: str | None = IN_YAML
    temperature: float | None = IN_YAML
    # Not IN_YAML: the YAML's default interpolates actor_rollout_ref.rollout, which no dataclass default can. {}
    # here leaves the replicas at verl's RolloutConfig defaults; a run's composed value arrives through parse_swarm.
    engine_options: dict[str, Any] = field(default_factory=dict)
    # parl.subagent.schedule, parsed (parse_swarm): the checkpoints the dedicated group serves from a step on
    schedule: tuple[CheckpointStage, ...] = IN_YAML
    resources: dict[str, float] | None = IN_YAML  # Ray resources each dedicated hf server reserves (its node's)
    label_selector: dict[str, str] | None = IN_YAML  # node labels each dedicated hf server's node carries

    def __post_init__(self) -> None:
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"parl.subagent.temperature: must be >= 0 or null, got {self.temperature}")
        if self.mode not in SUBAGENT_MODES:
            raise ValueError(f"parl.subagent.mode: {self.mode!r} is not one of {SUBAGENT_MODES}")
        self._check_train()
        if self.mode == "external" and not (self.base_url and self.model):
            raise ValueError("parl.subagent.base_url and parl.subagent.model are required with mode=external")
        if self.instances < 1:
            raise ValueError("parl.subagent.instances: must be at least 1")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"parl.subagent.tensor_parallel_size: must be at least 1, got {self.tensor_parallel_size}")
        if self.tensor_parallel_size > 1 and self.mode == "dedicated" and self.engine in (None, "hf"):
            raise ValueError(
                f"parl.subagent.tensor_parallel_size: {self.tensor_parallel_size} needs parl.subagent.engine vllm or "
                "sglang (an hf server is one process)"
            )
        if self.num_threads < 1:
            raise ValueError(f"parl.subagent.num_threads: must be at least 1, got {self.num_threads}")
        if self.max_restarts < 0:
            raise ValueError(f"parl.subagent.max_restarts: must be >= 0, got {self.max_restarts}")
        if reserved := [key for key in self.engine_options if key in REPLICA_KEYS]:
            raise ValueError(
                f"parl.subagent.engine_options: {', '.join(reserved)} set by the frozen group itself "
                "(parl.subagent.engine, model_path, max_model_len, tensor_parallel_size), not here"
            )
        if problems := placement_errors(self.resources, self.label_selector):
            raise ValueError("; ".join(problems))
        placed = [f"parl.subagent.{key}" for key in ("resources", "label_selector") if getattr(self, key)]
        if placed and (self.mode != "dedicated" or self.engine not in (None, "hf")):
            raise ValueError(
                f"{' and '.join(placed)}: place the dedicated group's hf servers; with mode={self.mode}, "
                f"engine={self.engine} there are none to place (vllm/sglang replicas take free GPUs through verl's "
                "resource pools: docs/cluster.md, Placement)"
            )
        if self.mode == "dedicated" and self.engine is not None and self.engine not in SUBAGENT_ENGINES:
            raise ValueError(
                f"parl.subagent.engine: {self.engine!r} is not one of {SUBAGENT_ENGINES}"
                f"{did_you_mean(self.engine, SUBAGENT_ENGINES)}"
            )

    def _check_train(self) -> None:
        """Co-trained subagents (``train``) generate on the policy's server, sampled as the policy is."""
        if not self.train:
            return
        if self.mode != "shared":
            raise ValueError(
                f"parl.subagent.train: co-trained subagents generate on the policy's server, which needs "
                f"parl.subagent.mode=shared, not {self.mode!r}"
            )
        if self.temperature is not None:
            raise ValueError(
                f"parl.subagent.train: trained tokens must be sampled as the policy's; set parl.subagent.temperature="
                f"null, not {self.temperature}"
            )

    def placement(self) -> dict[str, Any]:
        """Ray actor options that place a dedicated hf server: ``resources`` and ``label_selector`` when set."""
        options: dict[str, Any] = {}
        if self.resources:
            options["resources"] = {str(name): float(amount) for name, amount in self.resources.items()}
        if self.label_selector:
            options["label_selector"] = {str(name): str(value) for name, value in self.label_selector.items()}
        return options

    def sampling(self, policy: dict[str, Any]) -> dict[str, Any]:
        """The subagents' sampling parameters from the policy's: no log-probs unless they are trained, and
        ``temperature`` when set."""
        logprobs = {} if self.train else {"logprobs": False}
        return {**policy, **logprobs, **({} if self.temperature is None else {"temperature": self.temperature})}


@dataclass(frozen=True)
@yaml_defaults("swarm")
class SwarmSettings:
    limits: SwarmLimits = field(default_factory=SwarmLimits)
    subagent: SubagentServing = field(default_factory=SubagentServing)
    subagent_tools: tuple[str, ...] = IN_YAML
    direct_tools: tuple[str, ...] = IN_YAML


RAY_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def placement_errors(resources: Any, labels: Any) -> list[str]:
    """``parl.subagent.resources`` must map custom Ray resource names to positive amounts, and
    ``parl.subagent.label_selector`` label names to values (strings or numbers)."""
    errors: list[str] = []
    for name, amount in dict(resources or {}).items():
        if name in RAY_BUILTIN_RESOURCES:
            errors.append(f"parl.subagent.resources.{name}: a Ray built-in resource; name a custom one (e.g. frozen)")
        elif isinstance(amount, bool) or not isinstance(amount, int | float) or not amount > 0:
            errors.append(f"parl.subagent.resources.{name}: must be a positive number, got {amount!r}")
    for name, value in dict(labels or {}).items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            errors.append(f"parl.subagent.label_selector.{name}: must be a label value (a string), got {value!r}")
    return errors


def parse_swarm(
    swarm: dict[str, Any],
    serving: dict[str, Any],
    default_model_path: str | None,
    default_engine: str | None = None,
    budget: Any = BUDGET_DEFAULT,
) -> SwarmSettings:
    """``parl.swarm`` and ``parl.subagent`` dicts -> settings; every problem in one ConfigError.

    A null ``parl.subagent.engine`` becomes ``default_engine`` (the policy's rollout name) when given. ``budget`` is
    the run's ``parl.critical_steps_budget`` (checked with ``parl``'s own keys), which the orchestrator's limits hold.
    """

    swarm, serving = dict(swarm), dict(serving)
    errors: list[str] = []
    if "critical_steps_budget" in swarm:
        swarm.pop("critical_steps_budget")
        errors.append("parl.swarm.critical_steps_budget: moved to parl.critical_steps_budget (every agent loop's)")
    swarm["critical_steps_budget"] = budget
    sub = swarm.pop("subagent_limits", None) or {}
    if bad := mapping_errors(sub, "parl.swarm.subagent_limits"):
        errors, sub = bad, {}
    tools = {key: swarm.pop(key, None) or () for key in ("subagent_tools", "direct_tools")}
    for key, names in tools.items():
        errors += name_list_errors(names, f"parl.swarm.{key}")
    tools = {key: tuple(names) if not name_list_errors(names, key) else () for key, names in tools.items()}
    if "trace_fraction" in swarm:
        swarm.pop("trace_fraction")
        errors.append("parl.swarm.trace_fraction: moved to parl.traces.train_fraction")
    schedule_raw = serving.pop("schedule", None)
    errors += _take_schedule(schedule_raw, serving)
    if serving.get("model_path") is None:
        serving["model_path"] = default_model_path
    if serving.get("engine") is None and default_engine is not None:
        serving["engine"] = default_engine
    errors += _schedule_engine_errors(bool(schedule_raw), serving.get("engine"))
    parts: dict[str, Any] = {}
    for key, cls, raw in (
        ("parl.swarm.subagent_limits", SubagentLimits, sub),
        ("parl.swarm", SwarmLimits, swarm),
        ("parl.subagent", SubagentServing, serving),
    ):
        known = [f.name for f in fields(cls) if f.name not in ("subagent_limits", "schedule")]  # parsed above
        errors += [f"{key}.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in [*known, "schedule"]]
        errors += type_errors(cls, {k: v for k, v in raw.items() if k != "schedule"}, key)
        if errors:
            continue
        try:
            nested = {"subagent_limits": parts["parl.swarm.subagent_limits"]} if cls is SwarmLimits else {}
            parts[key] = cls(**raw, **nested)
        except (ValueError, TypeError) as exc:
            errors.append(f"{key}: {exc}")
    if "parl.subagent" in parts and parts["parl.subagent"].train:
        errors += credit_errors(parts["parl.subagent"].credit)
    if errors:
        raise ConfigError(errors)
    return SwarmSettings(limits=parts["parl.swarm"], subagent=parts["parl.subagent"], **tools)


def credit_errors(name: str) -> list[str]:
    """``parl.subagent.credit`` must name a registered credit rule (``verl_parl_register_credits``)."""
    from verl_parl.host.manager import unregistered

    return unregistered("credits", name, "parl.subagent.credit")


def _take_schedule(raw: Any, serving: dict[str, Any]) -> list[str]:
    """Parse ``parl.subagent.schedule`` into ``serving["schedule"]`` (its first checkpoint is the model path when
    none is given); its errors."""
    if not raw:
        serving["schedule"] = ()
        return []
    stages, errors = parse_schedule(raw if isinstance(raw, list) else [raw])
    mode = serving.get("mode", SubagentServing.mode)
    if stages and mode != "dedicated":
        errors.append(f"{KEY}: switching checkpoints needs parl.subagent.mode=dedicated, not {mode!r}")
    if stages and serving.get("model_path") is None:
        serving["model_path"] = stages[0].model_path
    serving["schedule"] = stages
    return errors


def _schedule_engine_errors(has_schedule: bool, engine: str | None) -> list[str]:
    """``parl.subagent.schedule`` switches checkpoints of hf servers only (vllm/sglang replicas can't)."""
    if not has_schedule or engine in (None, "hf"):
        return []
    return [
        f"parl.subagent.schedule: checkpoint switching needs parl.subagent.engine=hf, not {engine!r} "
        "(set schedule: [] or engine: hf)"
    ]


def swarm_settings(config: DictConfig) -> SwarmSettings:
    """Settings from the trainer config's ``parl.swarm`` / ``parl.subagent`` (defaults when absent)."""
    if (done := handed(config, "swarm")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    default_model = OmegaConf.select(config, "actor_rollout_ref.model.path")
    default_engine = OmegaConf.select(config, "actor_rollout_ref.rollout.name", default=None)
    budget = OmegaConf.select(config, BUDGET_KEY, default=BUDGET_DEFAULT)
    return parse_swarm(
        config_section(config, "parl.swarm"),
        config_section(config, "parl.subagent"),
        default_model,
        default_engine,
        budget=budget,
    )


def frozen_schedule(settings: SwarmSettings) -> FrozenGroupSchedule | None:
    """The dedicated group's checkpoint schedule (``parl.subagent.schedule``), or None when it has none."""
    serving = settings.subagent
    return FrozenGroupSchedule(serving.schedule, serving) if serving.schedule else None


def schedule_errors(settings: SwarmSettings, orchestrator_path: str | None) -> list[str]:
    """Whole-config check of a parsed schedule: each checkpoint's vocabulary is the orchestrator's (its model
    at ``actor_rollout_ref.model.path``), as the subagents' prompts are encoded with the orchestrator's tokenizer."""
    return vocab_errors(settings.subagent.schedule, orchestrator_path) if settings.subagent.schedule else []


def cotrain_errors(settings: SwarmSettings, config: DictConfig) -> list[str]:
    """Whole-config checks of co-trained subagents (``parl.subagent.train``): their rows are extra outputs of an
    episode, which only verl's v1 trainer takes, and they have no turn placement for Kimi-Researcher's per-turn
    gamma decay."""
    if not settings.subagent.train:
        return []
    errors = []
    if not OmegaConf.select(config, "trainer.use_v1", default=False):
        errors.append("parl.subagent.train: subagent rows are extra outputs of an episode: needs trainer.use_v1=true")
    if OmegaConf.select(config, "parl.reward.researcher.gamma", default=None) is not None:
        errors.append(
            "parl.subagent.train: co-trained subagents' rows have no turn placement for the per-turn gamma decay; set "
            "parl.reward.researcher.gamma=null"
        )
    return errors
