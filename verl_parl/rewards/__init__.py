"""Reward functions and task scorers."""
