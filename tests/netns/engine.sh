#!/usr/bin/env bash
# The inter-host engine on network-namespace hosts, jobs launched by hccl-run --hosts:
#  1. the collective matrix on 2 hosts x 2 ranks (every collective, dtype, op, small counts; one
#     large count), on 3 hosts x {1,2,1} (hosts of different sizes), and on 2 x 2 and 3 x 2 ranks
#     numbered across the hosts out of order;
#  2. sub-communicators across hosts: TP groups inside each host, PP groups across them;
#  3. with 1% packet loss on every link: the matrix still gives correct results;
#  4. a host's link taken down in the middle of a loop of AllReduces: every rank (on both sides)
#     fails within HOSTCCL_NET_TIMEOUT_S + 3 s (promise: HOSTCCL_NET_TIMEOUT_S), naming a rank;
#  5. a host killed (every process of it, kill -9) mid-op: every survivor fails within 3 s,
#     naming a rank of that host.
# Nothing may hang: every job runs under hccl-run --timeout.
#
# usage: engine.sh HCCL_RUN COLL_MATRIX SUBCOMM NET_FAULT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  # The first cluster's links are plain; sections 3-5 build their own (shaped, or to break).
  exec "$here/cluster.sh" run --hosts 3 --timeout 500 -- "$0" --inside "$@"
fi
shift
hccl_run=$1 matrix=$2 subcomm=$3 net_fault=$4
cl=$HC_CLUSTER_SH
h1=$("$cl" ns 1) h2=$("$cl" ns 2) h3=$("$cl" ns 3)
agent="ip netns exec {host}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# job HOSTLIST TIMEOUT PROGRAM ARGS...: run a job from host 1 (hccl-run there, as on a head node).
job() {
  local hosts=$1 timeout=$2
  shift 2
  "$cl" exec 1 "$hccl_run" --hosts "$hosts" --agent "$agent" --timeout "$timeout" "$@"
}

expect_matrix() { # OUTPUT NRANKS
  grep -q "coll_matrix: $2 ranks, [0-9]* cases, 0 failed" <<<"$1" || { echo "$1"; fail "matrix on $2 ranks"; }
}

# ---- 1 -------------------------------------------------------------------------------------------
# Two levels combine each host's ranks first (--order any: within a bound of the rank-order result);
# HCCL_DETERMINISTIC=true must give the rank-order bits, whatever the hosts.
out=$(job "$h1:2,$h2:2" 200 "$matrix" --counts 0,1,7,4097 --order any 2>&1) || { echo "$out"; fail "matrix 2 x 2"; }
expect_matrix "$out" 4
out=$(job "$h1:2,$h2:2" 200 "$matrix" --counts 1048579 --dtypes bf16,fp32 --ops sum --order any 2>&1) ||
  { echo "$out"; fail "large matrix 2 x 2"; }
expect_matrix "$out" 4
out=$(job "$h1:1,$h2:2,$h3:1" 200 "$matrix" --counts 0,1,7,4097 --dtypes int8,fp16,fp32,int64 --order any 2>&1) ||
  { echo "$out"; fail "matrix 3 x {1,2,1}"; }
expect_matrix "$out" 4
out=$(HCCL_DETERMINISTIC=true job "$h1:1,$h2:2,$h3:1" 200 "$matrix" --counts 1,4097 --dtypes fp16,bf16,fp32 \
  --colls allreduce,reduce,reducescatter 2>&1) || { echo "$out"; fail "deterministic matrix 3 x {1,2,1}"; }
expect_matrix "$out" 4
# Ranks of the hosts interleaved (a sub-communicator numbering them so): the two-level schedules
# address blocks by rank, and a slice's order need not be the hosts' order (0,3 | 1,2).
out=$(job "$h1:2,$h2:2" 200 "$matrix" --ranks 0,2,3,1 --counts 0,1,4097 --dtypes int8,fp32,bf16 --order any 2>&1) ||
  { echo "$out"; fail "matrix 2 x 2 interleaved"; }
expect_matrix "$out" 4
out=$(job "$h1:2,$h2:2,$h3:2" 200 "$matrix" --ranks 0,5,2,3,4,1 --counts 1,65541 --dtypes fp32,int32 --order any \
  2>&1) || { echo "$out"; fail "matrix 3 x 2 interleaved"; }
expect_matrix "$out" 6
echo "ok 1: the collective matrix on 2 x 2, 3 x {1,2,1} and interleaved ranks, rank-order bits with HCCL_DETERMINISTIC"

# ---- 2 -------------------------------------------------------------------------------------------
out=$(job "$h1:2,$h2:2" 120 "$subcomm" 2 2>&1) || { echo "$out"; fail "sub-communicators across hosts"; }
echo "ok 2: TP groups inside hosts, PP groups across them"

# ---- 3 -------------------------------------------------------------------------------------------
for h in 1 2; do "$cl" shape "$h" --loss 1%; done
out=$(job "$h1:1,$h2:1" 200 "$matrix" --counts 1,4097,65537 --dtypes fp32,int8 --ops sum,max --order any 2>&1) ||
  { echo "$out"; fail "matrix with 1% loss"; }
expect_matrix "$out" 2
for h in 1 2; do "$cl" shape "$h" clear; done
echo "ok 3: correct results with 1% packet loss on every link"

# ---- 4, 5: break something while 2 x 2 ranks run AllReduces ----------------------------------------
# run_and_break WHAT: starts the loop, waits until every rank runs, breaks host 2, prints the
# detection delay of every rank (seconds after the break) into $scratch/delays.
run_and_break() {
  local what=$1 log=$scratch/$1.log t0 pid
  job "$h1:2,$h2:2" 120 --keep-going "$net_fault" 60 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do [ "$(grep -c ': running' "$log")" -ge 4 ] && break; sleep 0.1; done
  [ "$(grep -c ': running' "$log")" -ge 4 ] || { cat "$log"; fail "$what: the job never ran"; }
  t0=$(date +%s.%N)
  case "$what" in
    down) "$cl" link 2 down ;;
    kill) ip netns pids "$h2" | xargs -r kill -9 ;;
  esac
  wait "$pid" || true
  awk -v t0="$t0" '/SURVIVED/ { printf "%s %s %s %.3f\n", $1, $2, $4, $NF - t0 }' "$log" > "$scratch/delays"
  cat "$scratch/delays"
  cp "$log" "$scratch/last.log"
}

# check_delays NRANKS BOUND_S REGEX
check_delays() {
  local n
  n=$(grep -c "HCCL_E_REMOTE" "$scratch/delays" || true)
  [ "$n" -ge "$1" ] || { cat "$scratch/last.log"; fail "$n of $1 ranks reported HCCL_E_REMOTE"; }
  awk -v bound="$2" '$4 > bound { bad = 1 } END { exit bad }' "$scratch/delays" ||
    { cat "$scratch/last.log"; fail "a rank took longer than $2 s to notice"; }
  grep -Eq "$3" "$scratch/last.log" || { cat "$scratch/last.log"; fail "no log line matches /$3/"; }
}

export HOSTCCL_NET_TIMEOUT_S=3
run_and_break down
check_delays 4 6 "broke \\((Connection timed out|No route to host)\\)"
"$cl" link 2 up
echo "ok 4: a link down: every rank failed within HOSTCCL_NET_TIMEOUT_S + 3 s, naming a rank"
run_and_break kill
check_delays 2 3 "connection to rank [23] .*broke"
echo "ok 5: a killed host: every survivor failed within 3 s, naming a rank of that host"
