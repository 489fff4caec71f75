"""The ``parl:`` config section as frozen dataclasses, and whole-config validation.

Every check returns messages that start with the config key they are about; :func:`validate`
collects all of them so that one run shows every mistake at once, before any process starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_parl.cli.parts import gpu_errors
from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, did_you_mean
from verl_parl.settings.sections import SECTIONS, component_sections, shape_errors, used_tools
from verl_parl.settings.typecheck import type_errors
from verl_parl.trainer.modes import trainer_mode_errors

if TYPE_CHECKING:
    from verl_parl.agents.settings import ResearcherSettings
    from verl_parl.chat.settings import LoopStop
    from verl_parl.cluster.settings import ClusterSettings
    from verl_parl.context.settings import ContextSettings
    from verl_parl.partial_rollout.settings import PartialRolloutSettings
    from verl_parl.rewards.settings import ParlRewardConfig
    from verl_parl.swarm.settings import SwarmSettings
    from verl_parl.tools.settings import ToolSettings
    from verl_parl.traces.settings import TraceSettings

PROFILES = ("cpu", "gpu")


def _check(errors: list[str], ok: bool, message: str) -> None:
    if not ok:
        errors.append(message)


@dataclass(frozen=True)
@yaml_defaults("embedded")
class EmbeddedTaskConfig:
    """``parl.embedded``: the registered task (``verl_parl_register_tasks``) a run trains on, selected with
    ``embedded=<task>``; ``task`` is None when the run brings its own data."""

    task: str | None = IN_YAML
    agent_loop: str = IN_YAML
    n_train: int = IN_YAML
    n_val: int = IN_YAML
    seed: int = IN_YAML
    options: dict[str, Any] = IN_YAML  # the task's own settings (TaskSpec.check_options)
    parallel_share: float | None = IN_YAML  # the cold start's share of parallel orchestrator plans

    def __post_init__(self) -> None:
        errors: list[str] = []
        _check(errors, _is_int(self.n_train) and self.n_train > 0, "parl.embedded.n_train: must be a positive int")
        _check(errors, _is_int(self.n_val) and self.n_val > 0, "parl.embedded.n_val: must be a positive int")
        _check(errors, _is_int(self.seed), "parl.embedded.seed: must be an int")
        _check(
            errors,
            self.parallel_share is None
            or (
                isinstance(self.parallel_share, int | float)
                and not isinstance(self.parallel_share, bool)
                and 0.0 <= self.parallel_share <= 1.0
            ),
            f"parl.embedded.parallel_share: must be null or a share in [0, 1], got {self.parallel_share!r}",
        )
        errors += self.task_errors()
        if errors:
            raise ConfigError(errors)

    def task_errors(self) -> list[str]:
        """The task must be registered and installed, take this agent loop and accept these options (no task: no
        task to check)."""
        from verl_parl.host.manager import get_registries
        from verl_parl.registry import UnknownNameError

        if self.task is None:
            return []
        try:
            spec = get_registries().tasks.get(self.task)
        except UnknownNameError as exc:
            return [f"parl.embedded.task: {exc} (python -m verl_parl.plugins list)"]
        errors = [f"parl.embedded.task: {missing}" for missing in spec.missing_requirements()]
        _check(
            errors,
            self.agent_loop in spec.agent_loops,
            f"parl.embedded.agent_loop: {self.agent_loop!r} is not one of the {self.task} task's {spec.agent_loops}",
        )
        if not isinstance(self.options, dict):
            return [*errors, "parl.embedded.options: must be a mapping"]
        if spec.check_options is None:
            return errors + ([f"parl.embedded.options: the {self.task} task takes no options"] if self.options else [])
        return errors + [f"parl.embedded.options.{e}" for e in spec.check_options(self.settings())]

    def settings(self) -> dict[str, Any]:
        """This section as the dict a task's writer and option check receive."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
@yaml_defaults("")
class ParlConfig:
    """``parl``: verl-parl's own settings."""

    output_dir: str
    cache_dir: str | None = IN_YAML
    profile: str = IN_YAML
    shutdown_timeout_s: float = IN_YAML
    critical_steps_budget: int | None = IN_YAML  # every agent loop's budget (verl_parl.agents.budget)
    embedded: EmbeddedTaskConfig = field(default_factory=EmbeddedTaskConfig)
    reward: ParlRewardConfig = field(default_factory=lambda: _reward_config({}))
    # each component's own settings (its ``settings.py``), parsed by build_settings and handed to the workers
    swarm: SwarmSettings | None = None  # parl.swarm and parl.subagent
    context: dict[str, ContextSettings] | None = None
    researcher: ResearcherSettings | None = None
    traces: TraceSettings | None = None
    partial_rollout: PartialRolloutSettings | None = None
    loop_stop: LoopStop | None = None
    tools: dict[str, ToolSettings] | None = None
    cluster: ClusterSettings | None = None

    def __post_init__(self) -> None:
        errors: list[str] = []
        _check(errors, bool(self.output_dir), "parl.output_dir: must be a non-empty path")
        _check(errors, self.profile in PROFILES, f"parl.profile: {self.profile!r} is not one of {PROFILES}")
        _check(
            errors,
            isinstance(self.shutdown_timeout_s, int | float) and self.shutdown_timeout_s > 0,
            "parl.shutdown_timeout_s: must be a positive number",
        )
        _check(
            errors,
            self.critical_steps_budget is None
            or (_is_int(self.critical_steps_budget) and self.critical_steps_budget > 0),
            f"parl.critical_steps_budget: must be a positive int or null, got {self.critical_steps_budget!r}",
        )
        if errors:
            raise ConfigError(errors)

    def resolved_cache_dir(self) -> Path:
        return resolved_cache_dir(self.cache_dir)


def resolved_cache_dir(cache_dir: str | None) -> Path:
    """``parl.cache_dir``, else ``$VERL_PARL_CACHE``, else ``~/.cache/verl_parl``."""
    return Path(cache_dir or os.environ.get("VERL_PARL_CACHE") or Path.home() / ".cache" / "verl_parl")


def _reward_config(raw: dict[str, Any]) -> ParlRewardConfig:
    """``parl.reward`` (verl_parl.rewards.settings), imported lazily: it pulls in torch."""
    from verl_parl.rewards.settings import RewardConfigError, parse_reward_config

    try:
        return parse_reward_config(raw)
    except RewardConfigError as exc:
        raise ConfigError(exc.errors) from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_parl(section: DictConfig) -> ParlConfig:
    """``cfg.parl`` -> :class:`ParlConfig`; unknown keys and bad values raise one :class:`ConfigError`."""
    container = OmegaConf.to_container(section, resolve=True)
    assert isinstance(container, dict)
    raw: dict[str, Any] = {str(k): v for k, v in container.items()}
    raw.pop("_target_", None)
    shape = shape_errors(raw)
    embedded = raw.pop("embedded", {}) or {}
    embedded.pop("_target_", None)
    reward = raw.pop("reward", {}) or {}
    errors = _unknown_keys("parl", raw, ParlConfig, also=SECTIONS) + _unknown_keys(
        "parl.embedded", embedded, EmbeddedTaskConfig
    )
    if errors:
        raise ConfigError(shape + errors)
    embedded_types = type_errors(EmbeddedTaskConfig, embedded, "parl.embedded")
    top = {k: v for k, v in raw.items() if k not in SECTIONS}
    top_types = type_errors(ParlConfig, top, "parl")
    errors = shape + embedded_types + top_types
    try:
        embedded_cfg = EmbeddedTaskConfig(**embedded) if not embedded_types else EmbeddedTaskConfig()
    except ConfigError as exc:
        errors.extend(exc.errors)
        embedded_cfg = EmbeddedTaskConfig()
    try:
        reward_cfg = _reward_config(reward)
    except ConfigError as exc:
        errors.extend(exc.errors)
        reward_cfg = _reward_config({})
    if top_types:  # ParlConfig's own checks assume its values' types
        raise ConfigError(errors)
    try:
        parl = ParlConfig(**top, embedded=embedded_cfg, reward=reward_cfg)
    except ConfigError as exc:
        raise ConfigError(errors + exc.errors) from None
    if errors:
        raise ConfigError(errors)
    return parl


def _unknown_keys(prefix: str, raw: dict[str, Any], cls: type, also: Iterable[str] = ()) -> list[str]:
    known = [f.name for f in fields(cls)] + [name for name in also if name not in {f.name for f in fields(cls)}]
    return [f"{prefix}.{key}: unknown key{did_you_mean(key, known)}" for key in raw if key not in known]


# ---------------------------------------------------------------------------------------------------
# whole-config checks: each takes the resolved config and returns error messages


CPU_ROLLOUTS = ("hf", "vllm")  # hf: our server; vllm: verl's vLLM server on vLLM's CPU build (docs/engines.md)


def check_profile(cfg: DictConfig) -> list[str]:
    """Combinations that cannot work on the CPU profile."""
    if cfg.parl.profile != "cpu":
        return []
    errors: list[str] = []
    arr = cfg.actor_rollout_ref
    for key in ("actor.strategy", "actor.fsdp_config.strategy", "ref.fsdp_config.strategy"):
        value = OmegaConf.select(arr, key)
        _check(
            errors,
            value == "fsdp2",
            f"actor_rollout_ref.{key}: {value!r} cannot run on CPU (FSDP1 needs a GPU for sync_module_states); "
            "use fsdp2",
        )
    attn = OmegaConf.select(arr, "model.override_config.attn_implementation")
    _check(
        errors,
        attn in ("sdpa", "eager"),
        f"actor_rollout_ref.model.override_config.attn_implementation: {attn!r} needs CUDA; use sdpa on CPU",
    )
    _check(
        errors, cfg.trainer.device == "cpu", f"trainer.device: {cfg.trainer.device!r} must be 'cpu' on the CPU profile"
    )
    name = arr.rollout.name
    _check(
        errors,
        name in CPU_ROLLOUTS,
        f"actor_rollout_ref.rollout.name: {name!r} needs a GPU; "
        f"the CPU profile serves with {' or '.join(CPU_ROLLOUTS)}",
    )
    for key in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
        value = arr.rollout.get(key, 1)
        _check(errors, value == 1, f"actor_rollout_ref.rollout.{key}: {value} must be 1 on the CPU profile")
    return errors


def check_batch_sizes(cfg: DictConfig) -> list[str]:
    """Batch sizes that do not divide (checked before verl would assert deep inside a worker)."""
    errors: list[str] = []
    train = cfg.data.train_batch_size
    actor = cfg.actor_rollout_ref.actor
    n = cfg.actor_rollout_ref.rollout.n
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    for key, value in (("data.train_batch_size", train), ("actor_rollout_ref.rollout.n", n)):
        _check(errors, _is_int(value) and value > 0, f"{key}: must be a positive int, got {value!r}")
    mini = actor.ppo_mini_batch_size
    _check(
        errors,
        _is_int(mini) and mini > 0,
        f"actor_rollout_ref.actor.ppo_mini_batch_size: must be a positive int, got {mini!r}",
    )
    if errors:
        return errors
    _check(
        errors,
        train % mini == 0,
        f"actor_rollout_ref.actor.ppo_mini_batch_size: {mini} does not divide data.train_batch_size={train}",
    )
    _check(
        errors,
        (mini * n) % world == 0,
        f"actor_rollout_ref.actor.ppo_mini_batch_size: {mini} x rollout.n={n} samples "
        f"cannot be split over {world} ranks",
    )
    micro = actor.get("ppo_micro_batch_size_per_gpu")
    if micro is not None and not actor.get("use_dynamic_bsz", False):
        _check(
            errors,
            _is_int(micro) and micro > 0,
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu: must be a positive int, got {micro!r}",
        )
    return errors


def check_paths(cfg: DictConfig) -> list[str]:
    """Model and data files must exist locally (the CPU profile can never download)."""
    errors: list[str] = []
    model_path = cfg.actor_rollout_ref.model.path
    local_looking = model_path is not None and (
        str(model_path).startswith(("/", ".", "~")) or cfg.parl.profile == "cpu"
    )
    if local_looking and not Path(str(model_path)).expanduser().is_dir():
        errors.append(
            f"actor_rollout_ref.model.path: {model_path!r} is not a local model folder (point it to a "
            "save_pretrained folder; on the CPU profile the model is never downloaded)"
        )
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(cfg, key)
        paths = list(value) if isinstance(value, ListConfig | list) else [value]
        errors.extend(f"{key}: {p!r} does not exist" for p in paths if p and not Path(str(p)).expanduser().exists())
    tool_config = OmegaConf.select(cfg, "actor_rollout_ref.rollout.multi_turn.tool_config_path")
    if tool_config and not Path(str(tool_config)).expanduser().is_file():
        errors.append(f"actor_rollout_ref.rollout.multi_turn.tool_config_path: {tool_config!r} does not exist")
    return errors


def check_rollout_backend(cfg: DictConfig) -> list[str]:
    """The rollout backend must be registered with verl (``hf`` is ours, vllm/sglang/trtllm are verl's)."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    name = cfg.actor_rollout_ref.rollout.name
    known = list(RolloutReplicaRegistry._registry)
    if name in known:
        return []
    return [
        f"actor_rollout_ref.rollout.name: unknown rollout backend {name!r}{did_you_mean(name, known)}; known: {known}"
    ]


def check_verl(cfg: DictConfig) -> list[str]:
    """verl's own config validation (dataclass conversion and ``validate_config``), as messages."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    errors: list[str] = []
    for key in ("actor_rollout_ref.actor", "actor_rollout_ref.rollout", "algorithm"):
        try:
            omega_conf_to_dataclass(OmegaConf.select(cfg, key))
        except Exception as exc:  # noqa: BLE001 - verl raises assorted types; we report them all by key
            errors.append(f"{key}: {type(exc).__name__}: {exc}")
    if errors:
        return errors
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its "checks passed" line is a log, not a result
            validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except Exception as exc:  # noqa: BLE001
        errors.append(f"verl validate_config: {type(exc).__name__}: {exc}")
    return errors


Check = Callable[[DictConfig], list[str]]
REQUIRED: dict[str, str] = {
    "actor_rollout_ref.model.path": "your model's folder (save_pretrained) or hub id",
    "data.train_files": "your training rows (verl parquet)",
    "data.val_files": "your validation rows (verl parquet)",
}
"""Keys the task-free base leaves unset (null) and a run must give: on the command line, or a task's YAML."""

SCORER_KEY = "reward.custom_reward_function.reward_kwargs.scorer"


def _written(cfg: DictConfig, key: str) -> Any:
    """The value at dotted ``key`` as written, an interpolation (``${parl_asset:...}``) left unresolved."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if not isinstance(node, DictConfig):
        return None
    return OmegaConf.to_container(node, resolve=False).get(leaf)


def check_required(cfg: DictConfig) -> list[str]:
    """What the base leaves to the run: the model, the data and (with verl-parl's reward function) the scorer,
    the last one registered. Read as written (call it before the config is resolved: an asset not built yet is
    given)."""
    from verl_parl.host.manager import get_registries
    from verl_parl.registry import PluginError, UnknownNameError

    hint = "or select a task with embedded=<name> (docs/your_task.md)"
    errors = [
        f"{key}: not set: give {what} ({key}=...), {hint}"
        for key, what in REQUIRED.items()
        if _written(cfg, key) is None
    ]
    reward_fn = str(OmegaConf.select(cfg, "reward.custom_reward_function.path") or "")
    if not reward_fn.endswith("verl_parl/trainer/reward_fn.py"):
        return errors
    scorer = _written(cfg, SCORER_KEY)
    try:
        scorers = get_registries().scorers
    except PluginError:
        return errors  # the plugin check names the broken plugin
    if scorer is None:
        return [*errors, f"{SCORER_KEY}: not set: name a registered scorer ({', '.join(scorers.names())}), {hint}"]
    try:
        scorers.get(str(scorer))
    except UnknownNameError as exc:
        errors.append(f"{SCORER_KEY}: {exc}")
    return errors


CHECKS: tuple[Check, ...] = (
    check_profile,
    check_batch_sizes,
    check_paths,
    check_rollout_backend,
    trainer_mode_errors,
)
"""Whole-config checks of the run itself (:func:`check_required` runs before the config is resolved, in
:func:`verl_parl.cli.launch.prepare`); each component checks its own settings in its built-in
plugin's ``verl_parl_validate_config`` (passed to :func:`validate` as ``plugin_errors``)."""


def validate(cfg: DictConfig, *, plugin_errors: Iterable[str] = ()) -> ParlConfig:
    """Parse the resolved config's settings (:func:`parse_settings`) and validate the whole config; raise one
    :class:`ConfigError` listing every problem, ``plugin_errors`` (every plugin's ``verl_parl_validate_config``
    messages) with them."""
    errors: list[str] = []
    parl: ParlConfig | None = None
    try:
        parl = parse_settings(cfg)
    except ConfigError as exc:
        errors.extend(exc.errors)
    if parl is not None:
        errors.extend(settings_errors(cfg, parl))
    for check in CHECKS:
        errors.extend(check(cfg))
    errors.extend(plugin_errors)
    if not errors:
        errors.extend(check_verl(cfg))
    if errors or parl is None:
        raise ConfigError(list(dict.fromkeys(errors)))
    return parl


def check_override_types(cfg: DictConfig, base: DictConfig, overrides: Iterable[str]) -> list[str]:
    """An override must keep the type of the value it replaces (``trainer.total_training_steps=abc``)."""
    errors: list[str] = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if "=" not in override or key.startswith("hydra") or "/" in key:
            continue
        default = OmegaConf.select(base, key, throw_on_missing=False)
        value = OmegaConf.select(cfg, key, throw_on_missing=False)
        if default is None or value is None or isinstance(default, DictConfig | ListConfig):
            continue
        if not _same_kind(default, value):
            errors.append(
                f"{key}: expects {type(default).__name__} (default {default!r}), got {type(value).__name__} {value!r}"
            )
    return errors


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int | float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def parse_settings(cfg: DictConfig) -> ParlConfig:
    """Every setting of ``parl`` parsed from ``cfg``: :class:`ParlConfig` (its own keys, ``embedded``, ``reward``)
    with each component's settings (``swarm`` with ``subagent``, ``context``, ``researcher``, ``traces``,
    ``partial_rollout``, ``loop_stop``, ``tools``, ``cluster``), registered names checked too. One
    :class:`ConfigError` lists every problem of every section. The driver calls it once on the resolved config
    (:func:`hand_over` gives the result to the workers), after a check of the same on the config without its assets
    built."""
    from verl_parl.agents.settings import parse_researcher
    from verl_parl.chat.settings import parse_loop_stop
    from verl_parl.cluster.settings import parse_cluster
    from verl_parl.context.settings import checked_context
    from verl_parl.partial_rollout.settings import parse_partial_rollout
    from verl_parl.swarm.settings import BUDGET_DEFAULT, parse_swarm
    from verl_parl.tools.settings import checked_tools
    from verl_parl.traces.settings import parse_traces

    errors: list[str] = []
    parl: ParlConfig | None = None
    try:
        parl = parse_parl(cfg.parl)
    except ConfigError as exc:
        errors.extend(exc.errors)
    sections = component_sections(cfg) or {name: {} for name in SECTIONS}
    budget = parl.critical_steps_budget if parl is not None else BUDGET_DEFAULT
    model = OmegaConf.select(cfg, "actor_rollout_ref.model.path", default=None)
    engine = OmegaConf.select(cfg, "actor_rollout_ref.rollout.name", default=None)
    builders: dict[str, Callable[[], Any]] = {
        "swarm": lambda: parse_swarm(sections["swarm"], sections["subagent"], model, engine, budget=budget),
        "context": lambda: checked_context(sections["context"]),
        "researcher": lambda: parse_researcher(sections["researcher"], budget),
        "traces": lambda: parse_traces(sections["traces"]),
        "partial_rollout": lambda: parse_partial_rollout(sections["partial_rollout"]),
        "loop_stop": lambda: parse_loop_stop(sections["loop_stop"]),
        "tools": lambda: checked_tools(sections["tools"], used_tools(sections)),
        "cluster": lambda: parse_cluster(sections["cluster"]),
    }
    parts: dict[str, Any] = {}
    for name, build in builders.items():
        try:
            parts[name] = build()
        except ConfigError as exc:
            errors.extend(exc.errors)
    if errors or parl is None:
        raise ConfigError(list(dict.fromkeys(errors)))
    return dataclasses.replace(parl, **parts)


def settings_errors(cfg: DictConfig, parl: ParlConfig) -> list[str]:
    """Whole-config checks of parsed settings against the rest of the run's config."""
    from verl_parl.context.settings import segment_errors
    from verl_parl.partial_rollout.settings import run_errors
    from verl_parl.swarm.settings import cotrain_errors, schedule_errors

    errors: list[str] = []
    if parl.context is not None:
        errors += segment_errors(cfg, parl.context)
    if parl.partial_rollout is not None:
        errors += run_errors(cfg, parl.partial_rollout)
    if parl.swarm is not None:
        errors += schedule_errors(parl.swarm, OmegaConf.select(cfg, "actor_rollout_ref.model.path", default=None))
        errors += cotrain_errors(parl.swarm, cfg)
        tp = parl.swarm.subagent.tensor_parallel_size
        _check(
            errors,
            parl.profile != "cpu" or tp == 1,
            f"parl.subagent.tensor_parallel_size: {tp} must be 1 on the CPU profile",
        )
    errors += gpu_errors(cfg, parl)
    errors += chat_format_errors(cfg, parl)
    return errors


PARL_LOOPS = ("parl_swarm", "researcher")


def run_agent_loops(cfg: DictConfig, parl: ParlConfig) -> set[str]:
    """The agent loops the run's rows name, as far as the config tells: the selected task's and verl's default
    (``actor_rollout_ref.rollout.agent.default_agent_loop``, for rows that name none)."""
    loops = {OmegaConf.select(cfg, "actor_rollout_ref.rollout.agent.default_agent_loop")}
    if parl.embedded.task is not None:
        loops.add(parl.embedded.agent_loop)
    return {str(loop) for loop in loops if loop is not None}


def chat_format_errors(cfg: DictConfig, parl: ParlConfig) -> list[str]:
    """Our loops parse the tool-call formats of :data:`verl_parl.chat.calls.TOOL_FORMATS` (verl's ``tool_agent``
    takes more), and a dedicated frozen checkpoint shares the orchestrator's tokenizer and chat template."""
    from verl_parl.chat.calls import TOOL_FORMATS
    from verl_parl.swarm.tokenizers import shared_tokenizer_errors

    errors: list[str] = []
    key = "actor_rollout_ref.rollout.multi_turn.format"
    fmt = OmegaConf.select(cfg, key, default="hermes")
    loops = run_agent_loops(cfg, parl)
    if loops & set(PARL_LOOPS) and fmt not in TOOL_FORMATS:
        errors.append(
            f"{key}: {fmt!r} is one of verl's tool_agent formats; the {'/'.join(PARL_LOOPS)} loops parse "
            f"{' or '.join(TOOL_FORMATS)}{did_you_mean(str(fmt), TOOL_FORMATS)}"
        )
    serving = parl.swarm.subagent if parl.swarm is not None else None
    if serving is not None and serving.mode == "dedicated" and "parl_swarm" in loops:
        orchestrator = OmegaConf.select(cfg, "actor_rollout_ref.model.path", default=None)
        errors += shared_tokenizer_errors(orchestrator, serving.model_path)
    return errors
