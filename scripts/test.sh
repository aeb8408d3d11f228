#!/usr/bin/env bash
# The README's test command (what CI runs). Two runs of pytest:
#   1. every test that runs no evaluation, on both cores (pytest-xdist, -n 2);
#   2. the tests that run or read an evaluation (marked `serial` by tests/conftest.py), one at a
#      time with nothing beside them: an evaluation voids when anything else uses the CPU.
# Each ends with its slowest steps. Arguments (a path, -k, ...) run that selection once, serially.
# ARENA_TEST_PROFILE=full runs the long end-to-end evaluations too (docs/contributors/tests.md).
set -uo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
# One embedding cache for every pool build of this run, whichever process makes it.
ARENA_TEST_SHARED=$(mktemp -d)
export ARENA_TEST_SHARED
trap 'rm -rf "$ARENA_TEST_SHARED"' EXIT
common=(-q -p no:cacheprovider)
if [ $# -gt 0 ]; then
  python -m pytest "${common[@]}" --durations=30 "$@"
  exit $?
fi
ok() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ]; }  # 5: the selection was empty
start=$(date +%s)
# ARENA_TEST_REPORTS=DIR: each half's JUnit XML there (every test's time: docs/benchmarks/tests.md)
report() { [ -n "${ARENA_TEST_REPORTS:-}" ] && echo "--junitxml=$ARENA_TEST_REPORTS/$1.xml"; }
python -m pytest "${common[@]}" -n 2 -m "not serial" --durations=15 $(report parallel)
first=$?
middle=$(date +%s)
# the serial half copies the local pools the first half built (tests/pool_fixtures.py) instead of building again
ARENA_TEST_POOLS_FROM_SHARED=1 python -m pytest "${common[@]}" -m serial --durations=30 $(report serial)
second=$?
end=$(date +%s)
echo "tests without evaluations (2 workers): $((middle - start)) s; with evaluations (serial): $((end - middle)) s"
ok "$first" && ok "$second"
