#!/usr/bin/env bash
# Benchmarks on the GPU machine's 16 idle cores, after scripts/gpu-check.sh
# built build-gpu/ (same environment: run both in one device call):
#   scripts/gpu-check.sh; scripts/gpu-bench.sh        (carry: .gpu-debs)
# .gpu-debs needs libbenchmark-dev and libbenchmark1debian besides the
# packages of ../shared/tools/fetch-gpu-debs.sh (apt-get download them there).
# Plans for the DDP and calibration runs are compiled on a machine with the
# compiler first (the GPU build has none):
#   for r in 4 8; do /usr/bin/python3 bench/passes/ddp_overlap.py --monarch-opt build/bin/monarch-opt \
#       --ranks $r --layers 8 --hidden 512 --batch 128 --steps 6 --warmup 1 \
#       --write-plans bench/passes/plans/ddp$r; done
#   /usr/bin/python3 bench/passes/calibrate.py --monarch-opt build/bin/monarch-opt --ranks 4 \
#       --write-plan bench/passes/plans/probe4.plan
#   PYTHONPATH=build/python /usr/bin/python3 bench/pipeline/job_plans.py prepare bench/pipeline/plans
# (carry bench/passes/plans and bench/pipeline/plans too). The pipeline jobs'
# outputs and traces come back in $OUT/pipeline-results.tar.gz; unpack it and
# `job_plans.py report bench/pipeline/plans DIR` analyses them (CUDA jobs: step
# time and bubble from the traces' device-time events).
# Every figure goes to $OUT/bench-*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/build-gpu/out}
bin=build-gpu/bin
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
deps=$(mktemp -d)
for deb in .gpu-debs/*.deb; do dpkg -x "$deb" "$deps"; done
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib:$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# $BENCH_ONLY (e.g. "ddp4 ddp8") limits the run to those figures; $DDP_REPS
# and $DDP_FLAGS (e.g. --bind) go to the DDP runs.
run() { # name, command...
  local name=$1; shift
  if [ -n "${BENCH_ONLY:-}" ] && [[ " $BENCH_ONLY " != *" $name "* ]]; then return 0; fi
  echo "=== $name: $*" | tee -a "$out/bench-$name.txt"
  { uptime; timeout 300 "$@"; echo "exit $?"; uptime; } >> "$out/bench-$name.txt" 2>&1
  tail -n 25 "$out/bench-$name.txt"
}

export MONARCH_PYTHON=$(command -v python3)
export MONARCH_OPT=${MONARCH_OPT:-$PWD/build-gpu/bin/monarch-opt}
export MONARCH_RUN=$PWD/$bin/monarch-run
# The Python frontend on CUDA (docs/benchmarks.md "Python frontend"): eager
# per-op cost through a real worker vs local torch vs a CUDA-graph replay, the
# compiled path's per-op cost, an MLP's forward/backward; the same figures
# for the frontend before v2 when .gpu-tools/old-frontend.tgz carries it
# (`git archive <commit> frontend/python/monarch`, repacked as monarch/);
# the pipeline job against the same model in plain single-process torch.
run frontend env PYTHONPATH=build-gpu/python python3 bench/frontend/eager_ops.py \
  --device cuda --ops 2000 --reps 5 --compiled --mlp --monarch-run $bin/monarch-run \
  --json "$out/frontend.json"
if [ -f .gpu-tools/old-frontend.tgz ] && { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" frontend-old "* ]]; }; then
  old=$(mktemp -d)
  tar xzf .gpu-tools/old-frontend.tgz -C "$old"
  ln -sf "$PWD"/build-gpu/python/monarch/*.so "$PWD"/build-gpu/python/monarch/plan_pb2.py "$old/monarch/"
  run frontend-old env PYTHONPATH="$old" MONARCH_TENSOR_WORKER=$PWD/$bin/monarch-tensor-worker \
    python3 bench/frontend/eager_ops.py --device cuda --ops 2000 --reps 5 --compiled --mlp \
    --monarch-run $bin/monarch-run --json "$out/frontend-old.json"
fi
run compiled-step env PYTHONPATH=build-gpu/python python3 bench/frontend/compiled_step.py \
  --device cuda --ops 1500 --calls 2000 --reps 5 --json "$out/compiled-step.json"
run pipeline-compiled env PYTHONPATH=build-gpu/python python3 examples/pipeline/run.py \
  --compiled-step --device cuda --pp 2 --dp 1 --hidden 512 --microbatches 8 --batch 64 \
  --steps ${PIPELINE_COMPILED_STEPS:-200} --lr 0.01 --reference
run pipeline-single python3 bench/pipeline/single_process.py --device cuda --pp 2 --dp 1 \
  --hidden 512 --microbatches 8 --batch 64 --steps 20 --lr 0.01
# One to_mesh between two processes sharing the GPU: CUDA IPC, its baseline
# (host copies through Gloo), and CPU tensors through Gloo.
for t in "cuda --ipc on" "cuda --ipc off" "cpu"; do
  run same-gpu-transfer env PYTHONPATH=build-gpu/python python3 \
    bench/pipeline/same_gpu_transfer.py --device $t --round-trips 200 --reps 5
done
# Its floor: the same chain in plain torch, two processes sharing the GPU
# through CUDA IPC (waiting on the device, then on the host), and two streams
# of one process.
for m in "two-process --wait device" "two-process --wait host" "one-process"; do
  run same-gpu-transfer python3 bench/pipeline/raw_cuda_ipc.py --mode $m --round-trips 200 --reps 5
done
# The pipeline job's own floor: its model, data and schedule in plain torch,
# two processes on the GPU (then two streams of one process), each beside the
# single-process whole-batch baseline of the same run.
for m in two-process one-process; do
  run pipeline-floor python3 bench/pipeline/raw_pipeline.py --mode $m --pp 2 --hidden 512 \
    --microbatches 8 --batch 64 --steps 30 --lr 0.01
done
run pipeline-job env PYTHONPATH=build-gpu/python python3 examples/pipeline/run.py --device cuda \
  --pp 2 --dp 1 --hidden 512 --microbatches 8 --batch 64 --steps 20 --out "${PIPELINE_JOB_OUT:-$(mktemp -d)}"
# Most wanted first: a device call has a hard time limit.
for r in 4 8; do
  plans=bench/passes/plans/ddp$r
  [ -f $plans/naive.plan ] && run ddp$r python3 bench/passes/ddp_overlap.py \
    --monarch-run $bin/monarch-run --plans $plans --ranks $r --layers 8 --hidden 512 \
    --batch 128 --steps 6 --warmup 1 --reps ${DDP_REPS:-3} ${DDP_FLAGS:-}
done
# Several GPUs (issue "multi-GPU"): NCCL all-reduce through monarch vs
# torch.distributed NCCL, one rank per GPU, and DDP on CUDA ranks (plans:
#   ddp_overlap.py ... --ranks 2 --layers 8 --hidden 4096 --batch 512 --steps 10
#       --warmup 2 --device cuda --write-plans bench/passes/plans/ddp-cuda2).
# With --device cuda its step times come from the traces' device-time events.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -ge 2 ]; then
  [ -x $bin/tensor-allreduce-bench ] && run nccl $bin/tensor-allreduce-bench --backend nccl \
    --ranks "$gpus" --iters 20
  [ -f bench/passes/plans/ddp-cuda2/naive.plan ] && run ddpcuda python3 bench/passes/ddp_overlap.py \
    --monarch-run $bin/monarch-run --plans bench/passes/plans/ddp-cuda2 --ranks 2 --layers 8 \
    --hidden 4096 --batch 512 --steps 10 --warmup 2 --reps ${DDP_REPS:-3} --device cuda
fi
# The pipeline job: each plan run once, its losses and trace kept for the report.
if [ -d bench/pipeline/plans ] && { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" pipeline "* ]]; }; then
  for d in bench/pipeline/plans/*/; do
    n=$(basename "$d")
    { uptime; timeout 300 $bin/monarch-run "$d/job.plan" --trace "$out/$n.trace.json" \
        > "$out/$n.stdout" 2> "$out/$n.stderr"; echo "exit $?"; uptime; } > "$out/bench-pipeline-$n.txt" 2>&1
    echo "=== pipeline $n: $(grep -c '^fetch' "$out/$n.stdout") losses, $(grep exit "$out/bench-pipeline-$n.txt")"
    tail -n 3 "$out/$n.stderr"
  done
  # One file back ($OUT returns few files): outputs and traces together.
  (cd "$out" && tar czf pipeline-results.tar.gz *.stdout *.stderr *.trace.json bench-pipeline-*.txt \
     && rm -f *.stdout *.stderr *.trace.json bench-pipeline-*.txt)
fi
if [ -x $bin/tensor-allreduce-bench ]; then
  for i in 1 2; do run allreduce $bin/tensor-allreduce-bench --ranks 4 --iters 20; done
fi
[ -x $bin/tensor-overhead-bench ] && run overhead $bin/tensor-overhead-bench \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
[ -f bench/passes/plans/probe4.plan ] && run calibrate python3 bench/passes/calibrate.py \
  --monarch-run $bin/monarch-run --plan bench/passes/plans/probe4.plan --ranks 4
[ -x $bin/monarch-runtime-bench ] && run runtime $bin/monarch-runtime-bench --reps 5
run torchrpc python3 bench/torch_rpc_pingpong.py 2000 5
[ -x $bin/monarch-runtime-bench ] && run polling bench/runtime-polling.sh build-gpu 5
exit 0
