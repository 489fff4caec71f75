#!/usr/bin/env bash
# Install verl-parl and what it needs into the active Python environment.
#   bash scripts/install.sh        # the package (enough for `python -m verl_parl.main`)
#   bash scripts/install.sh test   # plus the test tools
# On a machine without an NVIDIA GPU, torch is installed first as the CPU build, so that nothing
# below can pull a multi-GB CUDA build. Set VERL_PARL_TORCH_INDEX to a CPU wheel index if your
# default index only serves CUDA builds of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
TORCH_VERSION="${VERL_PARL_TORCH_VERSION:-2.13.0}"

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  if has_gpu; then
    echo "[install] NVIDIA GPU found: installing torch ${TORCH_VERSION} (CUDA build)"
    "$PYTHON" -m pip install "torch==${TORCH_VERSION}"
  else
    echo "[install] no GPU: installing the CPU build of torch ${TORCH_VERSION}"
    "$PYTHON" -m pip install "torch==${TORCH_VERSION}" ${VERL_PARL_TORCH_INDEX:+--index-url "$VERL_PARL_TORCH_INDEX"}
  fi
fi

extras=""
if [ "${1:-}" = "test" ]; then extras="[test]"; fi
echo "[install] verl-parl${extras} (editable) and its dependencies"
"$PYTHON" -m pip install -e ".${extras}"

# Tool plugins: separate distributions under plugins/, found through the `verl_parl` entry-point group
# exactly like a third party's plugin.
for plugin in plugins/search plugins/browser; do  # browser: work in progress, registers no tool yet
  echo "[install] tool plugin ${plugin} (editable)"
  "$PYTHON" -m pip install -e "${plugin}"
done

if ! has_gpu && "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)"; then
  echo "[install] warning: a CUDA build of torch is installed on a machine without a GPU (it still runs on CPU)" >&2
fi
echo "[install] done"
