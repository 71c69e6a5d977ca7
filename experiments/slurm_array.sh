#!/bin/bash
# One study split across a Slurm job array: array task I of N runs grid points I, I+N, I+2N, ...
# of the spec (fp8lab run --shard I/N) into its own shard file; experiments/slurm_merge.sh joins
# the shards afterwards. From the repository root:
#
#   jid=$(sbatch --parsable experiments/slurm_array.sh)            # 8 tasks, experiments/tile_size.toml
#   sbatch --dependency=afterok:"$jid" experiments/slurm_merge.sh   # runs once every task succeeded
#
# Change the split with --array=0-(N-1) on the sbatch line (it overrides the line below; any N
# works, with or without a %limit, but the indices must be 0 to N-1). Settings, from the
# environment of sbatch (which exports it to the job), the same for both scripts:
#   FP8LAB_SPEC     the study spec                        [experiments/tile_size.toml]
#   FP8LAB_OUT      directory of the shard and merged files [results]
#   FP8LAB          the fp8lab binary                     [build/cpu/harness/fp8lab, else fp8lab on PATH]
#   FP8LAB_BACKEND  cpu, cuda or auto (add --gpus=1 to sbatch for cuda) [auto]
# Relative paths are taken from the directory sbatch was run in. Task I writes
# FP8LAB_OUT/<spec stem>.shard-I-of-N.h5; the job logs go to results/slurm-<job>-<task>.out.
# A task whose shard file exists completes it (--resume): resubmitting the same array after a
# time limit or node failure computes only the missing points. Remove the shard files to start over.
#
#SBATCH --job-name=fp8lab-shard
#SBATCH --array=0-7
#SBATCH --cpus-per-task=16
#SBATCH --output=results/slurm-%x-%A_%a.out
set -euo pipefail

die() { echo "slurm_array.sh: $*" >&2; exit 2; }
[[ -n ${SLURM_ARRAY_TASK_ID:-} ]] ||
  die "not an array task: submit with sbatch (see experiments/README.md), not bash"
i=$SLURM_ARRAY_TASK_ID
n=$SLURM_ARRAY_TASK_COUNT
((SLURM_ARRAY_TASK_MIN == 0 && SLURM_ARRAY_TASK_MAX == n - 1)) ||
  die "--array must be 0-(N-1) with step 1 (every shard once); got $n tasks from $SLURM_ARRAY_TASK_MIN to $SLURM_ARRAY_TASK_MAX"

spec=${FP8LAB_SPEC:-experiments/tile_size.toml}
out_dir=${FP8LAB_OUT:-results}
fp8lab=${FP8LAB:-}
if [[ -z $fp8lab ]]; then
  if [[ -x build/cpu/harness/fp8lab ]]; then fp8lab=build/cpu/harness/fp8lab
  else fp8lab=$(command -v fp8lab) || die "no fp8lab: build it (cmake --preset cpu) or set FP8LAB"; fi
fi
[[ -f $spec ]] || die "$spec: no such spec (FP8LAB_SPEC, relative to $PWD)"

shard=$out_dir/$(basename "$spec" .toml).shard-$i-of-$n.h5
resume=()
[[ -e $shard ]] && resume=(--resume)
echo "slurm_array.sh: shard $i/$n of $spec on $(hostname) -> $shard${resume:+ (completing it)}" >&2
exec "$fp8lab" run "$spec" --shard "$i/$n" -o "$shard" "${resume[@]}" \
  --threads "${SLURM_CPUS_PER_TASK:-1}" --backend "${FP8LAB_BACKEND:-auto}"
