#!/usr/bin/env bash
# The test command: set up (once) and run the whole suite. PYTHON=python3.12 picks another version;
# extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash scripts/setup.sh)
exec "$py" -m pytest tests -q -p no:cacheprovider "$@"
