# Shared by the CLI test scripts (sourced, after they set case_name and work).
py=/usr/bin/python3

fail() { echo "FAIL [$case_name]: $*" >&2; exit 1; }

# expect_exit CODE CMD...: runs CMD, output in $work/out and $work/err, checks the exit code.
expect_exit() {
  local want=$1; shift
  set +e; "$@" >"$work/out" 2>"$work/err"; local got=$?; set -e
  [[ $got == "$want" ]] || fail "exit $got, want $want: $* | stderr: $(tail -3 "$work/err")"
}

# expect_one_line_error FRAGMENT CMD...: exit 2, exactly one stderr line containing FRAGMENT.
expect_one_line_error() {
  local fragment=$1; shift
  expect_exit 2 "$@"
  [[ $(wc -l <"$work/err") == 1 ]] || fail "stderr is not one line: $(cat "$work/err")"
  grep -qF -- "$fragment" "$work/err" || fail "stderr lacks '$fragment': $(cat "$work/err")"
}

# write_study_spec FILE KIND AXES_AND_TABLES...: a spec of that kind, study name "t", whose [axes]
# table holds the rest (one argument may add lines and further tables).
write_study_spec() {
  local file=$1 kind=$2; shift 2
  printf '[study]\nname = "t"\nkind = "%s"\n[axes]\n%s\n' "$kind" "$*" >"$file"
}

# expect_spec_refused SPEC FRAGMENT...: `fp8lab run SPEC` exits 2 with one stderr line that names
# the spec file and holds every fragment, and writes no results file (needs $fp8lab).
expect_spec_refused() {
  local spec=$1; shift
  expect_one_line_error "$1" "$fp8lab" run "$spec" -o "$work/out.h5" --quiet
  for fragment in "$spec" "$@"; do
    grep -qF -- "$fragment" "$work/err" || fail "stderr lacks '$fragment': $(cat "$work/err")"
  done
  [[ ! -e "$work/out.h5" ]] || fail "a results file was written for a refused spec"
}

# wait_for_points FILE N: until the results file FILE holds at least N finished points (read
# while the sweep writes it, without file locking; a read that races a write is retried),
# at most 120 s. For tests that interrupt a sweep after a point count, not after a time.
wait_for_points() {
  HDF5_USE_FILE_LOCKING=FALSE "$py" - "$1" "$2" <<'PY'
import sys, time, h5py
path, want = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 120
while time.time() < deadline:
    try:
        with h5py.File(path, "r") as f:
            if f.attrs["points_done"] >= want:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.05)
sys.exit(1)
PY
}
