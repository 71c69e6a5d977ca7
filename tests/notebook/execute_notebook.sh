# Sourced by the notebook tests: execute_notebook NOTEBOOK.ipynb WORK_DIR runs the notebook headless
# (jupyter nbconvert, Debian's python3 kernel; FP8LAB_* variables as the caller exported them),
# fails on a cell error or an error output, and prints the notebook's text output for the caller's
# checks. WORK_DIR receives the executed copy and the log.
execute_notebook() {
  local notebook=$1 work=$2 name
  name=$(basename "$notebook")
  rm -rf "$work/executed" && mkdir -p "$work/executed"
  jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 --output-dir "$work/executed" \
    "$notebook" >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "FAIL: $name did not run" >&2; return 1; }
  /usr/bin/python3 - "$work/executed/$name" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
errors = [o for o in outputs if o["output_type"] == "error"]
if errors:
    sys.exit(f"FAIL: the notebook has an error output: {errors[0]['ename']}: {errors[0]['evalue']}")
print("".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream"))
PY
}
