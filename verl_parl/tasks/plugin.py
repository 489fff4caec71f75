"""Built-in plugin of the tasks: the ``arithmetic`` task with its calculator tool and ``number_match`` scorer,
and the ``longtail`` workload; ``widesearch`` names the released WideSearch rows (converted, not generated). The
research suite has its own: :mod:`verl_parl.tasks.research.plugin`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ScorerSpec, TaskSpec, ToolSpec
from verl_parl.tasks import arithmetic, longtail

DEMOS = "verl_parl.tasks.demos"


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(
        ToolSpec(
            name="calculator", factory=arithmetic.Calculator, description="arithmetic with + - * / and parentheses"
        )
    )


@hookimpl
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    register(
        ScorerSpec(
            name="number_match",
            factory=lambda: arithmetic.number_match,
            description="last number of the answer equals the gold number (with shaping credit)",
        )
    )


def _widesearch_rows(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """WideSearch's rows are the user's, converted from the released files: nothing to write here."""
    raise RuntimeError(
        "the widesearch task is not generated: convert the released tasks with `python -m verl_parl.tasks.widesearch "
        "convert` and train on them with data.train_files=... data.val_files=... (docs/tasks.md, WideSearch)"
    )


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="arithmetic",
            factory=arithmetic.write_data,
            description="arithmetic questions answered with the calculator tool (fast; what the tests use)",
            scorer="number_match",
            tools=("calculator",),
            agent_loops=tuple(arithmetic.SYSTEM_PROMPTS),
            demos={role: f"{DEMOS}:arithmetic_{role}" for role in ("agent", "subagent", "orchestrator")},
            data_sources=(arithmetic.DATA_SOURCE,),
            system_prompts=arithmetic.SYSTEM_PROMPTS,
        )
    )
    register(
        TaskSpec(
            name="widesearch",
            factory=_widesearch_rows,
            description="WideSearch's released tasks, converted (python -m verl_parl.tasks.widesearch convert)",
            scorer="widesearch",
            agent_loops=("researcher", "parl_swarm"),
            data_sources=("widesearch",),  # verl_parl.tasks.widesearch.DATA_SOURCE
            system_prompts="verl_parl.tasks.widesearch:SYSTEM_PROMPTS",
        )
    )
    register(
        TaskSpec(
            name="longtail",
            factory=longtail.write_data,
            description="latency-injected long-tail workload: a few episodes 10x longer (benchmarks, partial rollout)",
            scorer="number_match",
            agent_loops=(longtail.AGENT_NAME,),
            check_options=longtail.option_errors,
        )
    )
