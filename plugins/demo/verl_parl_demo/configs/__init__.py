"""The demo tasks' Hydra configs: ``embedded/<task>.yaml`` (each task's settings) and ``demo/tiny.yaml`` (what every
demo task shares: the tiny model, its data and its small batches)."""

CONFIG_DIR = "pkg://verl_parl_demo.configs"
"""The Hydra search path of these configs, every demo task's ``TaskSpec.config_dir``."""
