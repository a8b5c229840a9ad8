#!/usr/bin/env bash
# A rank-table job on two netns hosts (2 ranks each): every rank calls HcclCommInitClusterInfo on
# a table whose servers are the two hosts (device_ip = the host's address), rank 0 serves the
# rendezvous on host 1 at 60000 + device_id. Checks that all four build two communicators of 4
# ranks, that ranks 0-1 and 2-3 really run on different hosts, and the AllReduce's values (with
# --ops-optional, HCCL_E_NOT_SUPPORT across hosts is tolerated: builds without src/net).
#
# usage: rank_table.sh JOB_CHECK [--ops-optional]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  exec "$here/cluster.sh" run --hosts 2 --timeout 100 -- "$0" --inside "$@"
fi
shift
job_check=$1 ops=${2:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
read -r a1 a2 <<<"$HC_CLUSTER_ADDRS"
cat >"$scratch/table.json" <<JSON
{
  "status": "completed",
  "version": "1.0",
  "server_count": "2",
  "server_list": [
    {"server_id": "$("$HC_CLUSTER_SH" ns 1)", "device": [
      {"device_id": "0", "device_ip": "$a1", "rank_id": "0"},
      {"device_id": "1", "device_ip": "$a1", "rank_id": "1"}]},
    {"server_id": "$("$HC_CLUSTER_SH" ns 2)", "device": [
      {"device_id": "0", "device_ip": "$a2", "rank_id": "2"},
      {"device_id": "1", "device_ip": "$a2", "rank_id": "3"}]}
  ]
}
JSON
pids=()
for r in 0 1 2 3; do
  HCCL_CONNECT_TIMEOUT=30 "$HC_CLUSTER_SH" exec $((r / 2 + 1)) "$job_check" rank-table "$scratch/table.json" $r $ops \
    >"$scratch/out.$r" 2>&1 &
  pids+=($!)
done
status=0
for r in 0 1 2 3; do wait "${pids[$r]}" || { echo "rank $r exited with $?"; status=1; }; done
cat "$scratch"/out.*
[ $status -eq 0 ] || fail "a rank failed"
[ "$(cat "$scratch"/out.* | grep -c 'communicator [01] of 4 ranks')" -eq 8 ] || fail "expected 2 communicators of 4 ranks on each rank"
ns() { awk '/netns/ { print $NF; exit }' "$scratch/out.$1"; }
[ "$(ns 0)" = "$(ns 1)" ] && [ "$(ns 2)" = "$(ns 3)" ] && [ "$(ns 0)" != "$(ns 2)" ] || fail "ranks are not on the hosts the table says"
verified=$(cat "$scratch"/out.* | grep -c 'allreduce verified' || true)
tolerated=$(cat "$scratch"/out.* | grep -c 'allreduce not supported across these hosts' || true)
[ $((verified + tolerated)) -eq 8 ] || fail "expected 8 AllReduces verified (or tolerated), got $verified + $tolerated"
echo "rank-table job on 2 netns hosts x 2 ranks: passed ($verified AllReduces verified, $tolerated tolerated as not supported)"
