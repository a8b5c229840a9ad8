#!/usr/bin/env bash
# Checks of the perf tools beyond "every row says success" (docs/perf-tools.md):
#   perf_cli.sh MODE HCCL_RUN TOOL_DIR
# MODE json: --json parses and has one row per size, the table's sizes in the table's order;
#      plot: --plot writes a well-formed SVG, even when nothing is plottable;
#      usage: bad flags exit 2 with the usage on stderr, -h exits 0 with it on stdout;
#      corrupt: a result corrupted on one rank (HOSTCCL_PERF_CORRUPT) is reported failed, exit != 0;
#      mpi: one tool under mpirun without hccl-run's store (exit 77, skipped, without Open MPI or
#           without an MPI build of the tools);
#      profile: HCCL_TEST_PROFILING=1 leaves one Chrome trace per rank in HCCL_TEST_PROFILING_PATH,
#           every timed allreduce in it; a value other than 0 or 1 is refused.
#      mpi-mismatch: two ranks started as another MPI's launcher would (MPICH's PMI_RANK/PMI_SIZE,
#           no store) fail at once on both ranks, naming the MPI the tools were built with (77
#           without an MPI build).
#      outputs: --json/--plot to a place that cannot be written, or --plot to a non-SVG name, is
#           refused before the sweep (exit 2), leaving no file behind.
set -uo pipefail
mode=$1
run=$2
tools=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

check_json() {
  "$run" -n 2 --timeout 60 "$tools/all_gather_test" -b 8 -e 1M -f 4 -n 5 -w 1 --json "$scratch/r.json" \
    >"$scratch/table.txt" || fail "all_gather_test exited $?"
  cat "$scratch/table.txt"
  /usr/bin/python3 -m json.tool "$scratch/r.json" >/dev/null || fail "--json output does not parse"
  /usr/bin/python3 - "$scratch/r.json" "$scratch/table.txt" <<'EOF' || fail "--json rows do not match the table"
import json, sys
doc = json.load(open(sys.argv[1]))
table = [line.split("|") for line in open(sys.argv[2]) if "|" in line and not line.startswith("data_size")]
rows = doc["rows"]
assert doc["collective"] == "all_gather" and doc["ranks"] == 2, doc
assert len(rows) == 9 == len(table), (len(rows), len(table))
for row, cols in zip(rows, table):
    assert row["data_size"] == int(cols[0]), (row, cols)
    assert row["check_result"] == cols[3].strip() == "success", (row, cols)
    assert row["aveg_time_us"] > 0 and row["alg_bandwidth_gbs"] >= 0, row
    assert abs(row["bus_bandwidth_gbs"] - row["alg_bandwidth_gbs"] / 2) < 1e-5, row
sizes = [row["data_size"] for row in rows]
assert sizes == sorted(set(sizes)), sizes
EOF
}

well_formed_svg() {
  if command -v xmllint >/dev/null; then
    xmllint --noout "$1" || fail "$1 is not well-formed XML"
  fi
  [ "$(head -c 4 "$1")" = "<svg" ] || fail "$1 does not start with <svg"
  [ "$(tail -n 1 "$1")" = "</svg>" ] || fail "$1 does not end with </svg>"
}

check_plot() {
  "$run" -n 3 --timeout 60 "$tools/reduce_scatter_test" -b 8 -e 1M -f 4 -n 5 -w 1 --plot "$scratch/p.svg" \
    || fail "reduce_scatter_test exited $?"
  well_formed_svg "$scratch/p.svg"
  grep -q "<polyline" "$scratch/p.svg" || fail "no series drawn"
  # Size 0 only: nothing a log axis can show, still a well-formed chart.
  "$run" -n 2 --timeout 60 "$tools/broadcast_test" -b 0 -e 0 -n 2 -w 0 --plot "$scratch/empty.svg" \
    || fail "broadcast_test -b 0 exited $?"
  well_formed_svg "$scratch/empty.svg"
}

# expect_usage STATUS CMD...: CMD exits STATUS and prints the usage.
expect_usage() {
  local want=$1 status
  shift
  "$@" >"$scratch/out" 2>"$scratch/err"
  status=$?
  [ "$status" -eq "$want" ] || { cat "$scratch/out" "$scratch/err"; fail "$* exited $status, not $want"; }
  grep -q "USAGE" "$scratch/out" "$scratch/err" || fail "$* printed no usage"
}

check_usage() {
  local bad
  # Under hccl-run, so that rank 0's message must survive the other ranks' exits.
  expect_usage 2 "$run" -n 2 --timeout 60 "$tools/all_reduce_test" -x
  expect_usage 2 "$run" -n 3 --timeout 60 "$tools/scatter_test" -r 3
  expect_usage 2 "$run" -n 2 --timeout 60 "$tools/send_recv_test" -p 100000
  for bad in "--bogus" "-b 1Q" "-b" "-b 16 -e 8" "-d fp8" "-o avg" "-c 2" "-f 1" "-n 0" "-w x" "-r 1" "-p 0" \
    "-z 2" "extra"; do
    # shellcheck disable=SC2086
    expect_usage 2 "$tools/all_reduce_test" $bad
  done
  expect_usage 0 "$tools/alltoall_test" -h
  grep -q "USAGE" "$scratch/out" || fail "-h printed the usage to stderr"
}

check_corrupt() {
  local status
  HOSTCCL_PERF_CORRUPT=1 "$run" -n 2 --timeout 60 "$tools/all_reduce_test" -b 8 -e 256K -f 8 -n 2 -w 1 \
    --json "$scratch/c.json" >"$scratch/out"
  status=$?
  cat "$scratch/out"
  [ "$status" -ne 0 ] || fail "a corrupted result exited 0"
  [ "$(grep -c '| failed' "$scratch/out")" -eq 6 ] || fail "not every row says failed"
  grep -q '"failed"' "$scratch/c.json" || fail "the JSON does not say failed"
  # Only the root checks a reduce: corrupt it, on a rank other than 0.
  HOSTCCL_PERF_CORRUPT=2 "$run" -n 3 --timeout 60 "$tools/reduce_test" -r 2 -d bfp16 -o prod -b 8 -e 64 -f 8 \
    -n 2 -w 1 >"$scratch/out"
  status=$?
  cat "$scratch/out"
  [ "$status" -ne 0 ] || fail "a corrupted reduce exited 0"
  grep -q '| failed' "$scratch/out" || fail "the corrupted reduce is not reported"
}

check_mpi() {
  local root_flags=() status
  command -v mpirun >/dev/null || { echo "mpirun not installed: skipped"; exit 77; }
  [ "$(id -u)" -eq 0 ] && root_flags=(--allow-run-as-root)
  # Open MPI's own allocations outlive MPI_Finalize; in a SANITIZE=address build LeakSanitizer
  # would fail the job for them (its reports point into Open MPI's dlopen'ed components).
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  env -u HOSTCCL_STORE -u HOSTCCL_STORE_TOKEN -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE \
    timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np 2 --mca btl self,vader \
    "$tools/all_reduce_test" -b 8 -e 1M -f 4 -n 5 -w 1 >"$scratch/out" 2>&1
  status=$?
  cat "$scratch/out"
  grep -q "built without MPI" "$scratch/out" && { echo "tools built without MPI: skipped"; exit 77; }
  [ "$status" -eq 0 ] || fail "mpirun exited $status"
  [ "$(grep -c '| success' "$scratch/out")" -eq 9 ] || fail "not 9 successful rows"
  grep -q "launcher openmpi" "$scratch/out" || fail "not started as an Open MPI job"
}

check_profile() {
  HCCL_TEST_PROFILING=1 HCCL_TEST_PROFILING_PATH="$scratch/prof" \
    "$run" -n 2 --timeout 60 "$tools/all_reduce_test" -b 8 -e 64K -f 8 -n 5 -w 1 >"$scratch/out" ||
    fail "all_reduce_test with profiling exited $?"
  local traces=("$scratch"/prof/hostccl_trace_*.json)
  [ "${#traces[@]}" -eq 2 ] || fail "expected 2 traces, found ${#traces[@]}"
  for t in "${traces[@]}"; do
    # 5 sizes (8 B .. 32 KiB), each at least 5 timed iterations
    [ "$(grep -o '"name":"allreduce","cat":"hccl"' "$t" | wc -l)" -ge 25 ] || fail "$t misses allreduces"
    grep -q '"bytes":32768' "$t" || fail "$t has no 32 KiB allreduce"
    grep -q '"dropped_events":0' <<<"$(tail -c 200 "$t")" || fail "$t is cut short"
  done
  if HCCL_TEST_PROFILING=2 "$run" -n 1 --timeout 60 "$tools/all_reduce_test" -b 8 -e 8 >"$scratch/out" 2>&1; then
    fail "HCCL_TEST_PROFILING=2 was accepted"
  fi
  grep -q "HCCL_TEST_PROFILING must be 0 or 1" "$scratch/out" || fail "no message for HCCL_TEST_PROFILING=2"
}

check_mpi_mismatch() {
  local start elapsed pids=() status=() r
  start=$(date +%s%N)
  for r in 0 1; do
    env -u HOSTCCL_STORE -u HOSTCCL_STORE_TOKEN -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE \
      -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE PMI_RANK=$r PMI_SIZE=2 HCCL_CONNECT_TIMEOUT=120 \
      timeout 100 "$tools/all_reduce_test" -b 8 -e 64 >"$scratch/out$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}"
    status+=($?)
  done
  elapsed=$((($(date +%s%N) - start) / 1000000))
  cat "$scratch/out0" "$scratch/out1"
  grep -q "built without MPI" "$scratch/out0" && { echo "tools built without MPI: skipped"; exit 77; }
  for r in 0 1; do
    [ "${status[$r]}" -eq 1 ] || fail "rank $r exited ${status[$r]}, not 1"
    grep -q "rank $r: the launcher (pmi variables) describes 2 ranks, but MPI sees 1: this tool was built with" \
      "$scratch/out$r" || fail "rank $r did not say which MPI the tool was built for"
  done
  # At once (MPI_Init of a singleton, well under a second unloaded), not HCCL_CONNECT_TIMEOUT (120 s).
  [ "$elapsed" -lt 30000 ] || fail "took $elapsed ms"
}

check_outputs() {
  local bad
  expect_usage 2 "$tools/all_reduce_test" -b 8 -e 64 --json /nonexistent/dir/r.json
  grep -q -- "--json /nonexistent/dir/r.json: cannot write there" "$scratch/err" || fail "--json: no reason given"
  grep -q "data_size" "$scratch/out" && fail "--json: the sweep ran before the refusal"
  expect_usage 2 "$tools/all_reduce_test" -b 8 -e 64 --plot "$scratch/p.png"
  grep -q "draws SVG only" "$scratch/err" || fail "--plot x.png: no reason given"
  [ -e "$scratch/p.png" ] && fail "--plot x.png left a file"
  expect_usage 2 "$tools/all_reduce_test" -b 8 -e 64 --plot /nonexistent/p.svg
  # Under hccl-run too: rank 0 refuses, every rank stops.
  expect_usage 2 "$run" -n 2 --timeout 60 "$tools/all_gather_test" -b 8 -e 64 --json /nonexistent/dir/r.json
  # A writable place is not left with an empty file when the check creates it.
  "$tools/all_reduce_test" -b 8 -e 64 -n 1 -w 0 --json "$scratch/ok.json" >/dev/null || fail "a writable --json failed"
  /usr/bin/python3 -m json.tool "$scratch/ok.json" >/dev/null || fail "--json output does not parse"
}

case $mode in
mpi-mismatch) check_mpi_mismatch ;;
outputs) check_outputs ;;
json) check_json ;;
profile) check_profile ;;
plot) check_plot ;;
usage) check_usage ;;
corrupt) check_corrupt ;;
mpi) check_mpi ;;
*) fail "unknown mode $mode" ;;
esac
echo "perf_cli $mode: ok"
