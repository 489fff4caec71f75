"""The steps of a run behind :mod:`verl_parl.cli.main`: prepare, train on a private Ray cluster, report."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.cli import config as parl_config
from verl_parl.cli import console, failures, sources
from verl_parl.cli.config import ConfigError, ParlConfig, check_override_types, parse_settings, validate
from verl_parl.cli.parts import declare_logical_gpus
from verl_parl.settings.handoff import hand_over, without_handover
from verl_parl.trainer import resume

VERL_METRICS_FILE = "verl_metrics.jsonl"
SUMMARY_METRICS = (
    "val-core/verl_parl/arithmetic/acc/mean@1",
    "critic/score/mean",
    "actor/grad_norm",
    "actor/pg_loss",
    "response_length/mean",
    "training/rollout_probs_diff_max",
    "parl/critical_steps/mean",
    "parl/parallelism/mean",
    "parl/num_assigned/mean",
    "parl/context_resets/mean",
    "parl/context_segments/mean",
    "parl/frozen/weights_changed",
    "parl/frozen/checkpoint_index",
)
# Held-out (validation, ``val-parl/*``, logged by verl_parl.trainer.hooks) and training-side counterparts:
# summary.json's ``heldout`` block and the head of the console table, label -> metric.
HELDOUT_METRICS = (
    ("held-out item-F1", "val-parl/item_f1/mean"),
    ("held-out score", "val-parl/score/mean"),
    ("held-out critical steps", "val-parl/critical_steps/mean"),
    ("held-out total steps", "val-parl/total_steps/mean"),
    ("held-out parallelism", "val-parl/parallelism/mean"),
    ("held-out parallel episodes", "val-parl/parallel_episode/mean"),
    ("held-out spurious fraction", "val-parl/spurious_fraction/mean"),
    ("held-out looped", "val-parl/looped/mean"),
    ("held-out wide item-F1", "val-parl/wide/item_f1/mean"),
    ("held-out results item-F1", "val-parl/results_item_f1/mean"),
    ("held-out coverage", "val-parl/coverage/mean"),
    ("held-out wide critical steps", "val-parl/wide/critical_steps/mean"),
    ("train critical steps", "parl/critical_steps/mean"),
    ("train parallelism", "parl/parallelism/mean"),
    ("train r_perf", "parl/reward/r_perf"),
    ("train spurious fraction", "parl/spurious_fraction/mean"),
    ("train looped", "parl/looped/mean"),
)


def prepare(cfg: DictConfig, *, overrides: list[str], embedded: str | None = None) -> ParlConfig:
    """Resolve the config (building cached assets), load plugins and validate; raise ConfigError.

    ``embedded`` is the ``embedded`` config group Hydra composed (None: none, or not composed by Hydra)."""
    from verl_parl.cli import assets
    from verl_parl.host import manager as plugins
    from verl_parl.registry import PluginError

    try:  # before anything is built or verl imported (~8 s): a broken plugin fails the run at once
        pm = plugins.get_plugin_manager()
    except PluginError as exc:
        raise ConfigError([f"plugins: {exc}"]) from exc
    import verl  # noqa: F401 - runs verl's plugin loading (our CPU backend) in this process

    from verl_parl.trainer import verl_plugin

    try:
        verl_plugin.ensure_loaded()
    except verl_plugin.VerlPluginError as exc:
        raise ConfigError([f"plugins: {exc}"]) from exc
    errors: list[str] = [*task_selection_errors(cfg, embedded), *parl_config.check_required(cfg)]
    with assets.building(False):  # fail before building any asset: the settings without their asset paths
        try:
            parse_settings(cfg)
        except ConfigError as exc:
            errors.extend(exc.errors)
    try:
        with assets.building(not errors):
            OmegaConf.resolve(cfg)
    except Exception as exc:
        raise ConfigError([*errors, f"config resolution: {type(exc).__name__}: {exc}"]) from exc
    with assets.building(False):  # the base config's defaults are compared, never built
        errors.extend(check_override_types(cfg, _base_config(cfg, embedded, overrides), overrides))
    errors.extend(resume.resume_errors(cfg))
    explicit_critic(cfg)
    plugin_errors = _plugin_errors(pm, cfg)
    try:
        parl = validate(cfg, plugin_errors=plugin_errors)  # the settings, parsed from the resolved config
    except ConfigError as exc:
        raise ConfigError(list(dict.fromkeys(errors + exc.errors))) from None
    if errors:
        raise ConfigError(errors)
    hand_over(cfg, parl)
    declare_logical_gpus(cfg, parl)
    keep_file_logger(cfg)
    return parl


FILE_LOGGER = "file"


def keep_file_logger(cfg: DictConfig) -> None:
    """Add verl's ``file`` logger to ``trainer.logger`` when the list lacks it: the step lines, ``metrics.jsonl``,
    ``summary.json`` and the plots read what it writes, whatever trackers (wandb, tensorboard, mlflow, ...) the
    list names besides."""
    loggers = OmegaConf.select(cfg, "trainer.logger")
    names = [loggers] if isinstance(loggers, str) else list(loggers or [])
    if FILE_LOGGER in names:
        return
    print(
        f"[verl-parl] trainer.logger={names}: adding {FILE_LOGGER!r}, which the run folder's reports read",
        file=sys.stderr,
        flush=True,
    )
    cfg.trainer.logger = [*names, FILE_LOGGER]


TRACKER_DIRS = {"TENSORBOARD_DIR": "tensorboard", "WANDB_DIR": ".", "MLFLOW_TRACKING_URI": "mlruns.db"}
"""Where verl's trackers write, inside the run folder unless the environment names a place: tensorboard's event
files, wandb's offline runs and files (``<run folder>/wandb``), mlflow's store (``sqlite:///<run folder>/mlruns.db``
instead of verl's ``/tmp/mlruns.db``)."""


def tracker_env(run_dir: Path) -> dict[str, str]:
    """The environment variables of :data:`TRACKER_DIRS` for verl's trackers: the launching shell's, else the run
    folder's places."""
    env = {}
    for key, place in TRACKER_DIRS.items():
        if os.environ.get(key):
            env[key] = os.environ[key]
        elif key == "MLFLOW_TRACKING_URI":
            env[key] = f"sqlite:///{run_dir / place}"
        else:
            env[key] = str(run_dir / place) if place != "." else str(run_dir)
    return env


def _plugin_errors(pm: Any, cfg: DictConfig) -> list[str]:
    """Every plugin's ``verl_parl_validate_config`` messages."""
    from verl_parl.host import manager as plugins
    from verl_parl.registry import PluginError

    try:
        return plugins.validate_config(pm, cfg)
    except PluginError as exc:
        raise ConfigError([f"plugins: {exc}"]) from exc


def task_selection_errors(cfg: DictConfig, embedded: str | None) -> list[str]:
    """A task's settings are its YAML (``embedded/<task>.yaml`` in its ``TaskSpec.config_dir``), composed with
    ``embedded=<task>``: a ``parl.embedded.task`` that names another task than the composed YAML's
    would train it under that YAML's settings (its scorer, tools, budget), so it is an error."""
    task = OmegaConf.select(cfg, "parl.embedded.task")
    if embedded is None or task == embedded:
        return []
    return [
        f"parl.embedded.task: {task!r}, but the composed task settings are {embedded!r}'s "
        f"(embedded/{embedded}.yaml): select the task with embedded={task} (its settings come with it), "
        f"or compose none with ~embedded"
    ]


def explicit_critic(cfg: DictConfig) -> None:
    """Set ``critic.enable`` when it is null to what verl would decide (a critic only for GAE), so verl's
    ``need_critic`` does not warn about its guess in every process that asks."""
    critic, estimator = cfg.get("critic"), OmegaConf.select(cfg, "algorithm.adv_estimator")
    if critic is not None and critic.get("enable") is None and estimator is not None:
        from verl.trainer.ppo.core_algos import AdvantageEstimator

        critic.enable = estimator == AdvantageEstimator.GAE


def _base_config(cfg: DictConfig, embedded: str | None, overrides: Iterable[str]) -> DictConfig:
    """The composed config without user overrides except the profile, the task and the search path (for type
    checks: a key the base leaves null, a task may give a value)."""
    from hydra import compose

    kept = [o for o in overrides if o.lstrip("+").startswith("hydra.searchpath")]
    task = [] if embedded is None else [f"embedded={embedded}"]
    return compose(config_name="parl_trainer", overrides=[*kept, f"profile={cfg.parl.profile}", *task])


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ray_init_kwargs(cfg: DictConfig, run_dir: Path, namespace: str | None = None) -> dict[str, Any]:
    """Keyword arguments of ``ray.init``: a private, loopback-only Ray cluster running verl's workers, or the
    existing cluster ``ray_kwargs.ray_init.address`` names (:mod:`verl_parl.cli.cluster`), joined without the
    keys that describe a node (:data:`~verl_parl.cli.cluster.NODE_KEYS`: a cluster's nodes declare those).
    ``namespace``: the run's Ray namespace, unless ``ray_kwargs.ray_init.namespace`` names one.

    On the CPU profile every worker starts with ``OMP_NUM_THREADS`` = the usable cores: Ray would force 1
    on actors that reserve no CPU, which leaves verl's trainer worker on one core while it computes log-probs
    and updates the actor (the steps when nothing else runs). The HF inference servers, which generate side
    by side, set their own thread count (``rollout.engine_kwargs.hf.num_threads``, ``parl.subagent.num_threads``).
    An ``OMP_NUM_THREADS`` in the launching shell or in ``ray_kwargs.ray_init.runtime_env.env_vars`` wins.
    """
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    from verl_parl.cli.cluster import NODE_KEYS, PRIVATE_KEYS, is_loopback

    user = OmegaConf.to_container(cfg.ray_kwargs.get("ray_init", {}), resolve=True) or {}
    assert isinstance(user, dict)
    address = user.pop("address", None)
    runtime_env = OmegaConf.to_container(OmegaConf.create(get_ppo_ray_runtime_env(cfg)), resolve=True)
    assert isinstance(runtime_env, dict)
    env_vars = runtime_env.setdefault("env_vars", {})
    env_vars["TRANSFER_QUEUE_ENABLE"] = "1"
    env_vars["VERL_FILE_LOGGER_PATH"] = str(run_dir / VERL_METRICS_FILE)
    env_vars.update(tracker_env(run_dir))
    # the driver's asset cache only on its own cluster: a joined cluster's nodes each have their own
    passed = (*FORWARDED_ENV, "VERL_PARL_CACHE") if address is None else FORWARDED_ENV
    env_vars.update({key: os.environ[key] for key in passed if os.environ.get(key) is not None})
    if cfg.parl.profile == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        env_vars["OMP_NUM_THREADS"] = str(usable_cores())
    user_env = user.pop("runtime_env", None) or {}
    merged_env = OmegaConf.to_container(OmegaConf.merge(runtime_env, user_env), resolve=True)
    assert isinstance(merged_env, dict)
    # Ray wants strings; a command-line override such as `env_vars.OMP_NUM_THREADS=2` arrives as an int.
    merged_env["env_vars"] = {key: str(value) for key, value in (merged_env.get("env_vars") or {}).items()}
    kwargs = {k: v for k, v in user.items() if v is not None}
    kwargs.update(runtime_env=merged_env, log_to_driver=True)
    if namespace is not None:
        kwargs.setdefault("namespace", namespace)
    if address is None:
        return {
            **kwargs,
            "address": "local",
            "_node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "dashboard_host": "127.0.0.1",
        }
    for key in (*NODE_KEYS, *PRIVATE_KEYS):
        kwargs.pop(key, None)
    if is_loopback(address):  # a cluster of this machine's nodes: the driver stays on loopback too
        kwargs.setdefault("_node_ip_address", "127.0.0.1")
    return {**kwargs, "address": address}


def run_namespace(run_dir: Path) -> str:
    """The run's own Ray namespace, ``verl_parl_<run folder name>_<8 hex digits>``: every named actor of the run
    (the frozen group, the policy's servers, verl's workers, TransferQueue's controller) is created and looked up
    in it, so runs that share a cluster never find each other's."""
    return f"verl_parl_{run_dir.name}_{secrets.token_hex(4)}"


FORWARDED_ENV = (
    "VERL_PLATFORM",
    "VERL_PARL_BLOCK_PLUGINS",
    "VERL_PARL_TRACE_HOOKS",
    "HF_HUB_OFFLINE",
    "WANDB_MODE",  # offline: wandb writes <run folder>/wandb for `wandb sync` later
    "TQ_NUM_THREADS",
)
"""The driver's environment variables every Ray worker of the run gets."""


def unused_node_keys(cfg: DictConfig) -> list[str]:
    """The ``ray_kwargs.ray_init`` keys set for a node Ray would start, which a joined cluster does not take
    (each with the ``ray start`` flag that declares it on the cluster's nodes)."""
    from verl_parl.cli.cluster import NODE_KEYS

    init = cfg.ray_kwargs.get("ray_init", {}) or {}
    if init.get("address") is None:
        return []
    return [f"{key} ({flag})" for key, flag in NODE_KEYS.items() if init.get(key) is not None]


def train(cfg: DictConfig, parl: ParlConfig, run_dir: Path) -> None:
    """Start a private Ray cluster (or join the one ``ray_kwargs.ray_init.address`` names), run verl's v1 trainer
    with its TaskRunner on this node, and always shut the private cluster down (or leave the joined one).

    On a joined cluster the assets the workers read travel with the run and every node is checked first
    (:mod:`verl_parl.cli.cluster`). Meanwhile the console shows one line per step (:mod:`verl_parl.cli.console`);
    everything Ray, verl and the workers print goes to ``<run_dir>/console.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(without_handover(cfg), run_dir / "resolved_config.yaml")
    total = OmegaConf.select(cfg, "trainer.total_training_steps")
    with console.captured(run_dir / console.CONSOLE_LOG) as out:
        mirror = MetricsMirror(run_dir, out)
        steps = console.StepLines(run_dir / VERL_METRICS_FILE, out, total_steps=total, on_lines=mirror).start()
        try:
            import ray
            from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

            from verl_parl.cli import cluster, placement
            from verl_parl.traces.recorder import start_recorder

            address = OmegaConf.select(cfg, cluster.ADDRESS_KEY)
            if address is not None:  # in a second, before Ray's own half-minute of retries
                cluster.check_head(str(address))
            namespace = run_namespace(run_dir)
            plan = cluster.plan_join(cfg, parl, namespace) if address is not None else None
            kwargs = ray_init_kwargs(cfg, run_dir, namespace=namespace)
            if plan is not None and plan.shipment is not None:
                kwargs["runtime_env"]["working_dir"] = str(plan.shipment.folder)
            try:
                ray.init(**kwargs)
            finally:
                if plan is not None and plan.shipment is not None:  # uploaded by ray.init (or not needed)
                    shutil.rmtree(plan.shipment.folder, ignore_errors=True)
            failures.exit_on_sigterm()  # ray.init replaced it with one that exits before the run's reports
            try:
                record = cluster.cluster_record(address, namespace, plan)
                write_atomic(run_dir / CLUSTER_FILE, json.dumps(record, indent=2, sort_keys=True) + "\n")
                errors = placement.startup_errors(cfg, parl, address, out)  # every bundle, before any worker starts
                if plan is not None:
                    errors += joined(cfg, parl, plan, record, out)
                if errors:
                    raise ConfigError(errors)
                # the run folder's writers (verl's file logger) here, under a name the placement watch can stop it by
                runner = cluster.on_this_node(TaskRunnerV1, name=placement.TASK_RUNNER_ACTOR)
                # the run's own actors, held for the run: the recorder writes other nodes' episode records here
                held = [start_recorder(run_dir)]
                with placement.run_watched(cfg, parl), failures.crashed_worker_named():  # a dead worker's loss named
                    run_ppo(cfg if plan is None else plan.worker_cfg, task_runner_class=runner)
                held.clear()
            finally:
                with failures.signals_held():  # a second Ctrl-C must not leave Ray's processes behind
                    ray.shutdown()
        finally:
            steps.stop()


CLUSTER_FILE = "cluster.json"
"""Where the run ran: the cluster's address and nodes, the run's Ray namespace, the assets sent along."""


def joined(cfg: DictConfig, parl: ParlConfig, plan: Any, record: dict[str, Any], out: IO[str]) -> list[str]:
    """On a joined cluster: say so on the console (what travelled with the run, the ``ray_kwargs.ray_init`` keys it
    does not take), and run the start-up checks on every node (:func:`verl_parl.cli.cluster.check_joined`); the
    problems found, each named with its key and node."""
    from verl_parl.cli.cluster import check_joined

    unused = unused_node_keys(cfg)
    notes = [f"namespace {record['namespace']}", f"{len(record['nodes'])} node(s)"]
    if record["assets_sent"]:
        sent = ", ".join(record["assets_sent"])
        notes.append(f"assets sent as Ray's working_dir ({record['assets_sent_bytes'] / 2**20:.1f} MiB): {sent}")
    if unused:
        notes.append(f"not used: ray_kwargs.ray_init {', '.join(unused)}, declared by the nodes")
    print(f"{console.PREFIX} joined the Ray cluster at {record['address']}; {'; '.join(notes)}", file=out, flush=True)
    return check_joined(cfg, parl, plan)


def prepare_run_folder(cfg: DictConfig, run_dir: Path) -> int | None:
    """When verl will resume from a checkpoint at step S (``trainer.resume_mode``), keep the run folder's
    records of steps <= S and skip the validation before training (:mod:`verl_parl.trainer.resume`); returns S.
    Then record where each value of the config came from (``config_sources.yaml``: :mod:`verl_parl.cli.sources`)."""
    step = resume.prepare_resume(cfg, run_dir, VERL_METRICS_FILE)
    if step is not None:
        print(
            f"[verl-parl] resuming from the checkpoint of step {step} (trainer.resume_mode="
            f"{OmegaConf.select(cfg, 'trainer.resume_mode')}); metrics of later steps are logged anew",
            file=sys.stderr,
            flush=True,
        )
    sources.record_run_sources(without_handover(cfg), run_dir, write_atomic)
    return step


class MetricsMirror:
    """Keeps ``metrics.jsonl`` current while training (called by :class:`console.StepLines` as verl logs
    steps), so that a run that stops, however it stops, leaves the steps logged so far there. A write that
    fails (a full disk) leaves the previous file whole (:func:`write_atomic`) and is reported once on ``out``."""

    def __init__(self, run_dir: Path, out: IO[str]) -> None:
        self.run_dir = run_dir
        self.out = out
        self.failed = False

    def __call__(self) -> None:
        try:
            write_metrics(self.run_dir, read_verl_metrics(self.run_dir / VERL_METRICS_FILE, complete_only=True))
        except OSError as exc:
            if not self.failed:
                self.failed = True
                print(f"{console.PREFIX} warning: could not update {exc.filename}: {exc.strerror}", file=self.out)


def write_metrics(run_dir: Path, records: list[dict[str, Any]]) -> None:
    """``metrics.jsonl``: one flat JSON object per step (written whole or not at all)."""
    write_atomic(run_dir / "metrics.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def read_verl_metrics(path: Path, *, complete_only: bool = False) -> list[dict[str, Any]]:
    """verl's file logger lines ``{"step", "data"}`` merged into one flat record per step; the lines that
    earlier runs of a resumed run folder logged (``verl_metrics.previous.jsonl`` beside ``path``) first.

    A line of ``path`` that is not such a record is skipped with a warning: a run stopped mid-write (killed, or its
    disk full) can leave a truncated last line, and the steps before it must still be reported.
    ``complete_only`` ignores, silently, a last line without its newline (one being written right now)."""
    by_step: dict[int, dict[str, Any]] = {}
    for entry in resume.read_metric_lines(path.parent / resume.PREVIOUS_METRICS_FILE):
        by_step.setdefault(int(entry["step"]), {"step": int(entry["step"])}).update(entry.get("data", {}))
    if not path.exists():
        return [by_step[s] for s in sorted(by_step)]
    text = path.read_text(errors="replace")
    if complete_only:
        text = text[: text.rfind("\n") + 1]
    entries, skipped = resume.parse_metric_lines(text)
    for entry in entries:
        by_step.setdefault(entry["step"], {"step": entry["step"]}).update(entry.get("data", {}))
    if skipped:
        print(f"[verl-parl] warning: skipped {skipped} unreadable line(s) of {path}", file=sys.stderr, flush=True)
    return [by_step[s] for s in sorted(by_step)]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it: a failed write (a full disk)
    leaves the previous file whole and no partial one. Raises OSError naming ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def start_end(records: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """First and last finite value of a metric across steps (None if it never appears)."""
    values = [(r["step"], r[key]) for r in records if _finite(r.get(key))]
    if not values:
        return None
    return {"start": values[0][1], "start_step": values[0][0], "end": values[-1][1], "end_step": values[-1][0]}


def config_digest(cfg: DictConfig) -> str:
    text = OmegaConf.to_yaml(without_handover(cfg), resolve=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_reports(
    cfg: DictConfig, run_dir: Path, *, started: float, succeeded: bool, resumed_from: int | None = None
) -> dict[str, Any]:
    """Write ``metrics.jsonl`` (one flat record per step) and ``summary.json``; return the summary."""
    run_dir.mkdir(parents=True, exist_ok=True)
    records = read_verl_metrics(run_dir / VERL_METRICS_FILE)
    write_metrics(run_dir, records)
    steps = [r["step"] for r in records if "training/global_step" in r]
    summary = {
        "succeeded": succeeded,
        "config_digest": config_digest(cfg),
        "profile": cfg.parl.profile,
        "steps": max(steps) if steps else 0,
        "resumed_from_step": resumed_from,
        "missing_steps": resume.missing_steps(steps),
        "wall_time_s": round(time.time() - started, 1),
        "metrics": {key: se for key in SUMMARY_METRICS if (se := start_end(records, key)) is not None},
        "heldout": heldout_summary(records),
        "run_dir": str(run_dir),
        "final_model": final_model(cfg),
        "trackers": trackers(cfg, run_dir),
    }
    write_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    summary["plots"] = _plots(records, run_dir / "plots")  # after the summary: plots are a convenience
    summary["traces"] = _traces(cfg, run_dir)
    write_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def trackers(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """verl's loggers of the run (``trainer.logger``) and, for those that write files, where (for summary.json)."""
    loggers = OmegaConf.select(cfg, "trainer.logger")
    names = [loggers] if isinstance(loggers, str) else list(loggers or [])
    where = {name: tracker_env(run_dir)[key] for name, key in TRACKER_KEYS.items() if name in names}
    return {"logger": names, **where}


TRACKER_KEYS = {"tensorboard": "TENSORBOARD_DIR", "wandb": "WANDB_DIR", "mlflow": "MLFLOW_TRACKING_URI"}


def final_model(cfg: DictConfig) -> str | None:
    """The policy's last Hugging Face checkpoint that verl saved (``trainer.save_freq`` > 0 with ``hf_model`` in
    ``actor_rollout_ref.actor.checkpoint.save_contents``): ``<default_local_dir>/global_step_N/actor/huggingface``
    of the latest step N, or None. ``python -m verl_parl.evaluate --model`` takes it as it is."""
    root = OmegaConf.select(cfg, "trainer.default_local_dir", default=None)
    if not root or not Path(root).is_dir():
        return None
    steps = {p: p.name.removeprefix("global_step_") for p in Path(root).glob("global_step_*")}
    saved = sorted(((int(n), p) for p, n in steps.items() if n.isdigit()), reverse=True)
    for _, step_dir in saved:
        hf = step_dir / "actor" / "huggingface"
        # verl writes config.json there at every save; the weights only with hf_model in save_contents
        if (hf / "config.json").is_file() and any(next(hf.glob(pattern), None) for pattern in HF_WEIGHTS):
            return str(hf)
    return None


HF_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def _plots(records: list[dict[str, Any]], out_dir: Path) -> list[str]:
    """PNG plots of the run (a failure to plot is logged; it never fails the run)."""
    from verl_parl.cli.plots import plot_run

    try:
        return [str(p) for p in plot_run(records, out_dir)]
    except Exception as exc:  # noqa: BLE001 - plots are a convenience, the metrics are already written
        print(f"[verl-parl] warning: could not write plots: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return []


def _traces(cfg: DictConfig, run_dir: Path) -> dict[str, Any] | None:
    """``traces/index.html`` drawn from ``traces/swarm.jsonl`` (None without traces, or with
    ``parl.traces.html: false``); what it holds, for summary.json. A failure is logged, never fatal."""
    from verl_parl.traces.read import trace_path
    from verl_parl.traces.view import INDEX_FILE, write_html

    if not OmegaConf.select(cfg, "parl.traces.html", default=True) or not trace_path(run_dir).is_file():
        return None
    try:
        html = run_dir / INDEX_FILE
        traces = write_html(run_dir, html)
    except Exception as exc:  # noqa: BLE001 - the viewer is a convenience, the traces are already written
        print(f"[verl-parl] warning: could not draw the traces: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return {
        "html": str(html),
        "episodes": traces.read,
        "skipped_lines": traces.skipped,
        "dropped": traces.dropped,
    }


def heldout_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Start and end of each :data:`HELDOUT_METRICS` entry that was logged, by label, each with its
    ``metric`` name (start = first logged value, i.e. the validation before training when
    ``trainer.val_before_train``; end = the last validation)."""
    block = {
        label: {"metric": key, **se} for label, key in HELDOUT_METRICS if (se := start_end(records, key)) is not None
    }
    if "held-out item-F1" not in block:  # e.g. verl's own trainer mode: fall back to verl's per-source means
        derived = [{"step": r["step"], AUX_ITEM_F1: f} for r in records if (f := aux_item_f1(r)) is not None]
        if (se := start_end(derived, AUX_ITEM_F1)) is not None:
            block = {"held-out item-F1": {"metric": AUX_ITEM_F1, **se}, **block}
    return block


AUX_ITEM_F1 = "heldout/item_f1"


def aux_item_f1(record: dict[str, Any]) -> float | None:
    """``heldout/item_f1``: the unweighted mean over data sources of verl's ``val-aux/<source>/item_f1/mean@N``
    (None without any); used only when the trainer logged no per-episode ``val-parl/item_f1/mean``."""
    values = [v for k, v in record.items() if k.startswith("val-aux/") and "/item_f1/mean@" in k and _finite(v)]
    return sum(values) / len(values) if values else None


def format_summary(summary: dict[str, Any]) -> str:
    """A short start-vs-end table for the console: the held-out block first, then ``metrics``."""
    status = "finished" if summary["succeeded"] else "FAILED"
    lines = [
        f"[verl-parl] run {status}: {summary['steps']} steps in {summary['wall_time_s']} s -> {summary['run_dir']}",
        f"{'metric':<48} {'start':>12} {'end':>12}",
    ]
    if summary.get("resumed_from_step") is not None:
        lines.insert(1, f"resumed from the checkpoint of step {summary['resumed_from_step']}")
    if summary.get("missing_steps"):
        lines.insert(
            1, f"steps without a metrics record (killed between checkpoint and log): {summary['missing_steps']}"
        )
    heldout = summary.get("heldout") or {}
    shown = {se["metric"] for se in heldout.values()}
    rows = [(f"{label} (step {se['start_step']}->{se['end_step']})", se) for label, se in heldout.items()]
    if not any(key.startswith("val-parl/") for key in shown):
        rows.insert(0, ("held-out: no val-parl/* metrics (set trainer.test_freq / val_before_train)", None))
    elif "held-out item-F1" not in heldout:
        rows.insert(0, ("held-out item-F1: not reported (the task's scorer has no item_f1)", None))
    rows += [(key, se) for key, se in summary["metrics"].items() if key not in shown]
    for name, se in rows:
        lines.append(name if se is None else f"{name:<48} {se['start']:>12.4g} {se['end']:>12.4g}")
    if model := summary.get("final_model"):
        lines.append(f"final model: {model} (python -m verl_parl.evaluate --model {model} --data ...)")
    if traces := summary.get("traces"):
        lines.append(f"traces: {traces['html']} ({traces['episodes']} episodes; python -m verl_parl.traces --help)")
    return "\n".join(lines)
