#!/usr/bin/env bash
# Installs dependencies, configures and builds into build/, runs every test
# suite (lit, GoogleTest through ctest, pytest) and ends with one line
# "N passed, N failed, N skipped" summed over all suites, after checking that
# the suites left no process, directory or file behind (leftover-check.py).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }

build=${MONARCH_BUILD_DIR:-$root/build}
results=$build/test-results
jobs=${MONARCH_JOBS:-2}
# Let ccache reuse objects built in another checkout (CI builds a fresh clone
# in another folder): paths under the repo are hashed relative to it.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true

cmake -S . -B "$build" -G Ninja -DMONARCH_REQUIRE_PYTHON_EXTENSIONS=ON ${MONARCH_CMAKE_ARGS:-} || { echo "0 passed, 1 failed"; exit 1; }
cmake --build "$build" -j "$jobs" || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

rm -rf "$results"
mkdir -p "$results"
status=0

# Every suite runs with a private TMPDIR and a token in the environment that
# every process of the run inherits; the leftover check at the end fails the
# run if a process, directory or file was left behind (issue 23).
suite_tmp=$(mktemp -d /tmp/mtest.XXXXXX)
export TMPDIR="$suite_tmp"
export MONARCH_TEST_RUN="$$-$(date +%s)"

# lit (compiler tests); present only when the compiler is built.
if [ -f "$build/test/lit.site.cfg.py" ]; then
  /usr/lib/llvm-22/bin/lit -sv --xunit-xml-output "$results/lit.xml" "$build/test" || status=1
fi

# GoogleTest suites through ctest.
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600 \
   --output-junit "$results/ctest.xml") || status=1

# pytest (Python frontend), once it exists. Exit 5 means "no tests collected".
if [ -d frontend/python ] && ls test/python/test_*.py >/dev/null 2>&1; then
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m pytest -q \
    --junitxml="$results/pytest.xml" test/python
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 5 ] || status=1
fi

/usr/bin/python3 scripts/leftover-check.py --tmpdir "$suite_tmp" \
  --token "$MONARCH_TEST_RUN" --junit "$results/leftovers.xml" || status=1
rm -rf "$suite_tmp"

/usr/bin/python3 scripts/junit-summary.py "$results"/*.xml || status=1
exit $status
