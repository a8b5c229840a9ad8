#!/usr/bin/env bash
# hccl-run --hosts on two netns hosts (hccl-run itself runs on host 1, as on a head node):
#  1. 2 x 2 ranks with --agent 'ip netns exec {host}': each rank has the right RANK, LOCAL_RANK,
#     WORLD_SIZE, LOCAL_WORLD_SIZE and runs on the right host; the store works across hosts
#     (HcclHostBroadcastRootInfo) and HcclCommInitRootInfo succeeds; AllReduce values (or, with
#     --ops-optional, HCCL_E_NOT_SUPPORT across hosts tolerated).
#  2. the default agent, ssh, played by a stand-in that behaves like ssh (a remote shell parses the
#     command line, the environment is the remote login's): arguments with spaces arrive intact,
#     HCCL_*/HOSTCCL_* and -x variables arrive, others do not.
#  3. a rank on host 2 fails: hccl-run exits with its status and nothing of the job is left on
#     either host within 5 s.
#  4. SIGINT to hccl-run, then SIGKILL to hccl-run: every rank on both hosts is gone within 5 s.
#
# usage: launch.sh HCCL_RUN JOB_CHECK [--ops-optional]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  exec "$here/cluster.sh" run --hosts 2 --timeout 200 -- "$0" --inside "$@"
fi
shift
hccl_run=$1 job_check=$2 ops=${3:-}
cl=$HC_CLUSTER_SH
h1=$("$cl" ns 1) h2=$("$cl" ns 2)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
agent="ip netns exec {host}"

# Processes left in the cluster's hosts (hccl-run and its ranks are the only ones we start there).
left_in_hosts() { ip netns pids "$h1"; ip netns pids "$h2"; }
# wait_gone SECONDS: until no process is left in either host.
wait_gone() {
  local t
  for ((t = 0; t < $1 * 10; t++)); do [ -z "$(left_in_hosts)" ] && return 0; sleep 0.1; done
  fail "processes still in the hosts after $1 s: $(left_in_hosts | tr '\n' ' ')"
}
wait_files() {
  local t
  for ((t = 0; t < 300; t++)); do [ "$(ls "$scratch"/ready.* 2>/dev/null | wc -l)" -ge "$1" ] && return 0; sleep 0.1; done
  fail "only $(ls "$scratch"/ready.* 2>/dev/null | wc -l) of $1 ranks started"
}

# ---- 1 -------------------------------------------------------------------------------------------
out=$("$cl" exec 1 "$hccl_run" --hosts "$h1:2,$h2:2" --agent "$agent" --timeout 90 "$job_check" launch $ops 2>&1) ||
  { echo "$out"; fail "the 2 x 2 job failed"; }
echo "$out"
ns1=$("$cl" exec 1 stat -L -c %i /proc/self/ns/net) ns2=$("$cl" exec 2 stat -L -c %i /proc/self/ns/net)
for r in 0 1 2 3; do
  ns=$ns1; [ $r -lt 2 ] || ns=$ns2
  grep -q "job_check: rank $r of 4, local $((r % 2)) of 2, launcher hccl-run, netns $ns\$" <<<"$out" ||
    fail "rank $r: wrong place or numbering (want local $((r % 2)) of 2 on netns $ns)"
done
[ "$(grep -c 'communicator [01] of 4 ranks' <<<"$out")" -eq 8 ] || fail "expected 2 communicators of 4 ranks per rank"
ok=$(grep -c -E 'allreduce (verified|not supported across these hosts)' <<<"$out" || true)
[ "$ok" -eq 8 ] || fail "expected 8 AllReduces verified or tolerated, got $ok"
wait_gone 5

# ---- 2: the default agent (ssh), played by a stand-in ---------------------------------------------
mkdir "$scratch/bin"
cat >"$scratch/bin/ssh" <<'EOF'
#!/bin/sh
# Like ssh: options, then the host, then words that the remote login shell parses as one command
# line, in the remote login's environment (not ours), in a process that is not a child of
# hccl-run's (it would not die with hccl-run), fed our standard input, passing its status back.
while [ $# -gt 0 ]; do case "$1" in -o) shift 2 ;; -*) shift ;; *) break ;; esac; done
host=$1; shift
exec 3<&0
setsid env --default-signal ip netns exec "$host" env -i PATH=/usr/bin:/bin HOME=/ sh -c "$*" <&3 3<&- &
exec 3<&-
wait $!
EOF
chmod +x "$scratch/bin/ssh"
out=$(PATH="$scratch/bin:$PATH" HCCL_CONNECT_TIMEOUT=77 HOSTCCL_MARK=m NOT_PASSED=n EXTRA=e \
      "$cl" exec 1 "$hccl_run" --hosts "$h1,$h2" -x EXTRA -x SET=s --timeout 60 -p \
      sh -c 'echo "args<$1><$2> $HCCL_CONNECT_TIMEOUT $HOSTCCL_MARK ${NOT_PASSED:-unset} $EXTRA $SET rank $RANK"' _ 'a b' "c'd" 2>&1) ||
  { echo "$out"; fail "the job over the ssh stand-in failed"; }
echo "$out"
for r in 0 1; do
  grep -qF "[$r] args<a b><c'd> 77 m unset e s rank $r" <<<"$out" || fail "rank $r did not get its arguments and environment intact"
done
wait_gone 5

# ---- 3: a rank on host 2 fails --------------------------------------------------------------------
rc=0
start=$(date +%s)
"$cl" exec 1 "$hccl_run" --hosts "$h1:2,$h2:2" --agent "$agent" --timeout 60 \
  sh -c 'if [ "$RANK" = 3 ]; then sleep 0.5; exit 3; fi; exec sleep 100' >"$scratch/out3" 2>&1 || rc=$?
cat "$scratch/out3"
[ $rc -eq 3 ] || fail "hccl-run exited $rc, not 3, when rank 3 failed"
grep -q "rank 3 (pid [0-9]*) exited with status 3" "$scratch/out3" || fail "rank 3's failure not reported"
wait_gone 5
[ $(($(date +%s) - start)) -lt 15 ] || fail "the job took too long to stop"

# ---- 4: SIGINT, then SIGKILL, to hccl-run: over ip netns exec (the nodes are hccl-run's children)
# and over the ssh stand-in (they are not: only the end of their control pipe can stop them) -------
for case in "INT $agent" "KILL $agent" "INT ssh" "KILL ssh"; do
  sig=${case%% *} via=${case#* }
  rm -f "$scratch"/ready.*
  # A background job of a script starts with SIGINT ignored, which the ranks would inherit.
  PATH="$scratch/bin:$PATH" "$cl" exec 1 env --default-signal=INT "$hccl_run" --hosts "$h1:2,$h2:2" \
    --agent "$via" --timeout 60 sh -c "touch $scratch/ready.\$RANK; exec sleep 100" >"$scratch/out4" 2>&1 &
  pid=$!
  wait_files 4
  kill -$sig "$pid"
  rc=0; wait "$pid" || rc=$?
  cat "$scratch/out4"
  [ $sig = KILL ] || [ $rc -eq 130 ] || fail "hccl-run exited $rc after SIGINT, not 130"
  wait_gone 5
  echo "SIG$sig to hccl-run, agent '$via': every rank on both hosts gone"
done
echo "hccl-run --hosts on 2 netns hosts: passed"
