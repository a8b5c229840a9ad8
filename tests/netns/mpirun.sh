#!/usr/bin/env bash
# The seed's MPI pattern across two netns hosts, 2 ranks per host, launched from host 1 by
#   openmpi: mpirun with an rsh agent that runs orted inside the other namespace (netns-ssh);
#   mpich:   mpiexec.hydra -launcher ssh -launcher-exec netns-ssh.
# Checks what every rank's HcclHostGetLaunchInfo says (launcher, rank, local rank, host), that
# HcclCommInitRootInfo succeeds across hosts (root info by MPI_Bcast), and the AllReduce values
# (--ops-optional as in job_check). Skips (77) when that MPI is not installed.
#
# With Open MPI also job_check (no MPI in it): HcclHostBroadcastRootInfo through mpirun's PMIx.
#
# usage: mpirun.sh openmpi|mpich BUILD_DIR SOURCE_DIR JOB_CHECK [--ops-optional]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: network-namespace tests need root"; exit 77; }
  case "${1:-}" in
    openmpi) command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null ||
               { echo "SKIP: Open MPI (mpicc.openmpi, mpirun.openmpi) not installed"; exit 77; } ;;
    mpich) command -v mpicc.mpich >/dev/null && command -v mpiexec.hydra >/dev/null ||
             { echo "SKIP: MPICH (mpicc.mpich, mpiexec.hydra) not installed"; exit 77; } ;;
    *) fail "usage: mpirun.sh openmpi|mpich BUILD_DIR SOURCE_DIR JOB_CHECK [--ops-optional]" ;;
  esac
  exec "$here/cluster.sh" run --hosts 2 --timeout 150 -- "$0" --inside "$@"
fi
shift
impl=$1 build=$2 src=$3 job_check=$4 ops=${5:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"mpicc.$impl" -std=c11 -Wall -Werror -I"$src/include" -o "$scratch/mpi_job" "$here/mpi_job.c" -L"$build" -lhccl \
  -lascendcl -Wl,-rpath,"$build"
h1=$("$HC_CLUSTER_SH" ns 1) h2=$("$HC_CLUSTER_SH" ns 2)
if [ "$impl" = openmpi ]; then
  launch=(mpirun.openmpi --allow-run-as-root --oversubscribe -H "$h1:2,$h2:2" -np 4 --mca plm_rsh_agent "$here/netns-ssh")
  launcher=openmpi
else
  launch=(mpiexec.hydra -launcher ssh -launcher-exec "$here/netns-ssh" -hosts "$h1:2,$h2:2" -n 4)
  launcher=pmi
fi
out=$("$HC_CLUSTER_SH" exec 1 timeout 120 "${launch[@]}" "$scratch/mpi_job" $ops 2>&1) || { echo "$out"; fail "$impl's launcher failed"; }
echo "$out"
for r in 0 1 2 3; do
  host=$h1; [ $r -lt 2 ] || host=$h2
  grep -q "mpi_job: rank $r of 4 on $host: launch info rank $r of 4, local $((r % 2)) of 2, launcher $launcher" <<<"$out" ||
    fail "rank $r: wrong host or launch info"
done
[ "$(grep -c 'communicator of 4 ranks' <<<"$out")" -eq 4 ] || fail "HcclCommInitRootInfo did not succeed on every rank"
ok=$(grep -c -E 'allreduce (verified|not supported across these hosts)' <<<"$out" || true)
[ "$ok" -eq 4 ] || fail "expected 4 AllReduces verified or tolerated, got $ok"
if [ "$impl" = openmpi ]; then
  # Without MPI in the program: HcclHostBroadcastRootInfo through mpirun's PMIx server.
  out=$("$HC_CLUSTER_SH" exec 1 timeout 120 "${launch[@]}" -x ASCEND_GLOBAL_LOG_LEVEL=1 "$job_check" launch $ops 2>&1) ||
    { echo "$out"; fail "job_check under mpirun failed"; }
  echo "$out" | grep -v ' info: '
  [ "$(grep -c 'PMIx: connected as rank' <<<"$out")" -eq 4 ] || fail "not every rank reached mpirun's PMIx server"
  [ "$(grep -c 'communicator [01] of 4 ranks' <<<"$out")" -eq 8 ] || fail "HcclHostBroadcastRootInfo over PMIx failed"
fi
echo "$impl across 2 netns hosts: passed"
