"""Context management: policies (:mod:`.policies`), their settings (:mod:`.settings`) and the
summariser (:mod:`.summarizer`). The agent loops that apply them, keeping training on rewritten
histories exact in trainable segments, extend :class:`verl_parl.agents.base.SegmentedAgentLoop`.
"""
