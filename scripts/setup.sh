#!/usr/bin/env bash
# Installs mplan's Debian packages (idempotent: apt skips what is there), then configures and
# builds in Release under build/. Usage: scripts/setup.sh [extra cmake args...]
# The CUDA toolkit, cuBLAS and NCCL are not Debian packages here: the GPU executor is built when
# they are found (e.g. under /usr/local/cuda), and skipped with a message when not.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libeigen3-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda_args=()
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  cuda_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
