#!/usr/bin/env bash
# Runs the actor-runtime benchmarks and the torch.distributed.rpc peer figure
# in one go; prints the markdown rows used in docs/benchmarks.md.
#   bench/run-runtime-bench.sh [build-dir] [reps]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-5}
"$build/bin/monarch-runtime-bench" --reps "$reps"
/usr/bin/python3 bench/torch_rpc_pingpong.py 2000 "$reps"
