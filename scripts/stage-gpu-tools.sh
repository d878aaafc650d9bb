#!/usr/bin/env bash
# Builds monarch-opt-static here (a machine with MLIR 22) and stages it for the
# GPU machine, which has no MLIR (docs/building.md, "The GPU machine"):
# .gpu-tools/monarch-opt.xz, the stripped self-contained binary xz-compressed
# (about 2.4 MB of the 64 MiB a device run may carry). Name .gpu-tools in the
# device run's carry; scripts/gpu-check.sh installs it into build-gpu/bin/.
#
#   scripts/stage-gpu-tools.sh     MONARCH_BUILD_DIR (default build/) is
#                                  configured first if it is not yet;
#                                  MONARCH_JOBS (default 2) build jobs.
#
# Before staging it checks what the GPU machine relies on: only glibc's
# libraries are needed at run time, and it compiles a program to a plan.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${MONARCH_BUILD_DIR:-$root/build}
jobs=${MONARCH_JOBS:-2}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true

if [ ! -f "$build/CMakeCache.txt" ]; then
  # The compiler only: the runtime is not needed for monarch-opt-static.
  cmake -S . -B "$build" -G Ninja -DMONARCH_ENABLE_FUZZERS=OFF -DMONARCH_ENABLE_RUNTIME=OFF
fi
for off in MONARCH_ENABLE_COMPILER MONARCH_BUILD_STATIC_OPT; do
  if grep -q "^$off:BOOL=OFF" "$build/CMakeCache.txt"; then
    echo "stage-gpu-tools: $build is configured with $off=OFF; reconfigure it with $off=ON" >&2
    exit 1
  fi
done
cmake --build "$build" -j "$jobs" --target monarch-opt-static
bin=$build/bin/monarch-opt-static
if [ ! -x "$bin" ]; then
  echo "stage-gpu-tools: $bin was not built (see the configure output: 'monarch: not building ...')" >&2
  exit 1
fi

/usr/bin/python3 test/Tools/monarch-opt/Inputs/static_opt.py needed "$bin"
plan=$(mktemp)
trap 'rm -f "$plan"' EXIT
"$bin" test/Integration/reduce.mlir --monarch-default-pipeline \
  --monarch-emit-plan="output=$plan" -o /dev/null
[ -s "$plan" ] || { echo "stage-gpu-tools: $bin wrote no plan" >&2; exit 1; }

mkdir -p .gpu-tools
rm -f .gpu-tools/monarch-opt .gpu-tools/monarch-opt.xz.tmp
xz -9 -c "$bin" > .gpu-tools/monarch-opt.xz.tmp
mv .gpu-tools/monarch-opt.xz.tmp .gpu-tools/monarch-opt.xz
echo "stage-gpu-tools: .gpu-tools/monarch-opt.xz ($(stat -c %s .gpu-tools/monarch-opt.xz) bytes;" \
  "$(stat -c %s "$bin") uncompressed) from $bin, $("$bin" --version | head -n 1 | sed 's/^ *//')"
