"""verl-parl code sandbox plugin: a ``run_python`` tool running model-written code in isolation.

The local backend runs every call under bubblewrap (all namespaces, no network, read-only root, a
private tmpfs ``/work``) as an unprivileged uid, with rlimits, per-run cgroups where the tree is
writable, a wall-clock kill of the whole process tree, and capped output; a stateful Python kernel
per trajectory keeps variables between calls. The ``sandbox_fusion`` backend sends the code to a
SandboxFusion server instead. From a shell::

    python -m verl_parl_sandbox selftest             # prove the isolation holds on this machine
    python -m verl_parl_sandbox run --timeout 5 prog.py

The tool is registered through the ``verl_parl`` entry point (:mod:`verl_parl_sandbox.plugin`).
"""

from __future__ import annotations

__version__ = "0.1.0"
