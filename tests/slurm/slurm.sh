#!/usr/bin/env bash
# Slurm for real (tests/slurm/cluster.sh starts a one-node cluster of its own): HcclHostGetLaunchInfo
# and HcclHostBroadcastRootInfo under srun with no MPI (the one-node store), under srun --mpi=pmix
# (PMIx), in a batch script (not a task) and in a step of an allocation with --ntasks-per-node=8
# (the step's local size), hccl-run inside and outside srun (the launcher that started the process
# wins), and a step whose rank 0 never serves (the others fail within HCCL_CONNECT_TIMEOUT).
#
# usage: slurm.sh JOB_CHECK HCCL_RUN
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  exec "$here/cluster.sh" run --timeout 240 -- "$0" --inside "$@"
fi
shift
job_check=$1 hccl_run=$2
work=$HC_SLURM_DIR
# Sanitizer builds: libpmix keeps some of PMIx_Init's allocations until exit; not ours to report.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp"

# expect_ranks OUT N LAUNCHER LOCAL: N ranks of LAUNCHER, rank r local r % LOCAL of LOCAL, each with
# two communicators of N ranks and verified AllReduces.
expect_ranks() {
  local out=$1 n=$2 launcher=$3 local_size=$4 r
  for ((r = 0; r < n; r++)); do
    grep -q "job_check: rank $r of $n, local $((r % local_size)) of $local_size, launcher $launcher," <<<"$out" ||
      fail "rank $r: not rank $r of $n (local $((r % local_size)) of $local_size, $launcher)"
  done
  [ "$(grep -c "communicator [01] of $n ranks" <<<"$out")" -eq $((2 * n)) ] || fail "not every rank built 2 communicators"
  [ "$(grep -c 'allreduce verified' <<<"$out")" -eq $((2 * n)) ] || fail "not every AllReduce verified"
}

echo "== srun -n 4 (no MPI): the one-node store"
out=$(ASCEND_GLOBAL_LOG_LEVEL=1 srun -n 4 "$job_check" launch 2>&1) || { echo "$out"; fail "srun -n 4 failed"; }
echo "$out" | grep -v ' info: '
expect_ranks "$out" 4 slurm 4
grep -q "slurm-local store: serving" <<<"$out" || fail "rank 0 did not serve the one-node store"

echo "== srun --mpi=pmix -n 4: PMIx"
out=$(ASCEND_GLOBAL_LOG_LEVEL=1 srun --mpi=pmix -n 4 "$job_check" launch 2>&1) ||
  { echo "$out"; fail "srun --mpi=pmix failed"; }
echo "$out" | grep -v ' info: '
expect_ranks "$out" 4 slurm 4
[ "$(grep -c 'PMIx: connected as rank' <<<"$out")" -eq 4 ] || fail "not every rank used PMIx"
! grep -q "slurm-local store" <<<"$out" || fail "PMIx was offered but the one-node store was used"

echo "== sbatch -n 8 --ntasks-per-node=8: the batch script is rank 0 of 1; srun -n 4 in it has 4 local ranks"
printf '#!/bin/sh\n"%s" launch\necho "--- step"\nsrun -n 4 "%s" launch\n' "$job_check" "$job_check" >"$work/batch.sh"
chmod +x "$work/batch.sh"
sbatch -W -n 8 --ntasks-per-node=8 -o "$work/batch.out" "$work/batch.sh" >/dev/null ||
  { cat "$work/batch.out"; fail "the batch job failed"; }
out=$(cat "$work/batch.out")
echo "$out"
grep -q "job_check: rank 0 of 1, local 0 of 1, launcher none," <<<"${out%%--- step*}" ||
  fail "the batch script took itself for a task"
expect_ranks "${out#*--- step}" 4 slurm 4

echo "== srun -n 1 hccl-run -n 2: hccl-run's ranks"
out=$(srun -n 1 "$hccl_run" -n 2 "$job_check" launch 2>&1) || { echo "$out"; fail "hccl-run inside srun failed"; }
echo "$out"
expect_ranks "$out" 2 hccl-run 2

echo "== hccl-run -n 1 srun -n 4: srun's tasks"
out=$("$hccl_run" -n 1 srun -n 4 "$job_check" launch 2>&1) || { echo "$out"; fail "srun inside hccl-run failed"; }
echo "$out"
expect_ranks "$out" 4 slurm 4

echo "== srun -n 4 whose rank 0 never serves: the others fail within HCCL_CONNECT_TIMEOUT=3"
start=$(date +%s)
rc=0
out=$(HCCL_CONNECT_TIMEOUT=3 srun -n 4 sh -c "[ \$SLURM_PROCID != 0 ] || exit 3; exec \"$job_check\" launch" 2>&1) || rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "the step succeeded without rank 0"
[ "$(grep -c 'rank 0 of step .* did not serve .* within HCCL_CONNECT_TIMEOUT=3 s' <<<"$out")" -eq 3 ] ||
  fail "ranks 1-3 did not name rank 0's missing store"
[ $(($(date +%s) - start)) -lt 30 ] || fail "the failure took $(($(date +%s) - start)) s"
echo "Slurm: passed"
