#!/usr/bin/env bash
# Run one fault case and check what every rank reported.
# usage: run_fault.sh HCCL_RUN FAULT_CASE CASE NRANKS SEED "CODE:COUNT[,CODE:COUNT]" LOG_REGEX MIN_S MAX_S
# e.g. "HCCL_E_REMOTE:3": three ranks must print "SURVIVED HCCL_E_REMOTE" (CODE is an ERE).
#
# Time bounds: every rank's failing op must end within MAX_S seconds (the case's promise, times a
# margin that load cannot break, far below HCCL_EXEC_TIMEOUT), and an op that timed out must have
# waited at least MIN_S (its HCCL_EXEC_TIMEOUT). HcclCommDestroy after a failure returns at once:
# within DESTROY_MAX_S. The n-rank diagnosis is printed once, by rank 0 (the lowest live rank; rank
# 0 is never the culprit of a case).
set -u
hccl_run=$1 prog=$2 case=$3 n=$4 seed=$5 expect=$6 log_regex=$7 min_s=$8 max_s=$9
DESTROY_MAX_S=5
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# HC_FAULT_HOSTS (with HC_FAULT_AGENT, and HC_FAULT_EXEC in front of hccl-run): the ranks on several
# hosts (tests/netns/fault.sh).
launch=("$hccl_run" -n "$n")
if [ -n "${HC_FAULT_HOSTS:-}" ]; then
  read -ra exec_prefix <<< "${HC_FAULT_EXEC:-}"
  launch=("${exec_prefix[@]}" "$hccl_run" --hosts "$HC_FAULT_HOSTS" --agent "$HC_FAULT_AGENT")
fi
"${launch[@]}" --keep-going --timeout 80 "$prog" "$case" "$seed" > "$out" 2>&1 &
run_pid=$!
if [ "$case" = stop ] || [ "$case" = wrong-peer ]; then
  # The stopped rank waits for SIGCONT until the others have reported.
  for _ in $(seq 1 600); do
    [ "$(grep -c SURVIVED "$out")" -ge $((n - 1)) ] && break
    sleep 0.1
  done
  pkill -CONT -P "$run_pid"
fi
wait "$run_pid"
status=$?

fail=0
IFS=, read -ra pairs <<< "$expect"
for pair in "${pairs[@]}"; do
  code=${pair%%:*} want=${pair##*:}
  got=$(grep -cE "SURVIVED $code" "$out")
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $want rank(s) should report $code, $got did"; fail=1
  fi
done
if ! grep -Eq "$log_regex" "$out"; then echo "FAIL: no log line matches /$log_regex/"; fail=1; fi
if grep -q "LEAK" "$out"; then echo "FAIL: a rank leaked descriptors, threads or shared mappings"; fail=1; fi
if LC_ALL=C grep -q '[^[:print:][:space:]]' "$out"; then echo "FAIL: the output holds bytes that are not text"; fail=1; fi
# A still-waiting line is followed by the state of the rank it waits for.
if ! awk '/ still waiting after / { want = 1; next }
          want && !/^  rank [0-9]+ \(pid [0-9]+\): / { print "FAIL: no rank state after a still-waiting line: " $0; bad = 1 }
          { want = 0 } END { exit bad }' "$out"; then
  fail=1
fi
if ! awk -v max="$max_s" -v min="$min_s" '
    / SURVIVED HCCL_E_[A-Z_]+: .* after [0-9.]+ s$/ {
      t = $(NF - 1) + 0
      if (t > max) { print "FAIL: " $0 " (bound " max " s)"; bad = 1 }
      if ($0 ~ /HCCL_E_TIMEOUT/ && t < min) { print "FAIL: " $0 " (timed out before " min " s)"; bad = 1 }
    }
    / destroy took [0-9.]+ s$/ {
      t = $(NF - 1) + 0
      if (t > '"$DESTROY_MAX_S"') { print "FAIL: " $0 " (bound '"$DESTROY_MAX_S"' s)"; bad = 1 }
    }
    END { exit bad }' "$out"; then
  fail=1
fi
diagnoses=$(grep -c "error: diagnosis of" "$out")
if [ "$diagnoses" -ne 1 ] || ! grep -q "^hostccl\[rank 0 [^]]*\] error: diagnosis of" "$out"; then
  echo "FAIL: the n-rank diagnosis should be printed once, by rank 0 ($diagnoses printed)"; fail=1
fi
# The every-rank view of a still-waiting report comes from the lowest rank inside an op at that
# moment: in wrong-peer that is rank 0 throughout (elsewhere a lower rank may be between two ops).
if [ "$case" = wrong-peer ] && grep "warning: every rank while" "$out" | grep -vq "^hostccl\[rank 0 "; then
  echo "FAIL: a rank other than the lowest waiting one printed the every-rank view"; fail=1
fi
if [ "$fail" -ne 0 ] || [ -n "${VERBOSE:-}" ]; then
  echo "--- output (hccl-run status $status) ---"; cat "$out"
fi
exit "$fail"
