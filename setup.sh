#!/usr/bin/env bash
# Set up tiedlm from scratch in ./.venv: the CPU build of PyTorch first (so that pip never pulls
# the multi-GB CUDA packages on a CPU-only machine), then tiedlm and its test dependencies.
# Set TIEDLM_TORCH_INDEX to another PyTorch wheel index (e.g. .../whl/cu124) for a GPU build.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip 2>/dev/null || true
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q --retries 0 --timeout 10 --index-url "${TIEDLM_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" torch==2.13.0 2>/dev/null \
    || python -m pip install -q torch==2.13.0
fi
python -m pip install -q -e ".[test,hf]"
# Build the C++ kernels now (once per machine), not inside the first training epoch
python -c "from tiedlm import native; native.available()"
python -c "import torch, tiedlm; print(f'tiedlm {tiedlm.__version__} ready (torch {torch.__version__}, CUDA build: {torch.version.cuda is not None})')"
