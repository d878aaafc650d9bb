#!/usr/bin/env bash
# Installs dependencies, builds, and runs the project's most complete
# end-to-end example. Until the pipeline-parallel job exists that is:
#  1. the compiler on the programs in examples/: a two-stage pipeline (mesh
#     layouts, views resolved to slices of the root, the lowered plan), a naive
#     DDP step turned into the overlapped schedule (with simulated step times),
#     and a static WRONG_MESH error;
#  2. monarch-run running examples/pipeline_forward.mlir end to end: compiled
#     in-process, one tensor-worker process per rank of host=2 x gpu=2, the
#     fetched value printed;
#  3. the pipeline-parallel training job (examples/pipeline, docs/pipeline.md):
#     traced from Python once, compiled, run by monarch-run for 20 steps,
#     losses checked against single-process PyTorch;
#  4. the actor runtime: the C++ example of docs/runtime.md, which spawns a
#     mesh of worker processes and casts to actors on it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MONARCH_BUILD_DIR:-$PWD/build}

scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B "$build" -G Ninja ${MONARCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "${MONARCH_JOBS:-2}"

opt="$build/bin/monarch-opt"
section() { printf '\n=== %s ===\n' "$1"; }

if [ -x "$opt" ]; then
  section "examples/pipeline_forward.mlir: where each mesh's ranks lie"
  "$opt" examples/pipeline_forward.mlir --monarch-print-mesh-layout \
    --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | grep remark

  section "after --monarch-resolve-mesh-views --canonicalize"
  "$opt" examples/pipeline_forward.mlir --monarch-resolve-mesh-views --canonicalize

  section "examples/pipeline_forward.mlir lowered to the executable plan (text form)"
  "$opt" examples/pipeline_forward.mlir --monarch-emit-plan="format=text" -o /dev/null

  section "examples/ddp_step.mlir: naive DDP, simulated (profile: an all-reduce costs about a matmul)"
  "$opt" examples/ddp_step.mlir --monarch-simulate=profile=examples/ddp-profile.json \
    --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | grep remark
  section "the same after --monarch-default-pipeline (async collectives, overlap, comm stream + borrows)"
  "$opt" examples/ddp_step.mlir --monarch-default-pipeline \
    --monarch-simulate=profile=examples/ddp-profile.json \
    --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | grep remark
  "$opt" examples/ddp_step.mlir --monarch-default-pipeline

  section "examples/wrong_mesh.mlir: rejected before anything runs"
  if "$opt" examples/wrong_mesh.mlir --mlir-print-op-on-diagnostic=false -o /dev/null; then
    echo "unexpected: wrong_mesh.mlir verified" >&2
    exit 1
  fi
else
  echo "monarch-opt was not built (see the configure output); skipping the compiler demo"
fi

run="$build/bin/monarch-run"
if [ -x "$run" ] && [ -x "$opt" ]; then
  section "monarch-run examples/pipeline_forward.mlir: compiled, run on 4 local worker processes"
  # The workers have no GPU: the example's cuda tensors go to CPU (one warning
  # per worker on stderr). The printed value is random (aten::rand).
  trace="$(mktemp -d)/pipeline_forward.trace.json"
  "$run" examples/pipeline_forward.mlir --trace "$trace"
  echo "(Chrome/Perfetto trace of every executed instruction: $trace)"
else
  echo "monarch-run (with the compiler built in) was not built; skipping the end-to-end run"
fi

py=/usr/bin/python3
if [ -x "$run" ] && [ -x "$opt" ] && [ -d "$build/python/monarch" ] &&
   "$py" -c "import torch" 2>/dev/null; then
  section "examples/pipeline: a pipeline-parallel training job traced once, compiled, run by monarch-run"
  # An MLP split into 2 stages over pp (x 2 dp replicas, 4 microbatches):
  # traced with monarch.trace, ordered 1F1B by --monarch-pipeline-schedule,
  # compiled with the default pipeline, run for 20 steps on 4 worker
  # processes; losses checked against single-process PyTorch. docs/pipeline.md.
  schedule=none
  if "$opt" --help | grep -q -- --monarch-pipeline-schedule; then schedule=1f1b; fi
  MONARCH_OPT="$opt" MONARCH_RUN="$run" PYTHONPATH="$build/python" \
    "$py" examples/pipeline/run.py --steps 20 --pass-schedule "$schedule" --reference \
    --out "$(mktemp -d)"
else
  echo "monarch-run, the Python package or torch is missing; skipping the pipeline job"
fi

example="$build/bin/monarch-example-hello-actors"
if [ -x "$example" ]; then
  section "the actor runtime: docs/runtime.md's example"
  "$example"
else
  echo "the runtime example was not built; skipping the runtime demo"
fi
