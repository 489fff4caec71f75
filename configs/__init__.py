"""Hydra configs of verl-parl, shipped in the package as ``verl_parl.configs``."""
