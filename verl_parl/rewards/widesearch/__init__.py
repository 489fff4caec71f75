"""The ``widesearch`` scorer: WideSearch's official evaluation rules (github.com/ByteDance-Seed/WideSearch,
``src/evaluation/evaluation.py`` and ``metric_utils.py``), reimplemented without its plain bugs.

Modules: :mod:`~verl_parl.rewards.widesearch.spec` (the task's evaluation block),
:mod:`~verl_parl.rewards.widesearch.extract` (the answer's table), :mod:`~verl_parl.rewards.widesearch.rules`
(pre-processing steps and cell metrics), :mod:`~verl_parl.rewards.widesearch.evaluate` (alignment, join, scores),
:mod:`~verl_parl.rewards.widesearch.scorer` (the registered scorer) and :mod:`~verl_parl.rewards.widesearch.summary`
(the official summary over instances and trials). ``docs/rewards.md`` ("WideSearch parity") sets every official
rule beside ours.
"""
