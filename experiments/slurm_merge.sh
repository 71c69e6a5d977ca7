#!/bin/bash
# Joins the shard files of experiments/slurm_array.sh into FP8LAB_OUT/<spec stem>.h5 (fp8lab
# merge) and prints its report. Submit it as a job that waits for the array,
#
#   sbatch --dependency=afterok:"$jid" experiments/slurm_merge.sh
#
# or run it by hand once the array is done (bash experiments/slurm_merge.sh). It takes the same
# settings (FP8LAB_SPEC, FP8LAB_OUT, FP8LAB; see slurm_array.sh) and refuses unless the shards
# are exactly 0..N-1 of one N and the merged file does not exist yet.
#
#SBATCH --job-name=fp8lab-merge
#SBATCH --cpus-per-task=1
#SBATCH --output=results/slurm-%x-%j.out
set -euo pipefail

die() { echo "slurm_merge.sh: $*" >&2; exit 2; }
spec=${FP8LAB_SPEC:-experiments/tile_size.toml}
out_dir=${FP8LAB_OUT:-results}
fp8lab=${FP8LAB:-}
if [[ -z $fp8lab ]]; then
  if [[ -x build/cpu/harness/fp8lab ]]; then fp8lab=build/cpu/harness/fp8lab
  else fp8lab=$(command -v fp8lab) || die "no fp8lab: build it (cmake --preset cpu) or set FP8LAB"; fi
fi

stem=$out_dir/$(basename "$spec" .toml)
merged=$stem.h5
[[ ! -e $merged ]] || die "$merged exists; remove it to merge again"
shopt -s nullglob
found=("$stem".shard-*-of-*.h5)
((${#found[@]})) || die "no shard files $stem.shard-*-of-*.h5 (FP8LAB_SPEC, FP8LAB_OUT, relative to $PWD)"
splits=$(for f in "${found[@]}"; do n=${f##*-of-}; echo "${n%.h5}"; done | sort -u)
[[ $splits =~ ^[1-9][0-9]*$ ]] || die "the shard files in $out_dir are not of one split N (N = ${splits//$'\n'/ }); keep one"
n=$splits
shards=()
for ((i = 0; i < n; i++)); do
  [[ -f $stem.shard-$i-of-$n.h5 ]] || die "$stem.shard-$i-of-$n.h5 is missing (did every array task succeed?)"
  shards+=("$stem.shard-$i-of-$n.h5")
done

"$fp8lab" merge "$merged" "${shards[@]}"
"$fp8lab" report "$merged"
