"""The console of a training run: one line per step on stderr, everything else in the run folder.

While verl trains, the process's stdout and stderr (file descriptors 1 and 2, so also what Ray forwards
from its workers and what child processes write) go to ``<run folder>/console.log`` (:func:`captured`);
the real terminal receives only verl-parl's own lines. :class:`StepLines` follows verl's file logger
(``verl_metrics.jsonl``, written by the trainer's ``file`` tracking backend) and prints, for each record,
the line :func:`format_step` makes of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

CONSOLE_LOG = "console.log"
PREFIX = "[verl-parl]"
# Terms of the staged reward (verl_parl.trainer.reward_hooks), in the order they are shown: label -> metric.
REWARD_TERMS = (
    ("perf", "parl/reward/r_perf"),
    ("parallel", "parl/reward/r_parallel"),
    ("finish", "parl/reward/r_finish"),
)


def _number(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def format_step(record: dict[str, Any], total_steps: int | None = None) -> str | None:
    """One console line for one metrics record (a verl step's metric dict plus ``step``).

    Shows, when present: step/total, the reward mean (``parl/reward/total``, else verl's ``critic/score/mean``)
    and its terms (``parl/reward/r_perf``, ``r_parallel``, ``r_finish``), critical steps, parallelism and the
    share of looped episodes (``parl/*/mean``), seconds per step (``timing_s/step``) and, when the step
    validated, held-out item-F1, score, the subagents' results item-F1 and critical steps (``val-parl/*/mean``).
    A record that is not a training step (verl's validation before training) is labelled ``validation``; None when
    it has none of these fields."""
    fields: list[str] = []
    reward = _number(record, "parl/reward/total")
    reward = _number(record, "critic/score/mean") if reward is None else reward
    if reward is not None:
        terms = [f"{label} {v:.3f}" for label, key in REWARD_TERMS if (v := _number(record, key)) is not None]
        fields.append(f"reward {reward:.3f}" + (f" ({', '.join(terms)})" if terms else ""))
    for label, key, spec in (
        ("critical steps", "parl/critical_steps/mean", ".2f"),
        ("parallelism", "parl/parallelism/mean", ".2f"),
        ("looped", "parl/looped/mean", ".2f"),
    ):
        if (value := _number(record, key)) is not None:
            fields.append(f"{label} {value:{spec}}")
    if (seconds := _number(record, "timing_s/step")) is not None:
        fields.append(f"{seconds:.1f} s/step")
    heldout = [
        f"{label} {value:{spec}}"
        for label, key, spec in (
            ("item-F1", "val-parl/item_f1/mean", ".3f"),
            ("score", "val-parl/score/mean", ".3f"),
            ("results item-F1", "val-parl/results_item_f1/mean", ".3f"),
            ("critical steps", "val-parl/critical_steps/mean", ".2f"),
        )
        if (value := _number(record, key)) is not None
    ]
    if heldout:
        fields.append("held-out " + ", ".join(heldout))
    training = "training/global_step" in record
    if not fields and not training:
        return None
    step = f"step {record.get('step', '?')}" + (f"/{total_steps}" if total_steps else "")
    label = step if training else f"{step} validation"
    return "  ".join([f"{PREFIX} {label}", *fields])


class StepLines:
    """A thread that follows verl's file-logger output (``{"step", "data"}`` per line, appended as the
    trainer logs) and writes :func:`format_step` of each new line to ``out``; :meth:`stop` reads what is left.
    ``on_lines``, when given, is called (in that thread) after each poll that found new complete lines."""

    def __init__(
        self,
        path: Path,
        out: IO[str],
        *,
        total_steps: int | None,
        interval_s: float = 0.5,
        on_lines: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.out = out
        self.total_steps = total_steps
        self.interval_s = interval_s
        self.on_lines = on_lines
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verl-parl-step-lines", daemon=True)

    def start(self) -> StepLines:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Print the complete lines added since the last poll (a partly written line waits)."""
        try:
            with open(self.path, "rb") as src:
                src.seek(self._offset)
                data = src.read()
        except OSError:  # not created yet (or unreadable): nothing to show, never an error of the run
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                entry = json.loads(raw)
                line = format_step({**entry.get("data", {}), "step": entry["step"]}, self.total_steps)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not a file-logger record: nothing to show
            if line is not None:
                print(line, file=self.out, flush=True)
        if end and self.on_lines is not None:
            self.on_lines()


@contextlib.contextmanager
def captured(log_path: Path) -> Iterator[IO[str]]:
    """Send this process's stdout and stderr (fds 1 and 2) to ``log_path`` and yield a stream to the real
    stderr; restore both on exit. On an exception (not Ctrl-C or SIGTERM), the log's last lines are shown on
    the real stderr."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    console = os.fdopen(os.dup(saved[1]), "w", buffering=1)
    failed = False
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield console
    except BaseException as exc:
        failed = not stopped_by_signal(exc)  # Ctrl-C, SIGTERM: the log's tail would only be noise
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        if failed:
            print(f"{PREFIX} training stopped; the end of {log_path}:", file=console)
            print(log_tail(log_path), file=console)
        console.close()


def stopped_by_signal(exc: BaseException) -> bool:
    """Ctrl-C (``KeyboardInterrupt``) or SIGTERM (``SystemExit(143)``, raised by ``verl_parl.cli.main``'s handler)."""
    return isinstance(exc, KeyboardInterrupt) or (isinstance(exc, SystemExit) and exc.code == 128 + signal.SIGTERM)


def log_tail(path: Path, lines: int = 20, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a log (read from its last ``max_bytes``)."""
    try:
        with open(path, "rb") as src:
            src.seek(max(0, src.seek(0, os.SEEK_END) - max_bytes))
            text = src.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
