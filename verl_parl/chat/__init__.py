"""The chat layer every agent loop shares: tool-call parsing (:mod:`.calls`), chat messages
(:mod:`.messages`), incremental chat-template prompts (:mod:`.prompts`) and the protocol of where a
turn is generated (:mod:`.backend`).

A leaf layer: it imports nothing from ``verl_parl`` (tested in ``tests/unit/test_import_graph.py``).
``verl_parl.context``, ``verl_parl.agents`` and ``verl_parl.swarm`` import from it, never the
other way round.
"""
