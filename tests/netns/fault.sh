#!/usr/bin/env bash
# The fault suite's cases (tests/fault) with 4 ranks on 2 hosts x 2, where the collectives take two
# levels (shared memory inside the hosts, TCP between them): a mismatching call of rank 1 fails
# every rank on both hosts at once, naming the culprit; a rank killed mid-op fails every survivor
# within the bound; each under the same checks as on one host (run_fault.sh).
#
# usage: fault.sh RUN_FAULT HCCL_RUN FAULT_CASE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --inside ]; then
  exec "$here/cluster.sh" run --hosts 2 --timeout 400 -- "$0" --inside "$@"
fi
shift
run_fault=$1 hccl_run=$2 prog=$3
cl=$HC_CLUSTER_SH
export HC_FAULT_HOSTS="$("$cl" ns 1):2,$("$cl" ns 2):2" HC_FAULT_AGENT="ip netns exec {host}"
export HC_FAULT_EXEC="ip netns exec $("$cl" ns 1)"
export HCCL_EXEC_TIMEOUT=40 HOSTCCL_PEER_CHECK_MS=100 HOSTCCL_STILL_WAITING_S=1
failed=0

check() { # NAME ARGS...: run_fault.sh ARGS, one line per case
  local name=$1
  shift
  if out=$("$run_fault" "$hccl_run" "$prog" "$@" 2>&1); then
    echo "ok $name"
  else
    echo "$out"; echo "FAIL: $name"; failed=1
  fi
}

for kind in count dtype op root coll skip ag-count rs-count small-count small-root small-reduce small-coll; do
  check "mismatch.$kind" "$kind" 4 1 HCCL_E_PARA:4 "mismatch: rank [0-9]+ called" 0 10
done
# A killed rank: its host's ranks see its exit in shared memory, the other host's its sockets close.
for seed in 0 1 2; do
  check "kill.$seed" kill 4 "$seed" HCCL_E_REMOTE:3 "(exited while this rank waited|the rank exited)" 0 10
done
exit "$failed"
