#!/usr/bin/env bash
# A rank-table job on this host: hccl-run starts N ranks that each call HcclCommInitClusterInfo
# on the same table (one server, loopback, a free port), build two communicators in a row from it
# and check an AllReduce's values. Then the token: a rank whose HOSTCCL_RANK_TABLE_SECRET differs
# is refused ("wrong token") and the others name it as missing, within HCCL_CONNECT_TIMEOUT.
set -euo pipefail
hccl_run=$1 job_check=$2 n=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
{
  printf '{"status": "completed", "version": "1.0", "server_count": "1", "server_list": [\n'
  printf '  {"server_id": "localhost", "device": [\n'
  for ((r = 0; r < n; r++)); do
    printf '    {"device_id": "%d", "device_ip": "127.0.0.1", "host_port": "%d", "rank_id": "%d"}%s\n' \
      "$r" $((port + r)) "$r" "$([ $r -lt $((n - 1)) ] && echo ,)"
  done
  printf '  ]}]}\n'
} >"$scratch/table.json"

out=$("$hccl_run" -n "$n" --timeout 120 "$job_check" rank-table "$scratch/table.json" 2>&1) || { echo "$out"; fail "the job failed"; }
echo "$out"
[ "$(grep -c 'allreduce verified' <<<"$out")" -eq $((2 * n)) ] || fail "expected $((2 * n)) verified AllReduces"

# A rank with another secret derives another token: refused, and the others report it missing.
last=$((n - 1))
rc=0
out=$(HCCL_CONNECT_TIMEOUT=4 "$hccl_run" -n "$n" --keep-going --timeout 60 sh -c \
  "[ \"\$RANK\" != $last ] || export HOSTCCL_RANK_TABLE_SECRET=stranger; exec \"$job_check\" rank-table \"$scratch/table.json\"" \
  2>&1) || rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "a rank with another secret joined"
grep -q "rank $last .*wrong token" <<<"$out" || fail "rank $last was not refused for its token"
[ "$(grep -c "rank $last of $n did not join" <<<"$out")" -ge 1 ] || fail "the others did not name rank $last as missing"
echo "rank-table job on $n ranks: passed"
