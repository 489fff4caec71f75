"""Turn-level partial rollout (``parl.partial_rollout``): episodes past the step's budget pause at a turn
boundary and resume next step under the updated policy.

:mod:`.settings` (the config), :mod:`.staleness` (budget, stale-turn rule, release plan: pure functions),
:mod:`.board` (the paused episodes' bookkeeping), :mod:`.episode` (the agent-loop side: budget and pause),
:mod:`.sampler` and :mod:`.trainer` (the trainer side over verl's replay buffer and ``prepare_step``),
:mod:`.ledger` (every prompt group's fate). See ``docs/trainer.md``, "Turn-level partial rollout".
"""
