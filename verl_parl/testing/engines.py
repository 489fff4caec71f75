"""Which optional inference engines a test can use here."""

from __future__ import annotations

import os

REQUIRE_VLLM_ENV = "VERL_PARL_REQUIRE_VLLM"
"""Set to 1 (``.ci/run`` does), a vLLM that does not import fails the tests that need it instead of skipping them:
CI installs vLLM, so a broken install must not pass as a skip."""


class EngineMissingError(RuntimeError):
    """A required engine does not import."""


def vllm_missing() -> str | None:
    """Why vLLM cannot be used here (``import vllm`` fails), with how to install it; None when it imports.

    Raises:
        EngineMissingError: it does not import and ``VERL_PARL_REQUIRE_VLLM=1`` says it must.
    """
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # a broken build raises more than ImportError (torchvision's operators)
        reason = f"import vllm failed ({type(exc).__name__}: {exc}); bash scripts/install.sh vllm installs it"
        if os.environ.get(REQUIRE_VLLM_ENV) == "1":
            raise EngineMissingError(f"{REQUIRE_VLLM_ENV}=1, but {reason}") from exc
        return reason
    return None
