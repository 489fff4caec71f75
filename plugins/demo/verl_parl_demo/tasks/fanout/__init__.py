"""``fanout``: N independent words, each followed by k = 3 dependent hops to a number, under a budget B that
only a swarm fits. The synthetic task with a known optimal plan (issue 42's learning test; ``docs/tasks.md``,
"The fanout task").

Modules: :mod:`~verl_parl_demo.tasks.fanout.design` (N, k, B: one place), :mod:`~verl_parl_demo.tasks.fanout.world`
(the seeded hop graph, tasks, rows, the ``hop`` tool), :mod:`~verl_parl_demo.tasks.fanout.demos` (cold-start
demonstrations), :mod:`~verl_parl_demo.tasks.fanout.plugin` (the registered task and tool).
"""
