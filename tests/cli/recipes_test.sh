#!/usr/bin/env bash
# Every recipe a user can name, as a user meets them: `fp8lab recipes` lists the built-in ones and
# every shipped file (experiments/recipes/, seed/ included) with a one-line description; an
# unknown --recipe is one line naming them all and how to name a file, with one program name; a
# shipped file's bare name trains; the README's table of the three GEMMs is --markdown's output.
# Usage: recipes_test.sh PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
case_name=recipes
fp8lab=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

expect_exit 0 "$fp8lab" recipes
listing=$work/listing
cp "$work/out" "$listing"
for name in fp64 fp32 bf16 fp16 deepseek_v3 hybrid fp8_delayed; do
  grep -qE "^$name +\(built in\) [A-Za-z]" "$listing" || fail "no built-in line for $name: $(cat "$listing")"
done
count=0
while IFS= read -r file; do
  name=${file#"$source_dir/experiments/recipes/"}
  name=${name%.toml}
  count=$((count + 1))
  grep -qE "^$name +[A-Za-z(]" "$listing" || fail "$file is not listed as $name"
  grep -qE "^$name +\(does not parse" "$listing" && fail "$name does not parse: $(grep "^$name " "$listing")"
  case $name in deepseek_v3 | hybrid | fp8_delayed) ;;  # the built-ins written out: listed once
    *) grep -qE "^$name +\(built in\)" "$listing" && fail "$name listed as built in" ;;
  esac
done < <(find "$source_dir/experiments/recipes" -name '*.toml' | sort)
((count >= 20)) || fail "only $count recipe files found"

# An unknown name: every name in one line, how to name a file, one program name.
expect_one_line_error "fp8lab train: --recipe: recipe 'nosuch' is not one of" "$fp8lab" train --recipe nosuch \
  -o "$work/out.h5" --quiet
for fragment in mxfp8 nvfp4 fp8_tensor deepseek_v3_b200_accum seed/dp4 "path/to/recipe.toml" "fp8lab recipes"; do
  grep -qF -- "$fragment" "$work/err" || fail "the unknown-recipe line lacks '$fragment': $(cat "$work/err")"
done
grep -q "fp8lab: fp8lab" "$work/err" && fail "a doubled program name: $(cat "$work/err")"
[[ ! -e "$work/out.h5" ]] || fail "a results file was written for an unknown recipe"
expect_one_line_error "fp8lab: " "$fp8lab" quantize "$work/missing.npy"
grep -q "fp8lab: fp8lab" "$work/err" && fail "a doubled program name: $(cat "$work/err")"
expect_exit 0 "$fp8lab" train --help
grep -q "fp8lab recipes" "$work/out" || fail "train --help does not point at 'fp8lab recipes'"

# A shipped file by its bare name, as the path names it: the same run.
expect_exit 0 "$fp8lab" train --recipe mxfp8 --init stories260K --tokens sampled --sample-tokens 1024 --batch 1 \
  --seq-len 16 --steps 2 -o "$work/by_name.h5" --quiet
expect_exit 0 "$fp8lab" train --recipe "$source_dir/experiments/recipes/mxfp8.toml" --init stories260K --tokens sampled \
  --sample-tokens 1024 --batch 1 --seq-len 16 --steps 2 -o "$work/by_path.h5" --quiet
"$py" - "$work/by_name.h5" "$work/by_path.h5" <<'PY' || fail "the bare name and the path trained differently"
import sys, h5py, numpy as np
a, b = (np.asarray(h5py.File(f, "r")["train_loss"]) for f in sys.argv[1:])
assert np.array_equal(a, b), (a, b)
PY
expect_exit 0 "$fp8lab" recipes --show mxfp8
grep -q "^  fprop  fp8 e4m3 A tile:1x32 B tile:1x32 scale mx:rceil accum b200" "$work/out" || fail "--show mxfp8: $(cat "$work/out")"

# The documented table is the tool's.
expect_exit 0 "$fp8lab" recipes --markdown
"$py" - "$source_dir/harness/python/README.md" "$work/out" <<'PY' || fail "harness/python/README.md's recipe table is not 'fp8lab recipes --markdown' (regenerate it)"
import sys
readme, table = open(sys.argv[1]).read(), open(sys.argv[2]).read().strip()
begin, end = "<!-- recipes table: fp8lab recipes --markdown -->\n", "\n<!-- end of recipes table -->"
documented = readme[readme.index(begin) + len(begin):readme.index(end)].strip()
assert documented == table, "differs"
PY
echo "PASS [recipes]"
