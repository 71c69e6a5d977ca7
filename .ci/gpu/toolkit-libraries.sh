# Sourced by the bundle's scripts on the GPU machine. The binaries load cuBLASLt
# (libcublasLt.so.13, ~0.5 GB, never carried) dynamically; this finds it and puts its folder on
# LD_LIBRARY_PATH. Where it looks, in order:
#   1. the dynamic loader's cache (ldconfig -p): nothing to add, the loader finds it itself;
#   2. the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-13*;
#   3. a Python wheel (nvidia-cublas: nvidia/cu13/lib or nvidia/cublas/lib) under the
#      site-packages of python3 or /usr/bin/python3.
# Sets FP8LAB_CUBLASLT to the library found and FP8LAB_CUBLASLT_FROM to where it came from;
# when none is found it prints every place it looked and returns 1 (every bundle binary needs it).
fp8lab_find_cublaslt() {
  local name=libcublasLt.so.13 found="" dir py site
  local looked=("ldconfig -p")
  found=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}')
  if [[ -n $found && -e $found ]]; then
    FP8LAB_CUBLASLT=$found FP8LAB_CUBLASLT_FROM="ldconfig cache"
    export FP8LAB_CUBLASLT FP8LAB_CUBLASLT_FROM
    return 0
  fi
  for dir in ${CUDA_HOME:+"$CUDA_HOME/lib64"} ${CUDA_PATH:+"$CUDA_PATH/lib64"} /usr/local/cuda/lib64 \
             /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib; do
    looked+=("$dir")
    if [[ -e $dir/$name ]]; then
      FP8LAB_CUBLASLT=$dir/$name FP8LAB_CUBLASLT_FROM="CUDA toolkit"
      export FP8LAB_CUBLASLT FP8LAB_CUBLASLT_FROM LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      return 0
    fi
  done
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    while IFS= read -r site; do
      [[ -d $site/nvidia ]] || continue
      looked+=("$site/nvidia")
      found=$(find "$site/nvidia" -maxdepth 3 -name "$name" 2>/dev/null | head -n 1)
      if [[ -n $found ]]; then
        dir=$(dirname "$found")
        FP8LAB_CUBLASLT=$found FP8LAB_CUBLASLT_FROM="Python wheel ($py)"
        export FP8LAB_CUBLASLT FP8LAB_CUBLASLT_FROM LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        return 0
      fi
    done < <(timeout -s KILL 30 "$py" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  done
  echo "fp8lab: cuBLASLt ($name) NOT FOUND; every bundle binary needs it. Looked in: ${looked[*]}" >&2
  echo "fp8lab: set CUDA_HOME to a CUDA 13 toolkit, or install the nvidia-cublas (CUDA 13) wheel" >&2
  return 1
}
