#!/usr/bin/env bash
# The main job: set up (once, with the corpus extras) and run the graph-break report over the
# bundled corpus of models. Extra arguments go to `dynamo-lite report` (e.g. --compare torch -k hf).
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(EXTRA=corpus bash scripts/setup.sh)
exec "$py" -m dynamo_lite.cli report --jobs 2 "$@"
