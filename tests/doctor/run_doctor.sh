#!/usr/bin/env bash
# hccl-doctor end to end on one host: a healthy job, then the same job with a slow link and a dead
# link planted by doctor_shim.so; the doctor must name both, and only those, within its time bound.
# --fraction 0.05: healthy pairs on a loaded 2-CPU machine were seen 10x apart in bandwidth; the
# planted slow pair is 40x below and over 1000x above in latency.
# Usage: run_doctor.sh HCCL_RUN DOCTOR SHIM
set -euo pipefail
hccl_run=$1 doctor=$2 shim=$3
fail() { echo "FAIL: $*"; exit 1; }

# 1. Healthy: exit 0, six OK pairs, and the JSON says the same.
out=$("$hccl_run" -n 4 --timeout 120 "$doctor" --fraction 0.05) || fail "healthy run exited $?: $out"
echo "$out"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +shm .* OK' <<<"$out")" -eq 6 ] || fail "expected 6 OK pairs"
grep -q "hccl-doctor: every link OK" <<<"$out" || fail "no all-OK line"
json=$("$hccl_run" -n 3 --timeout 120 "$doctor" --json --fraction 0.05 --clock-all) || fail "healthy --json exited $?"
[ "$(grep -c '"status":	"OK"' <<<"$json")" -eq 3 ] || { echo "$json"; fail "expected 3 OK links in JSON"; }
grep -q '"exit":	0' <<<"$json" || fail "JSON exit is not 0"
grep -q '"clock_offset_us"' <<<"$json" || fail "--clock-all measured no clock offset"
[ "$(grep -c '"source":	"library"' <<<"$json")" -eq 3 ] || fail "transports not named by the library"

# 1b. The transport the library really uses: with HOSTCCL_TRANSPORT=tcp the ranks of one host talk
# TCP, and the doctor says so (from HcclHostGetLinkInfo), with each side's listening address.
out=$(HOSTCCL_TRANSPORT=tcp "$hccl_run" -n 3 --timeout 120 "$doctor" --fraction 0.05) ||
  fail "healthy run over TCP exited $?: $out"
echo "$out"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +tcp +[a-z0-9]+ [0-9.]+:[0-9]+ <-> [a-z0-9]+ [0-9.]+:[0-9]+ x2 .* OK' <<<"$out")" -eq 3 ] ||
  fail "expected 3 OK pairs over TCP, each with both listening addresses"

# 2. Planted: rank 1 -> 2 slow, rank 0 -> 3 dropped. Exit 1; exactly those two pairs named.
start=$(date +%s)
set +e
out=$(LD_PRELOAD="$shim" HCCL_DOCTOR_SHIM="slow:1:2,drop:0:3" "$hccl_run" -n 4 --timeout 120 "$doctor" \
      --fraction 0.05 --timeout 1 2>&1)
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
echo "$out"
[ "$rc" -eq 1 ] || fail "planted run exited $rc, not 1"
grep -qE '^DEGRADED: rank 1 \(pid [0-9]+ on .*\) - rank 2 \(pid [0-9]+ on .*\): ' <<<"$out" || fail "slow pair 1-2 not named"
grep -qE '^DOWN: rank 0 \(pid [0-9]+ on .*\) - rank 3 \(pid [0-9]+ on .*\): (no answer within 1.0 s|the probe failed \(.+\).*)' <<<"$out" ||
  fail "dead pair 0-3 not named"
[ "$(grep -cE '^(DEGRADED|DOWN|UNTESTED): ' <<<"$out")" -eq 2 ] || fail "pairs other than 1-2 and 0-3 were named"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +shm .* OK' <<<"$out")" -eq 4 ] || fail "expected the 4 other pairs OK"
# The bound: one probe timeout for the dead pair, one retest of the slow one, plus the healthy work.
[ "$elapsed" -le 30 ] || fail "the planted run took ${elapsed} s"

# 3. Under mpirun (root info by MPI_Bcast), where Open MPI is installed.
if command -v mpirun >/dev/null; then
  root_flags=()
  [ "$(id -u)" -eq 0 ] && root_flags=(--allow-run-as-root)
  out=$(timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np 3 --mca btl self,vader "$doctor" --fraction 0.05 \
        2>&1) || fail "under mpirun: $out"
  [ "$(grep -cE '^  [0-9]+-[0-9]+ +shm .* OK' <<<"$out")" -eq 3 ] || fail "under mpirun: expected 3 OK pairs: $out"
fi

# 4. Bad usage: exit 2 and the usage text, before any rank starts talking.
set +e
out=$("$hccl_run" -n 2 --timeout 60 "$doctor" --fraction 7 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "usage: hccl-run -n N hccl-doctor" <<<"$out" || fail "bad option: rc $rc, $out"
echo "PASS"
