#!/usr/bin/env bash
# Long CLI fuzzing, as `make fuzz` runs it: mutated example snapshots through
# `validate` and `simulate`, each case exit 0 or 2 within seconds, never a traceback.
# FUZZ_EXAMPLES cases (default 5000) with random seeds; the suite runs 300 fixed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
export FUZZ_EXAMPLES="${FUZZ_EXAMPLES:-5000}"
exec .venv/bin/python -m pytest -p no:cacheprovider -q tests/test_cli_fuzz.py \
  --hypothesis-show-statistics "$@"
