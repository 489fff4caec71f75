"""Episode traces of the agent loops, and what reads them.

Writing (in rollout workers): :mod:`~verl_parl.traces.settings` (``parl.traces``) and
:mod:`~verl_parl.traces.write` (sampling, the size cap, one JSON line per episode in
``<run folder>/traces/swarm.jsonl``). Reading: :mod:`~verl_parl.traces.read` (malformed lines skipped
and counted), :mod:`~verl_parl.traces.timeline` (lanes, spans and the critical path of one episode),
:mod:`~verl_parl.traces.chrome` (Chrome Trace Event JSON for Perfetto) and
:mod:`~verl_parl.traces.view` (one self-contained HTML file). The command line::

    python -m verl_parl.traces view RUN_DIR [--step N] [--out FILE]
    python -m verl_parl.traces export --format chrome RUN_DIR -o trace.json
"""
