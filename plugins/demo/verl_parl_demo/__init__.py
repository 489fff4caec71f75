"""verl-parl's embedded demo, a distribution of its own (``plugins/demo``) that joins verl-parl through the same
entry points as a third party's plugin: the tasks (``fanpages``, the default; ``fanout``, the research suite,
``widechain``, ``arithmetic``, ``longtail``), their YAML (``configs/embedded/``), the tiny model builder, the cold
starts and the shipped weights (``modelbuild/``). verl-parl's core imports none of it."""
