#!/usr/bin/env bash
# fp8lab on the GPU machine, from the bundle (.ci/gpu-bundle), in steps sized for a GPU window
# (commands of at most 10 minutes, at most 8 files brought back):
#
#   run-gpu-all.sh STEP [STEP...] OUTDIR
#
#   env              machine, driver, toolkit, nvidia-smi, which libraries resolve, cuBLASLt
#                    location, QGMMA count per kernel in the SASS (cuobjdump), the bundle's
#                    manifest, zmm check and the WGMMA kernels' ptxas resource report   (<= 90 s)
#   tests            every gpu test case, each in its own process (<= 300 s each), findings.tsv
#                    (<= 450 s; FP8LAB_TESTS_BUDGET and FP8LAB_CASE_LIMIT change both limits)
#   sanitize         compute-sanitizer memcheck, racecheck and synccheck over the GEMM, grouped,
#                    linear-GEMM, quantizer and unscale tests and one benchmark shape of each
#                    WGMMA kernel -> sanitize-<tool>.txt (<= 540 s; FP8LAB_SANITIZE_BUDGET)
#   bench-quantize   quantizer (and the six tensor-amax forms) vs a device-to-device copy
#                    -> bench-quantize.json                                               (<= 120 s)
#   bench-gemm-128   GEMM benchmarks at M = 128 (cuBLASLt, first and tiled WGMMA kernels)
#                    -> bench-gemm-128.json                                               (<= 180 s)
#   bench-gemm-4096  the same at M = 4096 -> bench-gemm-4096.json                         (<= 180 s)
#   bench-grouped    grouped (MoE) GEMM: tiled kernel vs cuBLASLt once per expert
#                    -> bench-grouped.json                                                (<= 90 s)
#   bench-unscale    fused check-finite-and-unscale vs device-to-device copy -> bench-unscale.json (<= 60 s)
#   bench-gemm-headline  the headline shape alone, N = 7168, K = 16384 at M = 4096 and M = 128
#                    -> bench-gemm-headline.json (<= 150 s; for a window too short for the others)
#   bench-gemm = both GEMM steps; all = every step (no window limit assumed)
#
# The sequence that produces everything in three commands, each under 10 minutes:
#   run-gpu-all.sh env tests OUTDIR                                                   (<= 540 s)
#   run-gpu-all.sh sanitize OUTDIR                                                    (<= 540 s)
#   run-gpu-all.sh bench-quantize bench-gemm-128 bench-gemm-4096 bench-grouped OUTDIR (<= 570 s)
#
# Every program runs under `timeout -s KILL`, so a hung kernel (a barrier deadlock) costs its
# limit, not the window; each step has a budget (above) that its limits never exceed. Output
# is written to a scratch folder and packed after every step into ONE archive,
# OUTDIR/gpu-<steps>.tar.gz (a command killed midway still leaves what its finished steps
# wrote). The last lines printed are the summary (summary.txt in the archive). Exit status:
# 0 all ran and passed, 1 something failed or was killed, 77 something was skipped (no GPU).
set -uo pipefail

usage() {
  echo "usage: run-gpu-all.sh STEP [STEP...] OUTDIR   (steps: env tests sanitize bench-quantize bench-gemm-128 bench-gemm-4096 bench-grouped bench-gemm bench-gemm-headline bench-unscale all)" >&2
  exit 2
}
(($# >= 2)) || usage
out=${!#}
steps=("${@:1:$#-1}")
expanded=()
for s in "${steps[@]}"; do
  case $s in
    env | tests | sanitize | bench-quantize | bench-gemm-128 | bench-gemm-4096 | bench-grouped | bench-unscale | bench-gemm-headline) expanded+=("$s") ;;
    bench-gemm) expanded+=(bench-gemm-128 bench-gemm-4096) ;;
    all) expanded+=(env tests sanitize bench-quantize bench-gemm-128 bench-gemm-4096 bench-grouped bench-unscale) ;;
    *) echo "run-gpu-all.sh: unknown step '$s'" >&2; usage ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
archive_name="gpu-$(IFS=_; echo "${expanded[*]}").tar.gz"
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8lab-gpu.XXXXXX") || exit 2
summary=$work/summary.txt
: >"$summary"
failures=0 skips=0  # exit status: 1 when anything failed or was killed, else 77 when anything was skipped, else 0

note() { echo "$*" | tee -a "$summary"; }

# Packs the scratch folder into OUTDIR (the one file that comes back).
pack() {
  tar -C "$work" -czf "$work.tar.gz" . && mv -f "$work.tar.gz" "$out/$archive_name"
}

# run_limited SECONDS LOG COMMAND...: runs COMMAND under timeout -s KILL, output appended to
# LOG (line-buffered, so a killed program leaves what it printed); returns its exit status.
run_limited() {
  local seconds=$1 log=$2
  shift 2
  local buffer=()
  command -v stdbuf >/dev/null 2>&1 && buffer=(stdbuf -oL -eL)
  timeout -s KILL "$seconds" "${buffer[@]}" "$@" >>"$log" 2>&1
  local rc=$?
  ((rc == 137)) && echo "fp8lab: KILLED after ${seconds} s (time limit, or out of memory): $*" >>"$log"
  return $rc
}

gpu_state() {  # clocks, power and temperature now, appended to device.txt
  {
    echo "--- $1 ($(date -u +%FT%TZ))"
    timeout -s KILL 20 nvidia-smi --query-gpu=name,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,driver_version --format=csv
  } >>"$work/device.txt" 2>&1
}

find_tool() {  # a CUDA toolkit program on PATH or in the usual toolkit folders
  local t
  for t in "$(command -v "$1" 2>/dev/null)" ${CUDA_HOME:+"$CUDA_HOME/bin/$1"} /usr/local/cuda/bin/"$1" /usr/local/cuda-13*/bin/"$1"; do
    [[ -n $t && -x $t ]] && { echo "$t"; return 0; }
  done
  return 1
}

source "$here/toolkit-libraries.sh"
if fp8lab_find_cublaslt 2>>"$work/cublaslt.txt"; then
  cublaslt_line="cuBLASLt: $FP8LAB_CUBLASLT (from the $FP8LAB_CUBLASLT_FROM)"
else
  cublaslt_line="cuBLASLt: NOT FOUND ($(tr '\n' ' ' <"$work/cublaslt.txt"))"
fi
echo "$cublaslt_line" >>"$work/cublaslt.txt"

step_env() {
  local log=$work/env.txt bin lib tool
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -n) $(uname -r) $(uname -m)"
    echo "glibc: $(ldd --version 2>&1 | head -n 1)"
    grep -m 1 'model name' /proc/cpuinfo
    echo "cpu cores: $(nproc); avx512f: $(grep -q -m 1 avx512f /proc/cpuinfo && echo yes || echo no); avx2: $(grep -q -m 1 avx2 /proc/cpuinfo && echo yes || echo no)"
    echo "$cublaslt_line"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    tool=$(find_tool nvcc) && "$tool" --version | tail -n 2 || echo "nvcc: not found"
  } >"$log" 2>&1
  run_limited 30 "$work/device.txt" nvidia-smi
  gpu_state "env"
  # Every library each binary needs must resolve here (the bundle carries all but the machine's own).
  for bin in "$here"/bin/*; do
    local resolved
    resolved=$(timeout -s KILL 30 ldd "$bin" 2>&1)
    printf '== %s\n%s\n' "$(basename "$bin")" "$resolved" >>"$work/ldd.txt"
    if grep -q 'not found' <<<"$resolved"; then
      note "env: $(basename "$bin") has UNRESOLVED libraries: $(awk '/not found/ {print $1}' <<<"$resolved" | tr '\n' ' ')"
      failures=$((failures + 1))
    else
      note "env: $(basename "$bin"): every library resolves"
    fi
  done
  for f in MANIFEST.txt zmm-check.txt sass-check.txt wgmma-resources.txt sass-local.txt; do
    [[ -e $here/$f ]] && cp "$here/$f" "$work/bundle-$f"
  done
  # QGMMA (FP8 wgmma) instructions per kernel in the SASS the GPU runs: the WGMMA GEMM's
  # instances must have them (a kernel with only HMMA/FFMA is on a slower path).
  if tool=$(find_tool cuobjdump); then
    run_limited 60 "$work/sass-all.txt" "$tool" --dump-sass "$here/bin/fp8lab_gpu_tests"
    awk -f "$here/sass-count.awk" "$work/sass-all.txt" | sort -k3 -k2 >"$work/sass-check.txt"
    gzip -f "$work/sass-all.txt"
    local kernels tiled
    kernels=$(awk '$2 == "QGMMA" && /wgmma_gemm_kernel/' "$work/sass-check.txt" | wc -l)
    tiled=$(awk '$2 == "QGMMA" && /wgmma_tiled_kernel/' "$work/sass-check.txt" | wc -l)
    note "env: SASS: $kernels first-kernel and $tiled tiled-kernel instances with QGMMA; $(awk '$2 == "QGMMA" {n += $1} END {print n + 0}' "$work/sass-check.txt") QGMMA instructions in all; local-memory instructions in WGMMA kernels: $(awk '$2 == "LOCAL" && /wgmma_(gemm|tiled)_kernel/ {n += $1} END {print n + 0}' "$work/sass-check.txt") (sass-check.txt)"
  else
    note "env: cuobjdump not found on this machine; the bundle's own SASS count (made where it was built) is bundle-sass-check.txt"
  fi
  local gpu
  gpu=$(timeout -s KILL 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)
  note "env: GPU: ${gpu:-nvidia-smi printed nothing}"
  note "env: $cublaslt_line"
}

step_tests() {
  local budget=${FP8LAB_TESTS_BUDGET:-450} case_limit=${FP8LAB_CASE_LIMIT:-300} start=$SECONDS log=$work/gpu-tests.txt list=$work/gpu-test-list.txt rc name remaining limit
  local passed=0 failed=0 killed=0 not_run=0
  export FP8LAB_GPU_FINDINGS=$work/findings.tsv
  [[ -e $FP8LAB_GPU_FINDINGS ]] || printf 'test\tcase\tcount\tmismatches\tmax_ulp\tnote\n' >"$FP8LAB_GPU_FINDINGS"
  run_limited 60 "$list" "$here/bin/fp8lab_gpu_tests" --list-test-names-only
  rc=$?
  if ((rc == 77)); then note "tests: SKIPPED: no CUDA device ($(tail -n 1 "$list"))"; skips=$((skips + 1)); return; fi
  # Catch2 v2 exits with the number of test cases it listed: only a signal or an empty list is a failure.
  if ((rc > 128)) || ! grep -q '^gpu: ' "$list"; then note "tests: FAILED to start (exit $rc): $(tail -n 2 "$list" | tr '\n' ' ')"; failures=$((failures + 1)); return; fi
  # Each test case in its own process with its own limit: a hang loses one case, not the step.
  while IFS= read -r name; do
    [[ $name == "gpu: "* ]] || continue
    remaining=$((budget - (SECONDS - start)))
    if ((remaining < 20)); then
      note "tests: NOT RUN (step budget of ${budget} s spent): $name"
      not_run=$((not_run + 1))
      continue
    fi
    limit=$((remaining < case_limit ? remaining : case_limit))
    echo "=== $name (limit ${limit} s)" >>"$log"
    local t0=$SECONDS spec=$name case_log=$work/case.txt
    # A Catch2 test spec: backslash-escape what it would read as syntax (',' '[' ']' '"' '\').
    spec=${spec//\\/\\\\}
    spec=${spec//,/\\,}
    spec=${spec//[/\\[}
    spec=${spec//]/\\]}
    spec=${spec//\"/\\\"}
    : >"$case_log"
    run_limited "$limit" "$case_log" "$here/bin/fp8lab_gpu_tests" "$spec" --durations yes </dev/null
    rc=$?
    cat "$case_log" >>"$log"
    if grep -q '^No tests ran' "$case_log"; then
      failed=$((failed + 1)); note "tests: FAILED   $name (the test spec matched no test case: '$spec')"
    elif ((rc == 0)); then
      passed=$((passed + 1)); note "tests: passed   $name ($((SECONDS - t0)) s)"
    elif ((rc == 137)); then
      killed=$((killed + 1)); note "tests: KILLED   $name (limit ${limit} s)"
    else
      failed=$((failed + 1)); note "tests: FAILED   $name (exit $rc, $((SECONDS - t0)) s)"
    fi
  done <"$list"
  note "tests: $passed passed, $failed failed, $killed killed, $not_run not run; findings: $(($(wc -l <"$FP8LAB_GPU_FINDINGS") - 1)) rows"
  failures=$((failures + failed + killed + not_run))
  grep -E '^verdict|verdict:' "$FP8LAB_GPU_FINDINGS" | cut -f2,6 | sed 's/^/tests: /' | tee -a "$summary"
  awk -F'\t' 'NR > 1 && $1 == "wgmma zero exponent crafted" {print "tests: crafted " $2 ": " $6}' "$FP8LAB_GPU_FINDINGS" | tee -a "$summary"
}

# compute-sanitizer's three checkers over the GEMM-related test cases (Catch2 specs) and one
# benchmark shape of each WGMMA kernel, under one budget: each run gets at most
# FP8LAB_SANITIZE_RUN_LIMIT seconds (default 100) and what the budget leaves; runs that no
# longer fit are NOT RUN. A sanitizer report exits 99 (--error-exitcode); the logs are
# sanitize-<tool>.txt. The new kernel's cases first, so a short window still checks it.
step_sanitize() {
  local tool budget=${FP8LAB_SANITIZE_BUDGET:-540} run_limit=${FP8LAB_SANITIZE_RUN_LIMIT:-100} start=$SECONDS
  local clean=0 reported=0 failed=0 killed=0 not_run=0 checker spec remaining limit rc log
  if ! tool=$(find_tool compute-sanitizer); then
    note "sanitize: SKIPPED: compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
    skips=$((skips + 1))
    return
  fi
  local specs=("*tiled WGMMA exact control*" "*grouped tiled WGMMA*" "*fprop, dgrad and wgrad on the GPU*"
    "*tiled WGMMA kernel, width-128 instances*" "gpu: WGMMA exact control*" "gpu: cuda requantize_transposed*"
    "gpu: check_finite_and_unscale equals*")
  local benches=("tiled_nc128/4096x7168x2048$" "wgmma_nc128/4096x7168x2048$")
  for spec in "${specs[@]}" "${benches[@]}"; do
    for checker in memcheck racecheck synccheck; do
      log=$work/sanitize-$checker.txt
      remaining=$((budget - (SECONDS - start)))
      if ((remaining < 20)); then
        note "sanitize: NOT RUN (budget of ${budget} s spent): $checker $spec"
        not_run=$((not_run + 1))
        continue
      fi
      limit=$((remaining < run_limit ? remaining : run_limit))
      echo "=== $checker: $spec (limit ${limit} s)" >>"$log"
      local t0=$SECONDS
      if [[ $spec == *'$' ]]; then  # a benchmark shape: one short repetition
        run_limited "$limit" "$log" "$tool" --tool "$checker" --error-exitcode 99 --print-limit 20 \
          "$here/bin/fp8lab_bench_gemm_cuda" --benchmark_filter="$spec" --benchmark_min_time=0.001 --benchmark_repetitions=1
      else
        run_limited "$limit" "$log" "$tool" --tool "$checker" --error-exitcode 99 --print-limit 20 \
          "$here/bin/fp8lab_gpu_tests" "$spec" </dev/null
      fi
      rc=$?
      case $rc in
        0) clean=$((clean + 1)); note "sanitize: clean    $checker $spec ($((SECONDS - t0)) s)" ;;
        99) reported=$((reported + 1)); note "sanitize: REPORTED $checker $spec (sanitize-$checker.txt)" ;;
        137) killed=$((killed + 1)); note "sanitize: KILLED   $checker $spec (limit ${limit} s)" ;;
        *) failed=$((failed + 1)); note "sanitize: FAILED   $checker $spec (exit $rc)" ;;
      esac
    done
  done
  note "sanitize: $clean clean, $reported with sanitizer reports, $failed failed, $killed killed, $not_run not run"
  failures=$((failures + reported + failed + killed + not_run))
}

# bench NAME SECONDS BINARY ARGS...: one benchmark binary into bench-NAME.json and its console log.
bench() {
  local name=$1 seconds=$2 binary=$3 rc
  shift 3
  gpu_state "before bench-$name"
  run_limited "$seconds" "$work/bench-$name.txt" "$binary" --benchmark_out="$work/bench-$name.json" \
    --benchmark_out_format=json --benchmark_color=false --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true "$@"
  rc=$?
  gpu_state "after bench-$name"
  case $rc in
    0) note "bench-$name: done"; sed 's/\x1b\[[0-9;]*m//g' "$work/bench-$name.txt" | grep -E '^(ratio|geomean)' | sed "s/^/bench-$name: /" | tee -a "$summary" ;;
    77) note "bench-$name: SKIPPED: no CUDA device"; skips=$((skips + 1)) ;;
    137) note "bench-$name: KILLED after $seconds s (bench-$name.txt has what finished)"; failures=$((failures + 1)) ;;
    *) note "bench-$name: FAILED (exit $rc): $(tail -n 2 "$work/bench-$name.txt" | tr '\n' ' ')"; failures=$((failures + 1)) ;;
  esac
}

for step in "${expanded[@]}"; do
  step_start=$SECONDS
  echo "fp8lab: step $step" >&2
  case $step in
    env) step_env ;;
    tests) step_tests ;;
    sanitize) step_sanitize ;;
    # Minimum times per repetition: M = 128 kernels take tens of microseconds, and each timed
    # iteration also flushes L2, so the default 0.5 s made that step 200 s (2026-11-26).
    bench-quantize) bench quantize 120 "$here/bin/fp8lab_bench_quantize_cuda" --benchmark_repetitions=5 --benchmark_min_time=0.2 ;;
    bench-gemm-128) bench gemm-128 180 "$here/bin/fp8lab_bench_gemm_cuda" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_filter=/128x ;;
    bench-gemm-4096) bench gemm-4096 180 "$here/bin/fp8lab_bench_gemm_cuda" --benchmark_repetitions=3 --benchmark_min_time=0.2 --benchmark_filter=/4096x ;;
    bench-grouped) bench grouped 90 "$here/bin/fp8lab_bench_gemm_grouped_cuda" --benchmark_repetitions=3 --benchmark_min_time=0.2 ;;
    bench-gemm-headline) bench gemm-headline 150 "$here/bin/fp8lab_bench_gemm_cuda" --benchmark_repetitions=3 --benchmark_filter=x7168x16384 ;;
    bench-unscale) bench unscale 60 "$here/bin/fp8lab_bench_check_finite_and_unscale_cuda" --benchmark_repetitions=5 ;;
  esac
  note "step $step: $((SECONDS - step_start)) s"
  pack
done
echo "----- summary ($out/$archive_name)"
cat "$summary"
rm -rf "$work"
((failures)) && exit 1
((skips)) && exit 77
exit 0
