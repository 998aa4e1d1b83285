#!/usr/bin/env bash
# Create (once) a virtual environment for one Python version, install the pinned requirements
# and dynamo_lite itself (building the C frame hook). Prints the venv's python path last.
#   PYTHON=python3.12 bash scripts/setup.sh
#   EXTRA=corpus,ray bash scripts/setup.sh  # also requirements/corpus.txt and ray.txt (the report's libraries)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" --version >/dev/null 2>&1; then
  # pyenv keeps other versions out of PATH: look there (e.g. PYTHON=python3.12).
  ver="${PYTHON#python}"
  cand=$(ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$ver".*/bin/python 2>/dev/null | sort -V | tail -n 1)
  [ -n "$cand" ] || { echo "setup: no interpreter for $PYTHON (install it or set PYTHON=/path/to/python)" >&2; exit 2; }
  PYTHON="$cand"
fi
ver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
venv=".venv-$ver"
stamp="$venv/.requirements-$(cat requirements/ci.txt pyproject.toml setup.py | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: creating $venv with $PYTHON (Python $ver)" >&2
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -r requirements/ci.txt >&2
  touch "$stamp"
fi
# EXTRA: comma-separated names of requirements/<name>.txt to add (e.g. corpus,ray).
extras="${EXTRA:-}"
for extra in ${extras//,/ }; do
  extra_stamp="$venv/.extra-$extra-$(cat requirements/ci.txt "requirements/$extra.txt" | sha1sum | cut -c1-12)"
  if [ ! -f "$extra_stamp" ]; then
    # -c ci.txt keeps torch (and everything else CI pins) exactly where it is.
    "$venv/bin/python" -m pip install -q -r "requirements/$extra.txt" -c requirements/ci.txt >&2
    touch "$extra_stamp"
  fi
done
# Always rebuild the extension (cheap), so a changed _evalframe.c is picked up. One build at a time
# in this tree (CI sets up and tests versions side by side: they share build/ and the egg-info).
exec 9>".setup.lock"
flock 9
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >&2
flock -u 9
echo "$venv/bin/python"
