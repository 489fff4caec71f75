"""The demo's shipped cold starts are their recipes' checkpoints: a recipe or demonstration change without a rebuild
fails here, not in a run. Each check renders the recipe's demonstrations to take their digest (fanpages': about 40 s
on 2 cores), so these are component tests; the cold-start builder's logic is unit-tested in
``tests/unit/test_coldstart.py``."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("task", "minutes"),
    [("fanpages", "9-17 (1,500 SFT steps)"), ("fanout", "20-27 (1,200 SFT steps)")],
    ids=["fanpages", "fanout"],
)
def test_the_package_ships_the_fanout_tasks_cold_starts(task: str, minutes: str) -> None:
    """The default run (fanpages) and fanout's learning test copy their cold starts, built with the share the task's
    config names; a recipe or demonstration change without a rebuild fails here, not in a run."""
    from verl_parl_demo.modelbuild import shipped
    from verl_parl_demo.modelbuild.__main__ import embedded_parallel_share
    from verl_parl_demo.modelbuild.coldstart import default_spec, shipped_name

    spec = default_spec(task, parallel_share=embedded_parallel_share(task))
    assert shipped.matches(shipped.SHIPPED_ROOT / shipped_name(task), spec.digest(spec.demos())), (
        f"verl_parl_demo/modelbuild/weights/coldstart-{task} does not hold its recipe's checkpoint ({minutes} minutes "
        f"on 2 cores to rebuild): `python -m verl_parl_demo.modelbuild coldstart --task {task} --rebuild --ship`"
    )


def test_the_package_ships_the_thinking_cold_start_of_its_recipe() -> None:
    """The thinking end-to-end run copies it instead of training it (~90 s of SFT on 2 cores at the session's start)."""
    from verl_parl_demo.modelbuild import shipped, thinking

    _, _, digest = thinking.thinking_recipe()
    assert shipped.matches(shipped.SHIPPED_ROOT / thinking.SHIPPED_NAME, digest), (
        "verl_parl_demo/modelbuild/weights/coldstart-thinking does not hold its recipe's checkpoint: "
        "`python -m verl_parl_demo.modelbuild.thinking --ship`"
    )
