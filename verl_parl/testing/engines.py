"""Which optional inference engines a test can use here."""

from __future__ import annotations


def vllm_missing() -> str | None:
    """Why vLLM cannot be used here (``import vllm`` fails), with how to install it; None when it imports."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken build raises more than ImportError (torchvision's operators)
        return f"import vllm failed ({type(exc).__name__}: {exc}); bash scripts/install.sh vllm installs it"
    return None
