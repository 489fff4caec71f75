#!/usr/bin/env python
"""Resolve the GPU install sets with pip's resolver, for a GPU machine, without installing or downloading them.

    python scripts/resolve_gpu_sets.py                        # every gpu-* extra of pyproject.toml, one by one
    python scripts/resolve_gpu_sets.py gpu-vllm               # one set
    python scripts/resolve_gpu_sets.py base --with vllm==0.33.0   # the project without an extra, plus a pin

Each set is what ``bash scripts/install.sh`` installs on a machine with an NVIDIA GPU: this project with that
extra (``base``: without one) and the tool plugins under ``plugins/``, plus any ``--with`` requirements. pip
resolves it as a dry run with a report (``pip install --dry-run --report``) for ``--glibc`` (2.35: Ubuntu 22.04)
manylinux x86_64 and CPython ``--python`` (3.11), binary wheels only, ignoring what this environment has
installed. A set that does not resolve fails with pip's own account of the conflict. ``gpu-sglang`` resolves as
install.sh installs it: ``sglang==<GPU_SGLANG_VERSION>`` goes in without dependencies, and its own dependencies
less ``GPU_SGLANG_KEEP`` (transformers: sglang 0.5.12 pins 5.6.0, which verl 0.9.1 refuses) resolve with the
rest of the set (both values are read from install.sh).

pip gets a wheel's dependencies from the package index's metadata files when the index serves them, else by
downloading the wheel. The index this runs against serves none, so pip would download every wheel of a set
(torch, vLLM and CUDA libraries: 3.4 GB for gpu-vllm with this environment's pip 23.2.1). ``--use-feature=fast-deps``
makes pip read each wheel's metadata through HTTP range requests instead; pip 23.2.1 still downloads the wheels
once the resolve is done, pip 26.3 does not. So the resolve runs in a venv of its own with pip 26.3
(``--venv``, created once) and nothing in this environment changes.

Packages published only as source (``antlr4-python3-runtime==4.9.*``, hydra-core's) cannot pass ``--only-binary``,
which pip requires for a foreign platform; they are built into pure-Python wheels first, as an install would.

The per-set results are printed on stdout (one JSON object per set with ``--json``), pip's output on stderr.
Exit status 0 when every set resolves, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PLUGINS = ("plugins/search", "plugins/browser", "plugins/sandbox")
PIP = "pip==26.3"
SOURCE_ONLY = ("antlr4-python3-runtime==4.9.3",)  # hydra-core 1.3 pins antlr4-python3-runtime==4.9.*
SHOWN = ("torch", "vllm", "sglang", "transformers", "verl", "torchvision", "torchaudio", "flashinfer-python")


def install_sh_value(name: str, script: Path = REPO / "scripts" / "install.sh") -> str:
    """The value of ``NAME="..."`` in install.sh."""
    found = re.search(rf'^{name}="([^"]*)"', script.read_text(), flags=re.MULTILINE)
    if found is None:
        raise SystemExit(f'scripts/install.sh: no {name}="..." line')
    return found.group(1)


def after_sets() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Sets that install.sh completes after their extra: set -> (requirement, names kept at the first pass's version
    or left out)."""
    keep = tuple(install_sh_value("GPU_SGLANG_KEEP").split())
    return {"gpu-sglang": (f"sglang=={install_sh_value('GPU_SGLANG_VERSION')}", keep)}


@dataclass
class Resolution:
    """One set's outcome: ``ok``, the chosen versions of :data:`SHOWN` (``versions``), how many packages it would
    install, pip's conflict lines when it did not resolve, and the seconds it took."""

    name: str
    requirements: list[str]
    ok: bool = False
    seconds: float = 0.0
    packages: int = 0
    versions: dict[str, str] = field(default_factory=dict)
    conflict: list[str] = field(default_factory=list)
    overridden: dict[str, str] = field(default_factory=dict)  # after-part -> its requirements left out


def gpu_extras(pyproject: Path = REPO / "pyproject.toml") -> dict[str, list[str]]:
    """The ``gpu-*`` extras of pyproject.toml, by name."""
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    return {name: list(reqs) for name, reqs in extras.items() if name.startswith("gpu-")}


def set_requirements(name: str, extra: list[str], repo: Path = REPO) -> list[str]:
    """What ``install.sh`` installs for set ``name`` (``base``: the project without an extra), as pip arguments."""
    project = str(repo) if name == "base" else f"{repo}[{name}]"
    return [project, *(str(repo / plugin) for plugin in PLUGINS), *extra]


def platforms(glibc: str) -> list[str]:
    """The wheel platform tags a manylinux x86_64 machine with this glibc accepts, newest first (pip's --platform
    takes each tag literally)."""
    major, minor = (int(part) for part in glibc.split("."))
    tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014_x86_64", 12: "manylinux2010_x86_64", 5: "manylinux1_x86_64"}
    return [*tags, *(tag for m, tag in legacy.items() if m <= minor), "linux_x86_64"]


def resolver_python(venv: Path) -> Path:
    """The venv's interpreter, with :data:`PIP` in it (created on first use)."""
    python = venv / "bin" / "python"
    marker = venv / ".pip-version"
    if not python.exists() or not marker.exists() or marker.read_text() != PIP:
        log(f"creating the resolver venv {venv} with {PIP}")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PIP], check=True, stdout=sys.stderr)
        marker.write_text(PIP)
    return python


def source_wheels(python: Path, folder: Path) -> Path:
    """Pure-Python wheels of :data:`SOURCE_ONLY` in ``folder`` (built once)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.glob("*.whl")):
        command = [str(python), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder), *SOURCE_ONLY]
        subprocess.run(command, check=True, stdout=sys.stderr)
    return folder


def pip_resolve(
    requirements: list[str], python: Path, wheels: Path, glibc: str, version: str
) -> tuple[dict[str, str] | None, list[str], float]:
    """pip's dry-run resolve of ``requirements`` for the target machine: (every chosen ``name -> version``, or None
    when it did not resolve; pip's conflict lines; seconds)."""
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-") as tmp:
        report = Path(tmp) / "report.json"
        command = [
            str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir",
            "--use-feature=fast-deps", "--report", str(report), "--target", str(Path(tmp) / "target"),
            "--only-binary=:all:", "--python-version", version, "--find-links", str(wheels),
            *(arg for tag in platforms(glibc) for arg in ("--platform", tag)),
            *requirements,
        ]  # fmt: skip
        began = time.monotonic()
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = round(time.monotonic() - began, 1)
        sys.stderr.write(run.stdout[-20000:] + run.stderr[-20000:])
        if run.returncode != 0 or not report.exists():
            return None, conflict_lines(run.stdout + run.stderr), seconds
        installs = json.loads(report.read_text())["install"]
        return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}, [], seconds


def dependencies_without(
    requirement: str, keep: tuple[str, ...], python: Path, glibc: str, version: str
) -> tuple[list[str], list[str]]:
    """``requirement``'s own dependencies (its wheel's metadata, no extras), less those named in ``keep``: (kept,
    left out)."""
    from packaging.requirements import Requirement

    with tempfile.TemporaryDirectory(prefix="resolve-gpu-") as tmp:
        report = Path(tmp) / "report.json"
        command = [
            str(python), "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--no-cache-dir",
            "--use-feature=fast-deps", "--quiet", "--report", str(report), "--target", str(Path(tmp) / "target"),
            "--only-binary=:all:", "--python-version", version,
            *(arg for tag in platforms(glibc) for arg in ("--platform", tag)),
            requirement,
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=sys.stderr)
        (item,) = json.loads(report.read_text())["install"]
    kept, left = [], []
    for line in item["metadata"].get("requires_dist", []):
        parsed = Requirement(line)
        if parsed.marker is not None and "extra" in str(parsed.marker):
            continue
        (left if parsed.name.lower() in keep else kept).append(line)
    return kept, left


def resolve(
    name: str, requirements: list[str], python: Path, wheels: Path, *, glibc: str = "2.35", version: str = "3.11"
) -> Resolution:
    """Set ``name`` resolved as install.sh installs it: a set with an after-part (:func:`after_sets`) resolves with
    that part's own dependencies less the kept names as requirements of their own (the part itself goes in
    without dependencies)."""
    result = Resolution(name, requirements)
    after = after_sets().get(name)
    if after is not None:
        requirement, keep = after
        kept, left = dependencies_without(requirement, keep, python, glibc, version)
        result.requirements = [*requirements, f"{requirement} without dependencies", *kept]
        result.overridden = {requirement: "; ".join(left)}
        requirements = [*requirements, *kept]
    chosen, result.conflict, result.seconds = pip_resolve(requirements, python, wheels, glibc, version)
    if chosen is not None:
        if after is not None:
            chosen[after[0].split("==")[0]] = after[0].split("==")[1]
        result.ok, result.packages = True, len(chosen)
        result.versions = {key: chosen[key] for key in SHOWN if key in chosen}
    return result


def conflict_lines(output: str) -> list[str]:
    """pip's account of why it could not resolve: its ERROR lines and "The conflict is caused by" block."""
    lines = [line for line in output.splitlines() if "Location" not in line]
    keep: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("The conflict is caused by"):
            inside = True
        elif inside and not line.strip():
            inside = False
        if inside or line.startswith("ERROR:"):
            keep.append(line.rstrip())
    return keep


def log(message: str) -> None:
    print(f"[resolve-gpu-sets] {message}", file=sys.stderr, flush=True)


def describe(result: Resolution) -> str:
    if result.ok:
        shown = ", ".join(f"{k}=={v}" for k, v in result.versions.items())
        over = "".join(f"; {k} without its {v}" for k, v in result.overridden.items())
        return f"{result.name}: resolves ({result.packages} packages, {result.seconds} s): {shown}{over}"
    return f"{result.name}: DOES NOT RESOLVE ({result.seconds} s)\n  " + "\n  ".join(result.conflict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", help="gpu-* extras of pyproject.toml, or base (default: every gpu-* one)")
    parser.add_argument("--with", dest="extra", action="append", default=[], help="another requirement (repeatable)")
    parser.add_argument("--glibc", default="2.35", help="the target machine's glibc (default 2.35: Ubuntu 22.04)")
    parser.add_argument("--python", default="3.11", help="the target machine's CPython (default 3.11)")
    default_venv = Path(os.environ.get("VERL_PARL_CACHE") or Path.home() / ".cache" / "verl_parl") / "resolver"
    parser.add_argument("--venv", type=Path, default=default_venv, help=f"the resolver's venv (default {default_venv})")
    parser.add_argument("--json", action="store_true", help="one JSON object per set on stdout")
    args = parser.parse_args(argv)
    extras = gpu_extras()
    names = args.sets or sorted(extras)
    if unknown := [name for name in names if name != "base" and name not in extras]:
        parser.error(f"unknown set(s) {unknown}: the gpu-* extras of pyproject.toml are {sorted(extras)}, or base")
    python = resolver_python(args.venv)
    wheels = source_wheels(python, args.venv / "source-wheels")
    results = []
    for name in names:
        log(f"resolving {name}{' with ' + ', '.join(args.extra) if args.extra else ''}")
        requirements = set_requirements(name, args.extra)
        result = resolve(name, requirements, python, wheels, glibc=args.glibc, version=args.python)
        results.append(result)
        print(json.dumps(result.__dict__) if args.json else describe(result), flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
