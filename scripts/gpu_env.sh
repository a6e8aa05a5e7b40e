# Sourced by the scripts that run on a GPU host (gpu_session.sh, gpu_one_gpu_session.sh,
# gpu_model_steps.sh, gpu_calibrate.sh, gpu_train_corpus.sh), from the checkout's root: the
# environment of every launch there, and gpu_build.
# shellcheck shell=bash
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# gpu_build BUILD_DIR LOG_DIR TARGET... — configure (Release, sm_90, no benchmarks; nvcc from
# /usr/local/cuda when none is on PATH; GPU_BUILD_CMAKE_ARGS: more -D words) and build TARGETs
# with -j nproc (GPU_BUILD_TIMEOUT: a limit in seconds on the build). Logs: LOG_DIR/cmake.log and
# LOG_DIR/build.log. On failure: their last lines, "build failed", and status 1.
gpu_build() {
  local dir=$1 logs=$2
  shift 2
  local args=(-DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90
              -DMPLAN_BUILD_BENCH=OFF)
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  # shellcheck disable=SC2206  # GPU_BUILD_CMAKE_ARGS is a list of words
  args+=(${GPU_BUILD_CMAKE_ARGS:-})
  mkdir -p "$logs"
  if ! cmake -S . -B "$dir" "${args[@]}" >"$logs/cmake.log" 2>&1 ||
     ! timeout "${GPU_BUILD_TIMEOUT:-0}" cmake --build "$dir" -j "$(nproc)" --target "$@" \
       >"$logs/build.log" 2>&1; then
    tail -n 40 "$logs/cmake.log" "$logs/build.log"
    echo "build failed"
    return 1
  fi
}
