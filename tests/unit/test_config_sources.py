"""Where each config value came from (verl_parl/cli/sources.py): the attribution on hand-made layers, and the
``config_sources.yaml`` a run's folder gets where it is prepared (launch.prepare_run_folder, in a Hydra app)."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf, open_dict

from verl_parl.cli import dryrun, launch, sources
from verl_parl.cli.dryrun import PLACEHOLDER, placeholder_assets
from verl_parl.cli.main import CONFIG_MODULE, verl_config_searchpath


def test_leaves_are_dotted_keys_with_lists_and_empty_mappings_whole() -> None:
    nested = {"a": {"b": 1, "c": [1, {"x": 2}], "d": {}}, "e": None}
    assert sources.leaves(nested) == {"a.b": 1, "a.c": [1, {"x": 2}], "a.d": {}, "e": None}
    assert sources.leaves({"x": 1}, "pkg.sub") == {"pkg.sub.x": 1}


def test_a_key_has_the_last_layer_that_changed_it() -> None:
    layers = [
        ("verl", {"a": 1, "b": 1, "c": 1, "t": True}),
        ("base", {"a": 2, "b": 1, "c": 1, "t": True, "p": "${x}"}),
        ("task t", {"a": 2, "b": 3, "c": 1, "t": 1, "p": "${x}"}),  # a set again to the base's 2; t: True -> 1
        ("profile cpu", {"a": 2, "b": 3, "c": 1.0, "t": 1, "p": "${x}"}),  # c: 1 -> 1.0 is a change of type
        ("command line", {"a": 2, "b": 3, "c": 1.0, "t": 1, "p": "${y}", "new": 0}),
    ]
    assert sources.attribute(layers) == {
        "a": "base",
        "b": "task t",
        "c": "profile cpu",
        "t": "task t",
        "p": "command line",
        "new": "command line",
    }
    assert sources.attribute([]) == {}


def test_a_value_the_driver_changed_after_composing_is_marked() -> None:
    attributed = {"critic.enable": "verl", "gpus": "profile cpu", "dir": "base", "mtp": "verl"}
    composed = {"critic.enable": None, "gpus": None, "dir": "outputs/${now:%H}", "mtp": "${oc.select:x,null}"}
    final = {"critic.enable": False, "gpus": 1, "dir": "/abs/outputs/12", "mtp.enable": False, "added": 3}
    assert sources.mark_set_at_start(attributed, composed, final) == {
        "critic.enable": f"verl, {sources.AT_START}",
        "gpus": f"profile cpu, {sources.AT_START}",
        "dir": "base",  # an interpolation resolved is not a change
        "mtp.enable": "verl",  # a key of the mapping an interpolation resolved to: the interpolation's source
        "added": sources.AT_START,
    }


def test_the_task_file_is_the_last_one_setting_the_key_or_its_mapping() -> None:
    files = [
        ("demo/tiny.yaml", frozenset({"parl.critical_steps_budget", "data.train_batch_size", "parl.context.agent"})),
        ("embedded/fanpages.yaml", frozenset({"parl.critical_steps_budget", "parl.embedded.task"})),
    ]
    assert sources.file_of("parl.critical_steps_budget", files) == "embedded/fanpages.yaml"
    assert sources.file_of("data.train_batch_size", files) == "demo/tiny.yaml"
    assert sources.file_of("parl.context.agent.policy", files) == "demo/tiny.yaml"
    assert sources.file_of("parl.swarm.max_steps", files) is None


def test_the_layers_are_composed_from_the_runs_choices_with_its_search_path() -> None:
    overrides = ["hydra.searchpath=[x]", "hydra.mode=RUN", "embedded=fanpages", "a.b=1", "+recipe=r"]
    hydra = sources.hydra_overrides(overrides)
    assert hydra == ("hydra.searchpath=[x]", "hydra.mode=RUN")
    assert sources.layer_overrides(hydra, "fanpages", "cpu") == [
        ("base", (*hydra, "~profile")),
        ("task fanpages", (*hydra, "embedded=fanpages", "~profile")),
        ("profile cpu", (*hydra, "embedded=fanpages", "profile=cpu")),
    ]
    assert sources.layer_overrides(hydra, None, None) == [("base", (*hydra, "~profile"))]


def test_the_modules_examples_hold() -> None:
    for module in (sources, dryrun):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_the_record_lists_every_value_not_verls_with_its_source() -> None:
    values = {"a": 1, "parl.x": [1, 2], "t": "s"}
    text = sources.sources_yaml(values, {"a": "verl", "parl.x": "base", "t": "task t (embedded/t.yaml)"})
    assert text.startswith("# Where each value")
    assert yaml.safe_load(text) == {
        "parl.x": {"value": [1, 2], "source": "base"},
        "t": {"value": "s", "source": "task t (embedded/t.yaml)"},
    }


@pytest.fixture
def hydra_app() -> Iterator[None]:
    """The Hydra context of a run's app (verl-parl's config module), assets as dry-run placeholders."""
    from hydra.core.hydra_config import HydraConfig

    with placeholder_assets(), sources.hydra_context(config_module=CONFIG_MODULE):
        try:
            yield
        finally:
            HydraConfig.instance().cfg = None  # type: ignore[assignment]


def test_the_run_folder_records_each_values_source_where_it_is_prepared(
    hydra_app: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``main.run`` does in a run's Hydra app: the composed config (Hydra's record of the run's overrides set),
    resolved, changed by the driver (critic.enable), then ``prepare_run_folder``: config_sources.yaml names the
    task's file, the profile, the command line and the base for their keys, and leaves verl's defaults out."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setenv("VERL_PARL_CACHE", str(tmp_path / "cache"))
    overrides = verl_config_searchpath(["embedded=arithmetic", "profile=cpu", "trainer.total_training_steps=2"])
    cfg = compose(config_name=sources.CONFIG_NAME, overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    OmegaConf.resolve(cfg)
    launch.explicit_critic(cfg)
    run_dir = tmp_path / "run"

    assert launch.prepare_run_folder(cfg, run_dir) is None

    record = yaml.safe_load((run_dir / sources.SOURCES_FILE).read_text())
    assert record["parl.critical_steps_budget"] == {"value": 24, "source": "task arithmetic (demo/tiny.yaml)"}
    assert record["parl.embedded.task"] == {
        "value": "arithmetic",
        "source": "task arithmetic (embedded/arithmetic.yaml)",
    }
    assert record["actor_rollout_ref.rollout.name"] == {"value": "hf", "source": "profile cpu"}
    assert record["trainer.total_training_steps"] == {"value": 2, "source": "command line"}
    assert record["algorithm.adv_estimator"] == {"value": "grpo", "source": "base"}
    assert record["critic.enable"] == {"value": False, "source": f"verl, {sources.AT_START}"}
    assert record["data.train_files"]["value"] == PLACEHOLDER.format(name="embedded_train")
    assert "actor_rollout_ref.actor.optim.optimizer" not in record  # verl's default
    assert all(entry["source"] != sources.VERL for entry in record.values())
    assert not (tmp_path / "cache").exists()  # nothing was built to record it


def test_outside_a_hydra_app_nothing_is_recorded(tmp_path: Path) -> None:
    sources.record_run_sources(OmegaConf.create({"a": 1}), tmp_path / "run", launch.write_atomic)
    assert not (tmp_path / "run").exists()
