"""Trainer integration: verl-parl's hooks on verl's v1 trainer modes, resume, off-policy bookkeeping, the
rollout guard, turn-level partial rollouts, and the reward manager, reward function and advantage
estimator registered in verl's registries. Loaded in every verl process through :mod:`verl_parl.trainer.verl_plugin`.
"""
