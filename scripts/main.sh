#!/usr/bin/env bash
# The main job: set up (once) and run the demo that captures small models and prints their graphs.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash scripts/setup.sh)
exec "$py" -m dynamo_lite.demo "$@"
