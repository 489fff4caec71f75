"""``python -m verl_parl.main``: verl's v1 PPO/GRPO trainer with verl-parl's plugins and config.

The order matters and is the point of this module:

1. make the task explicit (the plugins' default task when the command line names no task and no data; a task and
   data of one's own together are an error), pick the hardware profile (cpu when no GPU is visible) and set
   ``VERL_PLATFORM`` before verl is imported anywhere, so verl's plugin hook activates the CPU backend in every
   process;
2. compose verl's ``ppo_trainer`` config with ours (Hydra), resolve it (building cached assets);
3. load verl-parl's plugins and validate everything, reporting all errors at once;
4. only then start a private Ray cluster on loopback (or join the one ``ray_kwargs.ray_init.address`` or
   ``$RAY_ADDRESS`` names: :mod:`verl_parl.cli.cluster`), run verl's ``TaskRunnerV1``, and tear Ray down (or
   leave the joined cluster) on every exit path;
5. write the run folder's ``metrics.jsonl`` and ``summary.json``, also when training stopped early
   (Ctrl-C, SIGTERM, a dead worker, a full disk), then say in one line why it stopped and exit non-zero
   (:mod:`verl_parl.cli.failures`).

While training, the console shows one line per step; everything else (Ray, verl and the workers) goes
to the run folder's ``console.log``. The results (the summary table) are printed on stdout, progress
and logs on stderr. The run folder's ``config_sources.yaml`` records where each value came from (verl, base, the
task, the profile, the command line: :mod:`verl_parl.cli.sources`).

``python -m verl_parl.main --dry-run [overrides...]`` does steps 1-3 only (:mod:`verl_parl.cli.dryrun`): it prints the
resolved config with each value's source on stdout (``key: value  # source``) and exits 0, or reports every config
error and exits 2; it builds no asset (a ``${parl_asset:NAME}`` value is shown as
``<built on first use: parl_asset NAME>``), starts neither Ray nor the trainer, and leaves no run folder.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from verl_parl.cli.failures import exit_on_sigterm
from verl_parl.cli.selection import (
    CONFIG_MODULE,
    CONFIG_NAME,
    DRY_RUN,
    choose_profile,
    gpu_visible,
    select_task,
    task_config_dirs,
    verl_config_searchpath,
)
from verl_parl.settings.errors import ConfigError

__all__ = [
    "CONFIG_MODULE",
    "CONFIG_NAME",
    "choose_profile",
    "gpu_visible",
    "main",
    "select_task",
    "task_config_dirs",
    "verl_config_searchpath",
]

USAGE = """usage: python -m verl_parl.main [--dry-run] [key=value ...]

Trains with verl's PPO/GRPO trainer and verl-parl's config; every key below can be overridden (key=value).
  --dry-run   check the config as a run would and print each value with its source (verl, base, task <name>,
              profile <cpu|gpu>, command line) on stdout; nothing is built or started, no run folder is written;
              exit 0 when valid, 2 with every config error
"""


def prepare_environment(profile: str, address: str | None = None) -> None:
    """Process environment that must be in place before verl or Ray is imported. ``address``: the Ray cluster
    the run joins (:func:`verl_parl.cli.cluster.with_ray_address`), None for a private one on 127.0.0.1."""
    from verl_parl.cli.cluster import ray_environment

    if profile == "cpu":
        os.environ["VERL_PLATFORM"] = "cpu"
    ray_environment(address, os.environ)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1" if profile == "cpu" else os.environ.get("HF_HUB_OFFLINE", "0"))
    os.environ.setdefault("TQ_NUM_THREADS", str(transfer_queue_threads()))
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")  # worker lines go to the run's console.log: no ANSI colours
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report to Ray's servers from a run


def transfer_queue_threads(default: int = 8) -> int:
    """Torch threads for TransferQueue's puts and gets (its ``TQ_NUM_THREADS``, read at import in the driver
    and every Ray worker): its default 8, capped at the physical cores. TransferQueue caps a larger value
    itself, warning on every put and get (hundreds of lines per run on a 2-core machine)."""
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    return max(1, min(default, cores))


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``verl-parl`` and ``python -m verl_parl.main``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if DRY_RUN in args:
        from verl_parl.cli import dryrun

        raise SystemExit(dryrun.main([arg for arg in args if arg != DRY_RUN]))
    if "--help" in args or "-h" in args:  # Hydra's help follows: the config and its groups
        print(USAGE, flush=True)
    try:
        args = select_task(args)
    except ConfigError as exc:
        print(f"[verl-parl] {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    profile, args = choose_profile(args)
    from verl_parl.cli.cluster import with_ray_address

    address, args = with_ray_address(args, os.environ)  # $RAY_ADDRESS becomes the config's address
    prepare_environment(profile, address)
    exit_on_sigterm()

    from verl_parl.cli.assets import building, register_resolver

    register_resolver()
    sys.argv = [sys.argv[0], *verl_config_searchpath(args)]
    # Hydra merges YAML values over ${parl_asset:...} ones while composing, and OmegaConf dereferences
    # them to do so: build nothing then (a recipe overriding model.path would build the cold start).
    # launch.prepare resolves the config, and so builds the assets it still names, explicitly.
    with building(False):
        _hydra_app()


def _hydra_app() -> None:
    import hydra

    decorated = hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base=None)(run)
    decorated()


def run(cfg: Any) -> None:
    """The Hydra task: resolve, validate, train, report."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from verl_parl.cli import console, failures, launch

    run_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    with open_dict(cfg):
        cfg.parl.output_dir = str(run_dir)
    started = time.time()
    try:
        runtime = HydraConfig.get().runtime
        parl = launch.prepare(
            cfg, overrides=list(HydraConfig.get().overrides.task), embedded=runtime.choices.get("embedded")
        )
    except ConfigError as exc:
        print(f"[verl-parl] {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"[verl-parl] run folder: {run_dir} (full log: {run_dir / console.CONSOLE_LOG})", file=sys.stderr, flush=True)
    failure: failures.Failure | None = None
    where = ""
    resumed_from = launch.prepare_run_folder(cfg, run_dir)
    try:
        launch.train(cfg, parl, run_dir)
    except BaseException as exc:  # noqa: BLE001 - every way training stops is reported below, then exits non-zero
        failure = failures.describe(exc, run_dir)
        if failures.log_traceback(exc, run_dir / console.CONSOLE_LOG):
            where = f" (traceback in {run_dir / console.CONSOLE_LOG})"
    try:
        with failures.signals_held():  # the reports of the steps so far are written whole
            summary = launch.write_reports(
                cfg, run_dir, started=started, succeeded=failure is None, resumed_from=resumed_from
            )
        print(launch.format_summary(summary), flush=True)
    except OSError as exc:  # e.g. the disk is full: say so, after why training stopped (if it did)
        reports = failures.describe(exc, run_dir)
        print(f"[verl-parl] could not write the run's reports: {reports.message}", file=sys.stderr, flush=True)
        failure = failure or reports
    if failure is not None:
        print(f"[verl-parl] {failure.message}{where}", file=sys.stderr)
        raise SystemExit(failure.exit_code)


if __name__ == "__main__":
    main()
