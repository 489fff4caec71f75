"""The held-out panels of the run folder's plots."""

from __future__ import annotations

from pathlib import Path

from verl_parl.cli.plots import PANELS, plot_run


def test_heldout_item_f1_steps_and_parallelism_get_their_panels(tmp_path: Path) -> None:
    records = [
        {
            "step": s,
            "val-parl/item_f1/mean": 0.1 * s,
            "val-parl/critical_steps/mean": 8 - s,
            "val-parl/parallelism/mean": 1 + 0.5 * s,
            "parl/lambda_parallel": 0.1 / (s + 1),
            "parl/reward/r_perf": 0.2 * s,
            "parl/reward/step": float(s),  # the step itself is no reward term
        }
        for s in range(3)
    ]
    written = plot_run(records, tmp_path)
    assert [p.name for p in written] == ["heldout.png", "heldout_steps.png", "reward.png", "lambda.png", "overview.png"]
    panels = {p.slug: p for p in PANELS}
    names = sorted(records[0])
    assert panels["heldout"].select(names) == ["val-parl/item_f1/mean"]
    assert panels["heldout_steps"].select(names) == ["val-parl/critical_steps/mean", "val-parl/parallelism/mean"]
    assert panels["lambda"].select(names) == ["parl/lambda_parallel"]
    assert panels["reward"].select(names) == ["parl/reward/r_perf"]
