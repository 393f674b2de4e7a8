# Sourced by the scripts: puts the CUDA toolkit on PATH (build-time only: the
# library itself loads the driver at run time).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CUDAToolkit_ROOT="${CUDAToolkit_ROOT:-$(dirname "$(dirname "$(command -v nvcc)")")}"
