"""The distribution's Hydra configs: ``embedded/word_sum.yaml``, found through ``pkg://verl_parl_example.configs``
(the task's ``TaskSpec.config_dir``; a package, so that Hydra can find it by name)."""
