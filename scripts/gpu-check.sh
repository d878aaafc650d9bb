#!/usr/bin/env bash
# The GPU machine's whole check in one call (see docs/building.md): builds the
# runtime and the tensor engine against the machine's torch (2.11 + CUDA 13)
# with the few Debian packages it lacks carried in .gpu-debs/ (fetch them here
# with ../shared/tools/fetch-gpu-debs.sh .gpu-debs), then runs the GoogleTest
# suites, CUDA/NCCL ones included. Logs go to $OUT (the device tool returns it).
#
#   device run:  scripts/gpu-check.sh            (carry: .gpu-debs)
#   GPU_CHECK_BUILD_ONLY=1 builds without running the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out"
jobs=$(nproc)

# NVLink multicast stays off in every process we start (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

deps=$(mktemp -d)
for deb in .gpu-debs/*.deb; do dpkg -x "$deb" "$deps"; done
libs="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib:$deps/lib"
export CPATH="$deps/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$libs${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

py=python3
torch_prefix=$($py -c 'import torch; print(torch.utils.cmake_prefix_path)')
# NCCL ships inside the nvidia-nccl wheel; give CMake an unversioned name.
nccl_dir=$($py -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
if [ -n "$nccl_dir" ]; then
  mkdir -p "$deps/nccl/lib"
  ln -sf "$nccl_dir/include" "$deps/nccl/include"
  ln -sf "$(ls "$nccl_dir"/lib/libnccl.so* | head -n 1)" "$deps/nccl/lib/libnccl.so"
  export NCCL_ROOT="$deps/nccl"
  export LD_LIBRARY_PATH="$nccl_dir/lib:$LD_LIBRARY_PATH"
fi

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'
} 2>&1 | tee "$out/machine.txt"

set -o pipefail
cmake -S . -B build-gpu -G Ninja -DMONARCH_ENABLE_COMPILER=OFF -DMONARCH_ENABLE_FUZZERS=OFF \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" 2>&1 | tee "$out/configure.log" | grep -E "monarch|Error" 
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || { echo "configure failed"; tail -40 "$out/configure.log"; exit 1; }

if ! cmake --build build-gpu -j "$jobs" > "$out/build.log" 2>&1; then
  echo "build failed"; grep -E "error|Error" "$out/build.log" | head -40; exit 1
fi
# GPU_CHECK_BUILD_ONLY=1: a device call that only benchmarks (scripts/gpu-bench.sh).
[ "${GPU_CHECK_BUILD_ONLY:-0}" = 1 ] && exit 0

(cd build-gpu && ctest -j "$jobs" --timeout 300 --output-on-failure \
   -E 'runtime\.MultiHostGpuLoopback' \
   --output-junit "$out/ctest.xml") > "$out/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Skipped|\*\*\*" "$out/ctest.log" | tail -40
# Device-time trace events (issues 7 and 10): these must say Passed here.
grep -E "CudaTrace\." "$out/ctest.log"

# NCCL across two loopback "hosts" with a GPU each (docs/multi-host.md), run
# verbosely: its verdict, and the backend each worker's communicator took.
(cd build-gpu && ctest -R 'runtime\.MultiHostGpuLoopback' -V --timeout 300) \
  > "$out/cross-host-gpu.log" 2>&1
cross=$?
grep -E "tests passed|tests failed|loopback-gpu-hosts: SKIP|on gh[01]\] monarch debug: cuda: communicator|\[  (PASSED|FAILED) " \
  "$out/cross-host-gpu.log" | sort -u | head -12
[ "$rc" -ne 0 ] && exit $rc
exit $cross
