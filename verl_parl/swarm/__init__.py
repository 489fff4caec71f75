"""The parallel-agent rollout worker: orchestrator loop, subagent loop, critical-steps accounting."""
