"""``fanpages``: N independent words, each followed through k = 3 dependent lookups to a number, where every lookup
returns a long index page of which one line is the word's. The pages of N words do not fit one
context, one word's pages fit a subagent's, so only a swarm answers every word under the budget B (docs/tasks.md,
"The fanpages task").

Modules: :mod:`~verl_parl_demo.tasks.fanpages.design` (N, k, the page size; B and the context length are the task's
YAML's), :mod:`~verl_parl_demo.tasks.fanpages.world` (the seeded graph split by split, its pages, tasks, rows and the
``lookup`` tool), :mod:`~verl_parl_demo.tasks.fanpages.oracle` (every plan measured against the real tool),
:mod:`~verl_parl_demo.tasks.fanpages.demos` (cold-start demonstrations), :mod:`~verl_parl_demo.tasks.fanpages.plugin`.
"""
