#!/usr/bin/env bash
# GPU readiness: both real models on DISCOTEX with each engine, on a CUDA GPU when there is one.
#
#   bench/gpu.sh                 # CUDA machine: build llama-cpp-python with CUDA + RPC into a venv, then measure
#   bench/gpu.sh --quick --cpu   # no GPU: a few items, Gemma only, the CPU path (what the tests run)
#
# With CUDA (nvidia-smi sees a GPU and nvcc is on PATH): a venv ($VENV, default
# bench/.venv-gpu) gets llama-cpp-python, the version installed here, built from source with
# CMAKE_ARGS="-DGGML_CUDA=on -DGGML_RPC=on" (for $CUDA_ARCH, default: the GPU's own architecture),
# plus this repository with its test extra
# (which brings both real models). Each model runs `abricot-local run --tasks discotex
# --sample N` with every engine (prefix, single, batched) on the GPU (all layers) and the
# prefix engine on the CPU (--n-gpu-layers 0) of the same build; bench/gpu_report.py prints
# items/s, tokens/s, batched-vs-prefix agreement and the CPU-vs-GPU drift, and
# `abricot-local compare` (where this version has it) compares the CPU and GPU runs.
# Without CUDA it says so and runs the CPU path with the current Python's install.
#
# Options: --quick (3 items, Gemma only, prefix + batched), --cpu (never build for CUDA),
# --items N, --models gemma,smollm2 (or .gguf paths), --out DIR, --venv DIR, --data-dir DIR, --threads N.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
ITEMS=40
MODELS="gemma,smollm2"
ENGINES="prefix single batched"
OUT=""
VENV="${VENV:-$HERE/.venv-gpu}"
# the DISCOTEX release: $ABRICOT_TEST_DATA/data/discotex, else the tests' data cache (a test run fills it)
DATA_DIR="${DATA_DIR:-${ABRICOT_TEST_DATA:-${ABRICOT_CACHE_DIR:-$HOME/.cache/abricot-local}/test-data}/data/discotex}"
THREADS="$(nproc 2>/dev/null || echo 2)"
FORCE_CPU=0
PY="${PYTHON:-python3}"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) ITEMS=3; MODELS="gemma"; ENGINES="prefix batched"; shift ;;
    --cpu) FORCE_CPU=1; shift ;;
    --items) ITEMS="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --venv) VENV="$2"; shift 2 ;;
    --data-dir) DATA_DIR="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 0 ;;
    *) echo "gpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-$HERE/results/gpu-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
if [[ -d "$DATA_DIR" ]]; then DATA_DIR="$(cd "$DATA_DIR" && pwd)"; fi

have_cuda() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1
}

if [[ "$FORCE_CPU" == 0 ]] && have_cuda; then
  DEVICE="gpu"
  DEVICE_NAME="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"
  DEVICE_NAME="$DEVICE_NAME; CUDA $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "CUDA: $DEVICE_NAME"
  VERSION="$("$PY" -c 'from importlib.metadata import version; print(version("llama-cpp-python"))' 2>/dev/null || echo 0.3.36)"
  if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
  fi
  if ! "$VENV/bin/python" -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)' 2>/dev/null; then
    echo "building llama-cpp-python $VERSION with CUDA and RPC (takes a while)"
    # CUDA_ARCH: the GPU's own architecture only (cmake >= 3.24), which cuts the build to minutes
    CMAKE_ARGS="-DGGML_CUDA=on -DGGML_RPC=on -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-native}" FORCE_CMAKE=1 \
      "$VENV/bin/pip" install -q --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$VERSION"
  fi
  "$VENV/bin/pip" install -q -e "$ROOT[test]"
  RUNPY="$VENV/bin/python"
else
  DEVICE="cpu"
  DEVICE_NAME="no CUDA GPU (nvidia-smi or nvcc not found, or --cpu): CPU path only"
  echo "$DEVICE_NAME"
  RUNPY="$PY"
fi

model_path() {  # gemma | smollm2 -> the GGUF the test extra installs; a .gguf path as it is
  if [[ "$1" == *.gguf ]]; then echo "$1"; return; fi
  "$RUNPY" - "$1" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "bench")
from scale import real_models
print(dict(zip(("gemma", "smollm2"), real_models()))[sys.argv[1]][1])
EOF
}

run() {  # model-name path device engine
  local name="$1" path="$2" device="$3" engine="$4" layers=-1
  [[ "$device" == cpu ]] && layers=0
  echo "run: $name on $device, engine $engine, $ITEMS items"
  "$RUNPY" -m abricot_local run "$path" --tasks discotex --sample "$ITEMS" --data-dir "$DATA_DIR" \
    --engine "$engine" --threads "$THREADS" --n-gpu-layers "$layers" --out "$OUT/$name--$device--$engine" >/dev/null
}

cd "$ROOT"
for model in ${MODELS//,/ }; do
  path="$(model_path "$model")"
  name="$(basename "$model" .gguf)"
  for engine in $ENGINES; do
    run "$name" "$path" "$DEVICE" "$engine"
  done
  if [[ "$DEVICE" == gpu ]]; then
    run "$name" "$path" cpu prefix
  fi
done

"$RUNPY" bench/gpu_report.py "$OUT" --sample "$ITEMS" --data-dir "$DATA_DIR" --device-name "$DEVICE_NAME"

if [[ "$DEVICE" == gpu ]]; then
  if "$RUNPY" -m abricot_local compare --help >/dev/null 2>&1; then
    for model in ${MODELS//,/ }; do
      name="$(basename "$model" .gguf)"
      "$RUNPY" -m abricot_local compare "$OUT/$name--cpu--prefix" "$OUT/$name--gpu--prefix" || true
    done
  else
    echo "(this version has no 'abricot-local compare': the drift column above is the comparison)"
  fi
else
  echo "CPU-vs-GPU drift: n/a (no GPU)"
fi
echo "runs in $OUT"
