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
