"""Property-based fuzzing (hypothesis): never an escaped exception on arbitrary input.

Every property runs a bounded number of examples with no deadline (speed is not what is tested);
``HYPOTHESIS_PROFILE=long`` runs ten times as many locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
