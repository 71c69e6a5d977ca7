#!/usr/bin/env bash
# The documented Slurm workflow on a real, single-node Slurm: this test starts munged, slurmctld
# and slurmd (Debian's slurm-wlm and munge; bash tests/cluster/install_slurm.sh) as root on
# 127.0.0.1, submits experiments/slurm_array.sh as a 3-task array and experiments/slurm_merge.sh
# as a job depending on it with the two sbatch commands of experiments/README.md (but --array=0-2
# --cpus-per-task=1), and checks that the merged file equals an unsharded run point for point.
# Usage: slurm_test.sh PATH/TO/fp8lab SOURCE_DIR
# Exits 77 (skipped) without root or without the Slurm and MUNGE programs.
#
# Everything lives in one temporary directory: the MUNGE key and socket, slurm.conf (SLURM_CONF),
# state, spool, logs and the job outputs. The daemons listen on 127.0.0.1 only, on ports free at
# the start, so the test neither needs nor touches /etc/slurm, /etc/munge or a Slurm already
# running on the machine. No cgroups: proctrack/linuxproc and task/none, so it runs in a container.
# Every daemon it started is stopped on exit, pass or fail.
set -euo pipefail
case_name=slurm_job_array
fp8lab=$(realpath "$1")
source_dir=$(realpath "$2")
spec=$source_dir/tests/notebook/default_small.toml   # 24 points (some skipped), about a second
study=default_small
shards=3

skip() { echo "SKIP [$case_name]: $*" >&2; exit 77; }
[[ $(id -u) == 0 ]] || skip "slurmd must run as root to start jobs, and this runs as $(id -un)"
for program in munged munge slurmctld slurmd sbatch squeue sinfo scancel; do
  command -v "$program" >/dev/null ||
    skip "$program is not installed (Debian packages slurm-wlm and munge: bash tests/cluster/install_slurm.sh)"
done

source "$source_dir/tests/cli/test_lib.sh"
"$py" -c "import h5py, numpy" 2>/dev/null || fail "$py lacks h5py/numpy (bash .ci/deps)"
# Nothing from a surrounding Slurm job (if ctest itself runs in one) may steer ours.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SQUEUE|SINFO|SCANCEL)_' || true)

pids=()       # daemons started here, stopped in reverse order on exit
names=()
jobs_ids=()   # jobs submitted here, cancelled on exit if still there
stop_all() {
  local rc=$?
  set +e
  if ((${#jobs_ids[@]})) && [[ -n $(squeue -h --jobs="$(IFS=,; echo "${jobs_ids[*]}")" 2>/dev/null) ]]; then
    scancel "${jobs_ids[@]}" 2>/dev/null
    for _ in {1..20}; do [[ -z $(squeue -h --jobs="$(IFS=,; echo "${jobs_ids[*]}")" 2>/dev/null) ]] && break; sleep 0.5; done
  fi
  # A job's slurmstepd (child of slurmd, then on its own) keeps a socket in the spool until it
  # has reported to slurmctld and exited; both daemons stay up until then.
  for _ in {1..60}; do compgen -G "$work/spool/localhost_*" >/dev/null || break; sleep 0.25; done
  local i pid
  for pid in $(pgrep -x slurmstepd); do   # any still there after 15 s (exited ones have no environ)
    { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=${SLURM_CONF:-}" || continue
    echo "[$case_name] slurmstepd $pid still running, killed" >&2
    kill -9 "$pid"
  done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill "$pid" 2>/dev/null || continue
    for _ in {1..40}; do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null && echo "[$case_name] ${names[i]} ($pid) ignored SIGTERM, killed" >&2
    wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
  exit "$rc"
}
work=$(mktemp -d)
trap stop_all EXIT
trap 'exit 130' INT TERM
chmod 711 "$work"   # munged wants every directory above its socket searchable by all
export SLURM_CONF=$work/slurm.conf

show_logs() {
  local f
  for f in "$work"/log/*.log "$work"/log/*.stderr "$work"/submit/results/*.out; do
    [[ -s $f ]] || continue
    # A daemon's stderr repeats its log file; shown only when that stayed empty (a startup error).
    [[ $f == *.stderr && -s ${f%.stderr}.log ]] && continue
    echo "----- ${f#"$work"/} (last 40 lines)" >&2
    tail -40 "$f" >&2
  done
}
fail_with_logs() { show_logs; fail "$@"; }

# start NAME ARGS...: runs a daemon in the foreground of a background job, output in log/NAME.stderr.
start() {
  local name=$1; shift
  "$@" >"$work/log/$name.stderr" 2>&1 &
  pids+=($!)
  names+=("$name")
}

# Two ports of 127.0.0.1 that nothing listens on now.
read -r ctld_port slurmd_port < <("$py" -c "
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(('127.0.0.1', 0))
print(*(s.getsockname()[1] for s in socks))")

mkdir -p "$work"/{log,state,spool,submit/results}
mkdir -m 700 "$work/munge-key"
mkdir -m 755 "$work/munge"
head -c 1024 /dev/urandom >"$work/munge-key/munge.key"
chmod 400 "$work/munge-key/munge.key"
socket=$work/munge/munge.socket
start munged munged --foreground --key-file="$work/munge-key/munge.key" --socket="$socket" \
  --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed"
for _ in {1..40}; do munge -S "$socket" -n 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1 && break; sleep 0.25; done
munge -S "$socket" -n 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1 || fail_with_logs "munged did not come up within 10 s"

: >"$work/plugstack.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=fp8labtest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
PlugStackConfig=$work/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
DependencyParameters=kill_invalid_depend
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
start slurmctld slurmctld -D
start slurmd slurmd -D -N localhost
started=$SECONDS
until [[ $(sinfo -h -n localhost -o %t 2>/dev/null) == idle ]]; do
  ((SECONDS - started < 60)) ||
    fail_with_logs "the node did not become idle within 60 s: sinfo says '$(sinfo -h -n localhost -o '%t %E' 2>&1)'"
  for i in "${!pids[@]}"; do
    kill -0 "${pids[i]}" 2>/dev/null || fail_with_logs "${names[i]} exited while Slurm was starting (its output is above)"
  done
  sleep 0.5
done
echo "[$case_name] Slurm up in $((SECONDS - started)) s (slurmctld :$ctld_port, slurmd :$slurmd_port, 127.0.0.1)"

# The README's two commands, from a directory standing in for the repository root.
cd "$work/submit"
export FP8LAB=$fp8lab FP8LAB_SPEC=$spec
array_id=$(sbatch --parsable --array=0-$((shards - 1)) --cpus-per-task=1 "$source_dir/experiments/slurm_array.sh") ||
  fail_with_logs "sbatch of the array failed"
jobs_ids+=("$array_id")
merge_id=$(sbatch --parsable --dependency=afterok:"$array_id" "$source_dir/experiments/slurm_merge.sh") ||
  fail_with_logs "sbatch of the merge job failed"
jobs_ids+=("$merge_id")

# The unsharded reference run, while the array waits for or uses the CPUs.
expect_exit 0 "$fp8lab" run "$spec" -o "$work/full.h5" --threads 1 --quiet

started=$SECONDS
while [[ -n $(squeue -h --jobs="$array_id,$merge_id") ]]; do
  ((SECONDS - started < 90)) ||
    fail_with_logs "the jobs did not finish within 90 s: $(squeue --jobs="$array_id,$merge_id" -t all -o '%i %T %r' 2>&1)"
  sleep 1
done
states=$(squeue -h --jobs="$array_id,$merge_id" -t all -o '%i=%T' | sort | paste -sd' ')
echo "[$case_name] jobs done in $((SECONDS - started)) s: $states"
[[ $(grep -o '=COMPLETED' <<<"$states" | wc -l) == $((shards + 1)) ]] ||
  fail_with_logs "not $shards array tasks and a merge job, all COMPLETED: $states"

for ((i = 0; i < shards; i++)); do
  [[ -f results/$study.shard-$i-of-$shards.h5 ]] || fail_with_logs "no shard file results/$study.shard-$i-of-$shards.h5"
done
[[ -f results/$study.h5 ]] || fail_with_logs "the merge job wrote no results/$study.h5"
grep -q "study $study, 24 points" results/slurm-fp8lab-merge-"$merge_id".out ||
  fail_with_logs "the merge job's log lacks its summary line"

# Point for point: the same grid, every variable equal but the timings.
"$py" - results/$study.h5 "$work/full.h5" <<'PY' || fail_with_logs "the merged file differs from the unsharded run"
import sys, h5py, numpy as np
merged, full = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert set(merged) == set(full), f"datasets differ: {sorted(set(merged) ^ set(full))}"
assert merged.attrs["complete"] == "true" and merged.attrs["points_done"] == 24, "not all 24 points merged"
assert merged["status"].size == 24 and (merged["status"][()] != b"").all()
for name in sorted(full):
    if name in ("seconds", "elapsed_seconds"): continue
    a, b = merged[name][()], full[name][()]
    same = np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else np.array_equal(a, b)
    assert same, f"{name}: merged {a} != unsharded {b}"
for attr in ("study_name", "spec_sha256", "backend", "operands"):
    assert merged.attrs[attr] == full.attrs[attr], attr
assert merged.attrs["merged_from"] == "3 shards"
PY
echo "PASS [$case_name]"
