#!/usr/bin/env bash
# Run one fault case and check what every rank reported.
# usage: run_fault.sh HCCL_RUN FAULT_CASE CASE NRANKS SEED "CODE:COUNT[,CODE:COUNT]" LOG_REGEX
# e.g. "HCCL_E_REMOTE:3": three ranks must print "SURVIVED HCCL_E_REMOTE" (CODE is an ERE).
set -u
hccl_run=$1 prog=$2 case=$3 n=$4 seed=$5 expect=$6 log_regex=$7
out=$(mktemp) shm_before=$(mktemp)
trap 'rm -f "$out" "$shm_before"' EXIT
# Only hostccl's own names count: other programs (an MPI job running beside the suite) may come
# and go in /dev/shm meanwhile. hostccl itself never names a segment (it uses memfds).
ours() { ls /dev/shm 2>/dev/null | grep -iE 'hccl|hostccl'; }
ours > "$shm_before"

"$hccl_run" -n "$n" --keep-going --timeout 60 "$prog" "$case" "$seed" > "$out" 2>&1 &
run_pid=$!
if [ "$case" = stop ]; then
  # The stopped rank waits for SIGCONT until the others have reported their timeout.
  for _ in $(seq 1 300); do
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
if grep -q "LEAK" "$out"; then echo "FAIL: a rank leaked descriptors or threads"; fail=1; fi
if ! diff -q "$shm_before" <(ours) > /dev/null; then
  echo "FAIL: files left in /dev/shm:"; diff "$shm_before" <(ours); fail=1
fi
if [ "$fail" -ne 0 ] || [ -n "${VERBOSE:-}" ]; then
  echo "--- output (hccl-run status $status) ---"; cat "$out"
fi
exit "$fail"
