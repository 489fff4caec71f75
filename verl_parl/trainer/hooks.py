"""verl-parl's hooks on every verl v1 trainer mode, chosen with verl's own ``trainer.v1.trainer_mode``.

:class:`ParlHooks` is a mixin over verl's trainer classes; :func:`install` (run when this module is
imported, which :mod:`verl_parl.trainer.verl_plugin` does when verl imports ``verl.trainer.ppo.v1``) puts, under
each of verl's mode names (``sync``, ``colocate_async``, ``separate_async``), a subclass
``(ParlHooks, verl's class)`` in verl's trainer registry. Nothing of verl's trainer code is copied: each
hook calls verl's method and adds to it. The hooks act only in runs whose config has verl-parl's
``parl:`` section (``python -m verl_parl.main``); a plain verl run without it trains exactly as verl's
class. ``trainer_mode=parl_sync`` (verl's sync trainer with the hooks, under its own name, acting without
a ``parl`` section too) is kept for existing configs and plain verl runs; verl treats any name other than
``sync`` as asynchronous in a few places (its replay buffer, one prompt per dataloader fetch), so
``python -m verl_parl.main`` uses ``sync``.

Agent loops report episode fields in ``AgentLoopOutput.extra_fields`` (``parl_critical_steps``,
``parl_num_assigned``, ...). verl stores them in TransferQueue but only reads a few of them back, so the
hooks add to the step metrics: the batch mean of every numeric ``parl_*`` field, logged as
``parl/<name>/mean``, and the frozen group's proof of frozenness (``parl/frozen/weights_changed``, see
:func:`frozen_group_metrics`). With ``parl.subagent.schedule`` they also switch the frozen group's
checkpoint before each step's rollout and each validation (:mod:`verl_parl.swarm.frozen.schedule`), logged as
``parl/frozen/checkpoint_index``. verl's regeneration of failed prompt groups is bounded
(:mod:`verl_parl.trainer.rollout_guard`): a dead policy server stops the run naming it instead of spinning
forever. Around verl's advantage computation they log the staged reward's terms
and hand the ``reinforce_nsc`` estimator its context (:mod:`verl_parl.trainer.reward_hooks`). After verl's
old-log-prob pass they log the rollout-vs-trainer probability gap over the trajectories the current
policy generated (:mod:`verl_parl.trainer.offpolicy`, ``parl/off_policy/*``).

Validation (verl's ``_validate``) logs only ``reward_extra_info`` per data source, so
:meth:`ParlHooks._validate` also reads each validation episode's ``extra_fields`` and logs the
held-out metrics of :func:`heldout_metrics` under ``val-parl/`` (see ``docs/tasks.md``, "Run reports").

In the async modes the step's rollout runs while verl trains: the subagent schedule is applied at the
start of each step (``on_step_begin``), so an episode that spans a weight sync may have had its subagents
served by the previous stage's checkpoint for the turns before it.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import OmegaConf
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, PPOTrainer, register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from verl_parl.partial_rollout.settings import partial_rollout_settings
from verl_parl.settings.run import has_parl, run_folder
from verl_parl.swarm.frozen import frozen_group_metrics
from verl_parl.swarm.frozen.schedule import FrozenGroupSchedule
from verl_parl.swarm.settings import frozen_schedule, swarm_settings
from verl_parl.trainer.cotrain import bind_credit
from verl_parl.trainer.modes import PARL_SYNC, VERL_MODES
from verl_parl.trainer.reward_hooks import after_advantage, before_advantage
from verl_parl.trainer.rollout_guard import RefillGuard, named_actors, policy_server_names, refill_limit

TRAINER_MODE = PARL_SYNC
FIELD_PREFIX = "parl_"
REPLAY_POLL_S = 0.2
"""Seconds between two looks of verl's replay buffer for finished episodes (verl's default: 2). A step's rollout,
and each validation, ended on the next look: 2 s steps made them 1 s longer on average (the default run's
rollouts took 8.02, 10.02, 12.03 or 14.04 s). A look is one TransferQueue listing."""


def parl_field_means(extra_fields: list[Any]) -> dict[str, float]:
    """Mean of each numeric ``parl_*`` field over the rows that have it: ``parl/<name>/mean``."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in extra_fields:
        if not isinstance(row, dict):
            continue
        for key, value in row.items():
            if key.startswith(FIELD_PREFIX) and isinstance(value, int | float) and math.isfinite(value):
                name = key[len(FIELD_PREFIX) :]
                sums[name] = sums.get(name, 0.0) + float(value)
                counts[name] = counts.get(name, 0) + 1
    return {f"parl/{name}/mean": sums[name] / counts[name] for name in sorted(sums)}


HELDOUT_PREFIX = "val-parl"
HELDOUT_FIELDS = (
    "item_f1",
    "score",
    "critical_steps",
    "total_steps",
    "parallelism",
    "parallel_episode",
    "num_assigned",
    "spurious_fraction",
    "looped",
    "results_item_f1",
    "coverage",
    "refused_repeats",
)


def final_session_rows(keys: list[str], rows: list[Any]) -> list[Any]:
    """The last output of each session, in first-seen order, as verl's validation picks them.

    Keys are ``{uid}_{session}_{index}`` (a loop with context segments returns several outputs per
    session; only the highest index carries the episode's final accounting and reward)."""
    best: dict[str, tuple[int, int]] = {}
    for pos, key in enumerate(keys):
        parts = str(key).rsplit("_", 2)
        session, index = (f"{parts[0]}_{parts[1]}", int(parts[2])) if len(parts) == 3 else (str(key), 0)
        if session not in best or index > best[session][0]:
            best[session] = (index, pos)
    return [rows[pos] for _, pos in sorted(best.values(), key=lambda item: item[1])]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def heldout_row(extra: Any) -> dict[str, float]:
    """One validation episode's held-out values from its ``extra_fields``.

    ``item_f1``: the scorer's item-F1 (``reward_extra_info["item_f1"]``: the table scorer's on wide
    tasks, the answer score on deep ones; absent for scorers without it, e.g. arithmetic); ``score``:
    the scorer's ``r_perf``. ``critical_steps`` / ``total_steps`` / ``parallelism`` / ``num_assigned``: the swarm loop's
    accounting; a loop without subagents (``researcher``) counts each turn as one step of both and
    parallelism 0 (no subagent launched, as :func:`verl_parl.swarm.accounting.parallelism` defines).
    ``parallel_episode``: 1 if some stage launched more than one subagent (parallelism above 1), else 0: its mean
    is the share of parallel episodes (of a mixed cold start, say).
    ``spurious_fraction``: the ``parl`` reward's share of spurious subagents (:mod:`verl_parl.rewards.guard`);
    ``looped``: 1 if the ``parl`` reward found a loop in the response (:mod:`verl_parl.chat.repetition`);
    ``results_item_f1``: on table tasks, the item-F1 of the rows the subagents returned, as if the answer had
    copied them all (:func:`verl_parl.rewards.scorers.results_item_f1`); ``coverage``: on table tasks, the share of
    the rows some assignment names (:func:`verl_parl.rewards.guard.coverage`)."""
    if not isinstance(extra, dict):
        return {}
    info = extra.get("reward_extra_info")
    info = info if isinstance(info, dict) else {}
    row: dict[str, float] = {}
    candidates = {
        "item_f1": [info.get("item_f1")],
        "score": [info.get("parl_r_perf"), info.get("score")],
        "critical_steps": [extra.get("parl_critical_steps"), extra.get("parl_turns")],
        "total_steps": [extra.get("parl_total_steps"), extra.get("parl_turns")],
        "parallelism": [extra.get("parl_parallelism"), 0.0 if _number(extra.get("parl_turns")) is not None else None],
        "num_assigned": [extra.get("parl_num_assigned"), 0.0 if _number(extra.get("parl_turns")) is not None else None],
        "spurious_fraction": [info.get("parl_spurious_fraction")],
        "looped": [info.get("parl_looped")],
        "results_item_f1": [info.get("parl_results_item_f1")],
        "coverage": [info.get("parl_coverage")],
        "refused_repeats": [extra.get("parl_refused_repeats")],
    }
    for name, values in candidates.items():
        found = next((v for v in map(_number, values) if v is not None), None)
        if found is not None:
            row[name] = found
    if "parallelism" in row:
        row["parallel_episode"] = float(row["parallelism"] > 1.0)
    return row


def heldout_metrics(extra_fields: list[Any], data_sources: list[Any] | None = None) -> dict[str, float]:
    """``val-parl/<name>/mean`` over the validation episodes that report ``<name>`` (see
    :func:`heldout_row`), plus ``val-parl/episodes``: the number of episodes read.

    With ``data_sources`` (one per episode) naming more than one source, the same means per source under
    ``val-parl/<kind>/``, ``<kind>`` the source's last path part (``verl_parl/research/wide`` -> ``wide``)."""
    rows = [heldout_row(extra) for extra in extra_fields]
    metrics = {f"{HELDOUT_PREFIX}/episodes": float(len(rows)), **_means(rows, HELDOUT_PREFIX)}
    kinds = [str(source).rsplit("/", 1)[-1] for source in data_sources or []]
    if len(kinds) == len(rows) and len(set(kinds)) > 1:
        for kind in sorted(set(kinds)):
            group = [row for row, of in zip(rows, kinds, strict=True) if of == kind]
            metrics.update(_means(group, f"{HELDOUT_PREFIX}/{kind}"))
    return metrics


def _means(rows: list[dict[str, float]], prefix: str) -> dict[str, float]:
    means = {}
    for name in HELDOUT_FIELDS:
        values = [row[name] for row in rows if name in row]
        if values:
            means[f"{prefix}/{name}/mean"] = sum(values) / len(values)
    return means


class ParlHooks:
    """verl-parl's additions to a verl v1 trainer (a mixin: list it before verl's class). :meth:`_compute_advantage`,
    :meth:`_compute_old_log_prob`, :meth:`_compute_metrics` and :meth:`_validate` are extended, and
    ``on_step_begin`` / ``on_validate_begin`` apply ``parl.subagent.schedule`` to the frozen group; each only
    when the config has a ``parl`` section (:attr:`parl_active`)."""

    config: Any
    global_steps: int
    _frozen_digests: dict[str, str] | None = None
    _frozen_schedule: FrozenGroupSchedule | None = None
    _frozen_checkpoint_index: int | None = None
    _refills: RefillGuard | None = None
    _partial: Any = None  # verl_parl.trainer.partial_rollout.PartialRollout when parl.partial_rollout is enabled
    _partial_board: Any = None  # its board's Ray actor handle (kept: the actor lives as long as the trainer)

    always_active = False
    """True for a class chosen by its own name (``parl_sync``): the hooks act without a ``parl`` section."""

    @property
    def parl_active(self) -> bool:
        """Whether the hooks act: this run is verl-parl's (its config has the ``parl`` section), or the
        trainer was chosen by verl-parl's own mode name (a plain verl run with ``trainer_mode=parl_sync``)."""
        return self.always_active or has_parl(self.config)

    def on_init_end(self) -> None:
        super().on_init_end()  # type: ignore[misc]  # verl is untyped
        if self.parl_active:
            self._frozen_schedule = frozen_schedule(swarm_settings(self.config))  # parsed by the driver
            limit = refill_limit(int(OmegaConf.select(self.config, "data.train_batch_size", default=1) or 1))
            self._refills = RefillGuard(limit, policy_server_names(named_actors()))
            self._start_partial_rollout()

    def _partial_enabled(self) -> bool:
        return self.parl_active and partial_rollout_settings(self.config).enable

    def _build_replay_buffer(self) -> Any:
        """verl's replay buffer, looking every :data:`REPLAY_POLL_S`; with ``parl.partial_rollout``, as
        :func:`verl_parl.trainer.partial_sampler.pausing` of its class (inert until
        :meth:`_start_partial_rollout` hands it the controller)."""
        buffer = super()._build_replay_buffer()  # type: ignore[misc]  # verl is untyped
        if self.parl_active:
            buffer.poll_interval = REPLAY_POLL_S
        if self._partial_enabled():
            from verl_parl.trainer.partial_sampler import pausing

            buffer.__class__ = pausing(type(buffer))
        return buffer

    def _start_partial_rollout(self) -> None:
        """Start the run's pause board (a named Ray actor the agent loops find) and the controller."""
        if not self._partial_enabled():
            return
        import ray

        from verl_parl.partial_rollout.board import BOARD_ACTOR, PauseBoard
        from verl_parl.trainer.partial_rollout import PartialRollout, RayBoard

        actor = ray.remote(PauseBoard).options(name=BOARD_ACTOR, num_cpus=0, max_concurrency=100_000)
        self._partial_board = actor.remote()
        self._partial = PartialRollout(
            partial_rollout_settings(self.config),
            RayBoard(self._partial_board),
            refill=super()._add_prompts_to_generate,  # type: ignore[misc]  # not a failure: no RefillGuard
            batch_size=int(self.config.data.train_batch_size),
            run_dir=run_folder(self.config),
        )
        self.replay_buffer.partial = self._partial  # type: ignore[attr-defined]
        # each paused group's refill waits for the buffer's next look: parl.partial_rollout sets how often it looks
        self.replay_buffer.poll_interval = self._partial.settings.poll_interval_s  # type: ignore[attr-defined]

    def prepare_step(self) -> dict:
        """verl submits a whole batch of fresh prompts; with partial rollout, the paused groups resume first and
        fresh prompts fill the rest (:meth:`verl_parl.trainer.partial_rollout.PartialRollout.prepare_step`)."""
        if self._partial is None:
            return super().prepare_step()  # type: ignore[misc, no-any-return]
        self._partial.prepare_step(int(self.global_steps), super()._add_prompts_to_generate)  # type: ignore[misc]
        return {}

    def _submit_batch_to_rollout(self, batch: Any) -> int:
        submitted = int(super()._submit_batch_to_rollout(batch))  # type: ignore[misc]
        if self._partial is not None:
            indices = [int(i) for i in batch["index"]] if "index" in batch else None
            self._partial.on_submit([str(uid) for uid in batch["uid"]], int(self.global_steps), indices)
        return submitted

    def on_validate_begin(self) -> None:
        super().on_validate_begin()  # type: ignore[misc]  # verl is untyped
        self._switch_frozen_checkpoint()

    def on_step_begin(self) -> None:
        super().on_step_begin()  # type: ignore[misc]  # the sync trainer submits the step's prompts after this
        self._switch_frozen_checkpoint()
        if self._refills is not None:
            self._refills.new_step()

    def _add_prompts_to_generate(self, num_prompts: int) -> int:
        """verl's refill of failed (or filtered) prompt groups, guarded (:mod:`verl_parl.trainer.rollout_guard`):
        without a bound, a dead policy server made verl regenerate failing groups forever."""
        if self._refills is not None:
            self._refills.check(num_prompts, int(self.global_steps))
        return int(super()._add_prompts_to_generate(num_prompts))

    def _switch_frozen_checkpoint(self) -> None:
        """Make the frozen group serve the checkpoint of ``global_steps`` (a function of the step)."""
        if self._frozen_schedule is not None:
            self._frozen_checkpoint_index = self._frozen_schedule.apply(int(self.global_steps))

    def _validate(self) -> dict[str, float]:
        """verl's validation plus :func:`heldout_metrics` of the episodes it sampled.

        verl reads the episodes from TransferQueue and clears them inside ``_validate``; their
        ``extra_fields`` are read right after each ``replay_buffer.sample`` (wrapped for this call only)."""
        import transfer_queue as tq

        if not self.parl_active:
            return super()._validate()  # type: ignore[misc, no-any-return]
        episodes: list[Any] = []
        sources: list[Any] = []
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        sample = buffer.sample

        def sample_and_read(*args: Any, **kwargs: Any) -> Any:
            batch, sample_metrics = sample(*args, **kwargs)
            if batch.keys:
                fields = ["extra_fields", "data_source"]
                data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
                keys, extra = list(batch.keys), data.pop("extra_fields").tolist()
                source = data.pop("data_source", None)
                source = source.tolist() if source is not None else ["unknown"] * len(keys)
                episodes.extend(final_session_rows(keys, extra))
                sources.extend(final_session_rows(keys, source))
            return batch, sample_metrics

        buffer.sample = sample_and_read
        try:
            metrics: dict[str, float] = super()._validate()  # type: ignore[misc]
        finally:
            buffer.sample = sample
        metrics.update(heldout_metrics(episodes, sources))
        self._trace_rewards(episodes)
        return metrics

    def _trace_rewards(self, rows: list[Any]) -> None:
        """The rewards of the traced episodes among ``rows`` to ``traces/rewards.jsonl`` (for the viewer)."""
        from verl_parl.traces.write import append_rewards

        run_dir = run_folder(self.config)
        if run_dir:
            append_rewards(run_dir, [getattr(row, "data", row) for row in rows])

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        context = before_advantage(self, batch, metrics) if self.parl_active else None
        restore = bind_credit(self, batch, metrics) if self.parl_active else None  # co-trained subagents
        try:
            result = super()._compute_advantage(batch, metrics)  # type: ignore[misc]
        finally:
            if restore is not None:
                restore()
            after_advantage(metrics, context)
        return result

    def _compute_old_log_prob(self, batch: Any, metrics: dict) -> Any:
        result = super()._compute_old_log_prob(batch, metrics)  # type: ignore[misc]
        rollout = self.config.actor_rollout_ref.rollout
        bypass = OmegaConf.select(self.config, "algorithm.rollout_correction.bypass_mode", default=False)
        if self.parl_active and rollout.calculate_log_probs and not bypass:
            from verl_parl.trainer.offpolicy import fresh_policy_metrics

            metrics.update(fresh_policy_metrics(batch, int(self.global_steps)))
        return result

    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> Any:
        import transfer_queue as tq

        result = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)  # type: ignore[misc]
        if not self.parl_active:
            return result
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        rows = data.pop("extra_fields").tolist()
        metrics.update(parl_field_means(rows))
        if self._partial is not None:  # without verl's padding rows (copies of a real one under a "pad..." uid)
            real = [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]
            keys = [batch.keys[i] for i in real]
            metrics.update(self._partial.on_trained(keys, [rows[i] for i in real], int(global_steps)))
        self._trace_rewards(rows)
        if self._frozen_digests is None:
            self._frozen_digests = {}
        metrics.update(frozen_group_metrics(self._frozen_digests))
        if self._frozen_checkpoint_index is not None:
            metrics["parl/frozen/checkpoint_index"] = float(self._frozen_checkpoint_index)
        return result


@register_trainer(TRAINER_MODE)
class ParlSyncTrainer(ParlHooks, PPOTrainerSync):
    """``trainer.v1.trainer_mode=parl_sync``: verl's sync trainer with :class:`ParlHooks`, acting also without a
    ``parl`` section (how a plain verl run, ``examples/plain_verl``, gets verl-parl's metrics)."""

    always_active = True


def with_hooks(base: type[PPOTrainer]) -> type[PPOTrainer]:
    """``(ParlHooks, base)``: verl's trainer class ``base`` with verl-parl's hooks (the same class each call)."""
    if issubclass(base, ParlHooks):
        return base
    cached = _WRAPPED.get(base)
    if cached is None:
        doc = f"verl's ``{base.__name__}`` with :class:`ParlHooks` (registered under verl's mode name)."
        cached = type(f"Parl{base.__name__}", (ParlHooks, base), {"__module__": __name__, "__doc__": doc})
        _WRAPPED[base] = cached
    return cached


_WRAPPED: dict[type, type] = {}


def install(registry: dict[str, type[PPOTrainer]] | None = None) -> list[str]:
    """Put :func:`with_hooks` of each of verl's mode classes under its own name in verl's trainer registry
    (verl's ``register_trainer`` refuses to re-register a name, so the registry dict is written directly;
    ``tests/unit/test_cpu_backend_guards.py`` fails if verl changes it). Returns the modes extended."""
    registry = TRAINER_REGISTRY if registry is None else registry
    done = []
    for mode in VERL_MODES:
        base = registry.get(mode)
        if base is not None:
            registry[mode] = with_hooks(base)
            done.append(mode)
    return done


def known_modes() -> list[str]:
    """Every ``trainer.v1.trainer_mode`` the registry knows (verl's, ours, and any a plugin registered)."""
    return sorted(TRAINER_REGISTRY)


# verl_parl.trainer.verl_plugin imports this module once verl imports verl.trainer.ppo.v1 (whose registry then holds
# verl's three modes); when this module is imported first, that hook finds it half-initialised, hence here.
install()
