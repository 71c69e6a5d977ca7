#!/usr/bin/env bash
# Every GPU test case in one process, from the bundle: exit 0 passed, 77 no CUDA device, 1 a
# broken CUDA setup or a failure; killed after FP8LAB_TEST_LIMIT seconds (default 540), so a
# hung kernel cannot outlast a GPU window's command. Arguments go to Catch2 (a test name, -s).
# For the GPU window use run-gpu-all.sh (one process per test case, findings and logs packed).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/toolkit-libraries.sh"
fp8lab_find_cublaslt || exit 1
echo "cuBLASLt: $FP8LAB_CUBLASLT ($FP8LAB_CUBLASLT_FROM)"
timeout -s KILL 20 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv 2>/dev/null
timeout -s KILL "${FP8LAB_TEST_LIMIT:-540}" "$here/bin/fp8lab_gpu_tests" "$@"
rc=$?
((rc == 137)) && echo "fp8lab: GPU tests KILLED after ${FP8LAB_TEST_LIMIT:-540} s" >&2
exit $rc
