"""``widechain``: wide tables whose every row is a three-page chain, over long encyclopedia pages.

The task family where parallel work pays (``docs/tasks.md``, "The widechain family";
``/work/shared/design/PARALLEL_PAYS.md``): N cities per task, and for each the country it lies in, that
country's capital and the capital's population. Each row is a chain of k = 3 dependent searches (city page →
country page → capital's page), a search call takes one query and returns one whole page, and pages are long
enough that one context holds one of them at a time. Under the critical-steps budget a swarm (one subagent per
row, all at once: about k + 2 critical steps) fits, a serial orchestrator (about N·(k + 2)) and a single agent
(about N·k) do not.

Modules: :mod:`~verl_parl_demo.tasks.widechain.design` (N, k, B, the context length: one place),
:mod:`~verl_parl_demo.tasks.widechain.corpus` (the long pages), :mod:`~verl_parl_demo.tasks.widechain.dataset` (tasks,
splits, parquet, index, tool config), :mod:`~verl_parl_demo.tasks.widechain.oracle` (scripted single-agent, serial
and swarm plans run against the real search tool, measured with the swarm's accounting),
:mod:`~verl_parl_demo.tasks.widechain.plugin` (the registered task). ``python -m verl_parl_demo.tasks.widechain
measure`` prints the plans' table.
"""
