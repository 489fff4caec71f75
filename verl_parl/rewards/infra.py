"""Infra failures: an episode that failed because a server, judge or tool backend failed.

A scorer or judge raises :class:`InfraFailureError` instead of returning 0; the ``parl`` reward manager
then marks the sample ``parl_infra_failed`` and ``reinforce_nsc`` leaves it out of its group's
statistics (advantage 0) and counts it in ``parl/nsc/num_infra_failed``.
"""

from __future__ import annotations


class InfraFailureError(RuntimeError):
    """Scoring failed for a reason that is not the model's fault; the message says what failed."""
