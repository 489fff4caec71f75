"""Write what a plain verl run of ``parl_swarm`` needs and print it as shell assignments (stdout).

    eval "$(python examples/plain_verl/prepare.py --out DIR)"

sets ``TRAIN``, ``VAL`` (verl parquet: arithmetic questions whose rows name ``agent_name: parl_swarm``),
``TOOLS`` (verl's tool config exposing the registered ``calculator``), ``MODEL`` (the tiny Qwen2 model
after its arithmetic cold start, cached in ``$VERL_PARL_CACHE`` or ``~/.cache/verl_parl``) and
``REWARD_FN`` (verl-parl's ``compute_score`` file). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path


def prepare(out: Path, *, n_train: int, n_val: int, model: str) -> dict[str, str]:
    """The files of the run, by shell variable name."""
    from verl_parl.cli.config import resolved_cache_dir
    from verl_parl.host.manager import get_registries
    from verl_parl.trainer import reward_fn as verl_reward

    settings = {"task": "arithmetic", "agent_loop": "parl_swarm", "n_train": n_train, "n_val": n_val, "seed": 0}
    data = get_registries().tasks.get("arithmetic").factory(out / "data", {**settings, "options": {}})
    models = resolved_cache_dir(None) / "models"
    if model == "tiny":
        from verl_parl_demo.modelbuild.tiny import build_tiny_model

        model_path = build_tiny_model(cache_dir=models)
    else:
        from verl_parl_demo.modelbuild.coldstart import build_coldstart_model, default_spec

        model_path = build_coldstart_model(default_spec("arithmetic"), cache_dir=models)
    return {
        "TRAIN": str(data["train"]),
        "VAL": str(data["val"]),
        "TOOLS": str(data["tools"]),
        "MODEL": str(model_path),
        "REWARD_FN": str(Path(verl_reward.__file__).resolve()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the dataset and tool config")
    parser.add_argument("--n-train", type=int, default=16, help="training questions")
    parser.add_argument("--n-val", type=int, default=4, help="validation questions")
    parser.add_argument("--model", choices=("coldstart", "tiny"), default="coldstart", help="cold start or untrained")
    args = parser.parse_args()
    paths = prepare(args.out.resolve(), n_train=args.n_train, n_val=args.n_val, model=args.model)
    print("\n".join(f"{name}={shlex.quote(value)}" for name, value in paths.items()))


if __name__ == "__main__":
    main()
