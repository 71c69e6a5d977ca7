#!/usr/bin/env bash
# The dependency direction of DESIGN.md section 1, checked on the sources: reference/ includes no
# project code but its own; kernels/ includes nothing from data/ or harness/ (the harness fills
# the engine's structs from files); data/ includes nothing from harness/. A violation prints the
# offending lines and fails.
# Usage: include_direction_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
status=0
check() {  # check FOLDER PATTERN WHY
  local hits
  hits=$(grep -rnE --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' "#include \"($2)/" "$1" || true)
  if [[ -n $hits ]]; then
    echo "FAIL: $1 includes $2 ($3):"
    echo "$hits"
    status=1
  fi
}
check reference 'kernels|harness|data' "a reference that shares code with what it checks cannot catch their common bug"
check kernels 'data|harness' "kernels are below data and the harness"
check data 'harness' "nothing depends on the harness"
[[ $status == 0 ]] && echo "PASS: include direction"
exit $status
