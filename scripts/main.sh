#!/usr/bin/env bash
# The main job: set up (once, with the corpus extras) and run the graph-break report over the
# bundled corpus of models. Extra arguments go to `dynamo-lite report` (e.g. --compare torch -k hf).
# Runs on Python 3.12 unless PYTHON says otherwise: there PyPI's torch==2.13.0 (a CUDA build, which
# runs on CPU) loads torchvision 0.28.0's C ops, so the timm and torchvision models of the corpus
# run too (requirements/corpus.txt says why). PYTHON=python3 bash scripts/main.sh runs on 3.11,
# where those models are reported as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(PYTHON="${PYTHON:-python3.12}" EXTRA=corpus bash scripts/setup.sh)
exec "$py" -m dynamo_lite.cli report --jobs 2 "$@"
