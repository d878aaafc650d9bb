#!/usr/bin/env bash
# Installs every Debian package the project needs (DESIGN.md §7). Idempotent: when all packages are
# present it only runs dpkg-query and exits. Never downloads anything but Debian packages.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache g++ clang-22 lld-22 libclang-rt-22-dev clang-format
  # compiler: MLIR/LLVM 22 (lit and FileCheck come with llvm-22-tools)
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # runtime
  libtorch-dev libgloo-dev libibverbs-dev libtbb-dev libprotobuf-dev protobuf-compiler libasio-dev
  libssl-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # multi-host tests: network namespaces, a real SLURM with munge
  iproute2 slurm-wlm munge
  # Python frontend (for /usr/bin/python3)
  python3-torch python3-pytest python3-dev pybind11-dev python3-pybind11 python3-numpy python3-protobuf
  python3-cloudpickle
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or a first attempt fails.
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
