"""``parl.subagent.resources`` and ``label_selector``: which nodes the dedicated group's hf servers run on."""

from __future__ import annotations

import pytest

from verl_parl.settings.errors import ConfigError
from verl_parl.swarm.settings import SubagentServing, parse_swarm


def test_no_placement_by_default() -> None:
    serving = SubagentServing()
    assert (serving.resources, serving.label_selector) == (None, None)
    assert serving.placement() == {}


def test_a_resource_and_a_label_become_the_servers_ray_options() -> None:
    serving = parse_swarm({}, {"resources": {"frozen": 1}, "label_selector": {"role": "frozen"}}, "/m", "hf").subagent
    assert serving.placement() == {"resources": {"frozen": 1.0}, "label_selector": {"role": "frozen"}}


@pytest.mark.parametrize(
    ("subagent", "message"),
    [
        ({"resources": {"GPU": 1}}, "parl.subagent.resources.GPU: a Ray built-in resource"),
        ({"resources": {"frozen": 0}}, "parl.subagent.resources.frozen: must be a positive number, got 0"),
        ({"resources": {"frozen": "one"}}, "parl.subagent.resources.frozen: must be a positive number"),
        ({"resources": [1]}, "parl.subagent.resources: must be a mapping"),
        ({"label_selector": {"role": [1]}}, "parl.subagent.label_selector.role: must be a label value"),
        (
            {"resources": {"frozen": 1}, "mode": "external", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
            "parl.subagent.resources: place the dedicated group's hf servers; with mode=external",
        ),
        ({"label_selector": {"role": "frozen"}, "engine": "vllm"}, "vllm/sglang replicas take free GPUs"),
    ],
)
def test_bad_placement_is_named(subagent: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_swarm({}, subagent, "/m", "hf")
    assert any(message in error for error in caught.value.errors), caught.value.errors
