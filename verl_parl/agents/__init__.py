"""Single-agent loops (the ``researcher`` agent); the swarm's orchestrator lives in :mod:`verl_parl.swarm`."""
