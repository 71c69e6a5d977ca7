#!/usr/bin/env bash
# One result on any machine: the CI accuracy sweep run from
#   1. the default build (x86-64-v3 baseline, SIMD kernels chosen at run time),
#   2. a build for x86-64-v2 (SSE4.2 baseline: Eigen and the compiler vectorize differently),
#   3. the default build with FP8LAB_CPU_ISA=scalar (the scalar micro-tiles and quantizer),
# must agree bit for bit in every dataset but the timings, and so must a short training run. Both targets run on any x86-64 with
# AVX2, so this runs here; a difference means a reduction whose order depends on the ISA.
# Also compiles the kernels and references for x86-64-v4 (AVX-512) with -Werror, which needs no
# AVX-512 CPU, so a warning that only an AVX-512 build raises cannot come back unseen.
# Usage: tests/portable/cross_target_test.sh [default fp8lab binary]; builds under build/.
set -euo pipefail
cd "$(dirname "$0")/../.."
main=${1:-build/cpu/harness/fp8lab}
py=/usr/bin/python3
jobs=$(nproc)
say() { echo "[cross_target] $*"; }

say "compiling kernels, references and harness for x86-64-v4 (AVX-512) with -Werror"
cmake -S . -B build/check-v4 -DCMAKE_BUILD_TYPE=Release -DFP8LAB_CUDA=OFF -DFP8LAB_WERROR=ON \
  -DFP8LAB_MARCH=x86-64-v4 -DBUILD_TESTING=OFF >/dev/null
cmake --build build/check-v4 -j "$jobs" --target fp8lab_kernels_cpu fp8lab_reference fp8lab_harness >/dev/null

say "building fp8lab for x86-64-v2"
cmake -S . -B build/portable-v2 -DCMAKE_BUILD_TYPE=Release -DFP8LAB_CUDA=OFF -DFP8LAB_WERROR=ON \
  -DFP8LAB_MARCH=x86-64-v2 -DBUILD_TESTING=OFF >/dev/null
cmake --build build/portable-v2 -j "$jobs" --target fp8lab >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$main" run experiments/ci.toml -o "$work/v3.h5" >/dev/null
build/portable-v2/harness/fp8lab run experiments/ci.toml -o "$work/v2.h5" >/dev/null
FP8LAB_CPU_ISA=scalar "$main" run experiments/ci.toml -o "$work/scalar.h5" >/dev/null
# A short training run too (flash attention, its exp, the emulated FP8 GEMMs, AdamW): seeded
# dim256, whose 1x128 tiles and 128x128 blocks cut whole rows.
train=(train --init seed:1 --model dim256 --recipe deepseek_v3 --steps 2 --batch 1 --seq-len 128 --sample-tokens 2048
       --stats-every 1 --quiet)
"$main" "${train[@]}" -o "$work/train-v3.h5" >/dev/null
build/portable-v2/harness/fp8lab "${train[@]}" -o "$work/train-v2.h5" >/dev/null
FP8LAB_CPU_ISA=scalar "$main" "${train[@]}" -o "$work/train-scalar.h5" >/dev/null

"$py" - "$work/v3.h5" "$work/v2.h5" "$work/scalar.h5" "$work/train-v3.h5" "$work/train-v2.h5" "$work/train-scalar.h5" <<'PY'
import sys, h5py, numpy as np
# Timings and the process's resident set depend on the machine, not on the arithmetic.
timings = {"seconds", "elapsed_seconds", "step_seconds", "tokens_per_second", "median_tokens_per_second",
           "resident_peak_bytes", "resident_over_ledger", "resident_before_run_bytes", "resident_growth_over_ledger"}
compared = 0
for files in ([h5py.File(p, "r") for p in sys.argv[1:4]], [h5py.File(p, "r") for p in sys.argv[4:7]]):
    names = ["x86-64-v3", "x86-64-v2", "FP8LAB_CPU_ISA=scalar"]
    ref = files[0]
    assert ref.attrs["build_march"] == "x86-64-v3" and files[1].attrs["build_march"] == "x86-64-v2", "builds not as named"
    assert files[2].attrs["cpu_isa"] == "scalar", "the scalar run did not run scalar"
    for f, name in zip(files[1:], names[1:]):
        assert set(f) == set(ref), f"{name}: datasets differ: {sorted(set(f) ^ set(ref))}"
        for d in sorted(ref):
            if d in timings or ref[d].dtype.kind not in "fiu": continue
            a, b = ref[d][()].ravel(), f[d][()].ravel()   # grid variables, compared cell by cell
            bits = f"u{a.dtype.itemsize}"
            if a.shape != b.shape or not np.array_equal(a.view(bits), b.view(bits)):
                diff = np.flatnonzero(a.view(bits) != b.view(bits))
                sys.exit(f"FAIL {name} vs x86-64-v3: {d} differs at grid points {diff[:5].tolist()}: {a[diff[:3]]} vs {b[diff[:3]]}")
            compared += a.size

print(f"[cross_target] PASS: {compared} numbers (the CI sweep and a training run) bit-identical across x86-64-v3, "
      "x86-64-v2 and the scalar kernels")
PY
