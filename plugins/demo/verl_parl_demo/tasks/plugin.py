"""The demo's plugin of the small tasks: the ``arithmetic`` task with its calculator tool and ``number_match``
scorer, and the ``longtail`` workload (its agent loop joins verl's registry only in runs that select it, through
``actor_rollout_ref.rollout.agent.agent_loop_config_path``). The research suite has its own plugin:
:mod:`verl_parl_demo.tasks.research.plugin`."""

from __future__ import annotations

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ScorerSpec, TaskSpec, ToolSpec
from verl_parl_demo.configs import CONFIG_DIR
from verl_parl_demo.tasks import arithmetic, longtail


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


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="arithmetic",
            config_dir=CONFIG_DIR,
            factory=arithmetic.write_data,
            description="arithmetic questions answered with the calculator tool (fast; what the tests use)",
            scorer="number_match",
            tools=("calculator",),
            agent_loops=tuple(arithmetic.SYSTEM_PROMPTS),
            data_sources=(arithmetic.DATA_SOURCE,),
            system_prompts=arithmetic.SYSTEM_PROMPTS,
        )
    )
    register(
        TaskSpec(
            name="longtail",
            config_dir=CONFIG_DIR,
            factory=longtail.write_data,
            description="latency-injected long-tail workload: a few episodes 10x longer (benchmarks, partial rollout)",
            scorer="number_match",
            agent_loops=(longtail.AGENT_NAME,),
            check_options=longtail.option_errors,
        )
    )
