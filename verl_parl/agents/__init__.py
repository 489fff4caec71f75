"""Agent loops: the base loop every agent extends (:mod:`.base`, trainable segments) and the
single-agent ``researcher`` loop; the swarm's orchestrator lives in :mod:`verl_parl.swarm`.
"""
