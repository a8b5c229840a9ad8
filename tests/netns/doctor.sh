#!/usr/bin/env bash
# hccl-doctor across three netns hosts, two ranks each (ranks 0-1 on host 1, 2-3 on host 2, 4-5 on
# host 3), launched by hccl-run --hosts from host 1 as a user would:
#
#  1. healthy: exit 0; 15 pairs OK, 3 over shared memory (inside the hosts) and 12 over TCP, each
#     TCP pair with both listening addresses as the library names them (HcclHostGetLinkInfo);
#     no check FAILs, the port check opened every connection, clocks of hosts 2 and 3 measured;
#     the JSON (--json-out) says the same.
#  2. a port range opened too narrowly: with HCCL_IF_BASE_PORT=41000, host 3 accepts new connections
#     only on 41000-41003 (nftables): every link works (the job's listeners fit), but exit 1 and the
#     firewall check names ranks 0-3 and host 3's ports 41004-41031, table and JSON.
#  3. broken: host 3's link shaped slow (--rate 50mbit, and --delay 10ms where the kernel has
#     netem), host 2's MTU lowered to 1400, and, once every rank's communicator is connected, host 3
#     drops new TCP connections from host 2 (a stateful firewall: established connections keep
#     working, new ones are dropped). The doctor must exit 1 and name exactly: the 4 pairs between
#     hosts 1 and 3 DEGRADED, the 4 pairs between hosts 2 and 3 DOWN (rank, host and address each),
#     the ports of host 3 closed to host 2's ranks (firewall FAIL), host 2's MTU (WARN); the other
#     7 pairs OK; within its time bound; and the JSON must agree.
#
# The firewall goes up at a point that is the same in every run: doctor_shim.so (gate:DIR) holds
# rank 0 right after the job's communicator is up until this script says go.
# --fraction 0.1 because healthy pairs on a loaded 2-CPU machine were seen 10x apart; --expect-bw
# tcp=0.05 states what a TCP link here must do at least (healthy veth pairs measured 0.3-3 GB/s,
# the shaped one 0.006).
#
# usage: doctor.sh HCCL_RUN DOCTOR SHIM
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
  exec "$here/cluster.sh" run --hosts 3 --timeout 200 -- "$0" --inside "$@"
fi
shift
hccl_run=$1 doctor=$2 shim=$3
cl=$HC_CLUSTER_SH py=/usr/bin/python3 sub=$HC_CLUSTER_SUBNET
h1=$("$cl" ns 1) h2=$("$cl" ns 2) h3=$("$cl" ns 3)
scratch=$(mktemp -d)
watcher=''
trap '[ -z "$watcher" ] || kill "$watcher" 2>/dev/null; rm -rf "$scratch"' EXIT
opts=(--fraction 0.1 --expect-bw tcp=0.05 --size 262144 --timeout 1)

# doctor OUT JSON [hccl-run options]: run the doctor as a job, with ${envs[@]} in its environment;
# its status is returned.
envs=()
doctor() {
  local out=$1 json=$2; shift 2
  "$cl" exec 1 env ${envs[@]+"${envs[@]}"} "$hccl_run" --hosts "$h1:2,$h2:2,$h3:2" --agent "$cl exec {host}" \
    --timeout 150 "$@" "$doctor" "${opts[@]}" --json-out "$json" >"$out" 2>&1
}
nft_in() { # nft_in HOST TABLE RULE: a table with one input rule in HOST
  printf 'table inet %s {\n chain in {\n  type filter hook input priority 0;\n  %s;\n }\n}\n' "$2" "$3" |
    ip netns exec "$1" nft -f -
}

# check_json FILE EXIT OK DEGRADED DOWN: the JSON's exit status and the pairs of each status
# ("a-b a-b ..."), every TCP pair with both addresses in the cluster's subnet.
check_json() {
  "$py" - "$@" "$sub" <<'EOF' || fail "the JSON of $1 disagrees (above)"
import json, sys
path, code, ok, degraded, down, sub = sys.argv[1:]
doc = json.load(open(path))
got = {"OK": [], "DEGRADED": [], "DOWN": []}
for l in doc["links"]:
    got.setdefault(l["status"], []).append("%d-%d" % (l["a"], l["b"]))
    if l["transport"] == "tcp":
        for side in ("address_a", "address_b"):
            assert l[side].startswith(sub + ".0."), (l, side)
        assert l["source"] == "library" and l["sockets"] >= 1, l
want = {"OK": ok.split(), "DEGRADED": degraded.split(), "DOWN": down.split()}
for k in want:
    assert sorted(got.get(k, [])) == sorted(want[k]), (k, got.get(k), want[k])
assert doc["exit"] == int(code), doc["exit"]
print("JSON %s: exit %s, %d OK, %d DEGRADED, %d DOWN" % (path, code, len(want["OK"]), len(want["DEGRADED"]),
                                                        len(want["DOWN"])))
EOF
}

# ---- 1: healthy ----------------------------------------------------------------------------------
doctor "$scratch/healthy.txt" "$scratch/healthy.json" || { cat "$scratch/healthy.txt"; fail "healthy run exited $?"; }
out=$(cat "$scratch/healthy.txt")
echo "$out"
grep -q "hccl-doctor: 6 ranks on 3 hosts" <<<"$out" || fail "not 6 ranks on 3 hosts"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +shm .* OK( \(measured twice\))?$' <<<"$out")" -eq 3 ] || fail "expected 3 shm pairs OK"
[ "$(grep -cE "^  [0-9]+-[0-9]+ +tcp +eth0 $sub\.0\.[123]:[0-9]+ <-> eth0 $sub\.0\.[123]:[0-9]+ x[0-9]+ .* OK( \(measured twice\))?$" <<<"$out")" \
  -eq 12 ] || fail "expected 12 TCP pairs OK, each with both listening addresses"
grep -qE '^  OK +firewall +[0-9]+ connections from every rank to every other host' <<<"$out" || fail "port check not OK"
grep -qE '^  OK +clock +largest offset .* of 2 ranks measured' <<<"$out" || fail "clocks of hosts 2 and 3 not measured"
grep -qE '^  OK +MTU +1500 on every host' <<<"$out" || fail "MTU not OK"
! grep -q '^  FAIL' <<<"$out" || fail "a check FAILed on a healthy cluster"
grep -q "hccl-doctor: every link OK" <<<"$out" || fail "no all-OK line"
check_json "$scratch/healthy.json" 0 "0-1 0-2 0-3 0-4 0-5 1-2 1-3 1-4 1-5 2-3 2-4 2-5 3-4 3-5 4-5" "" ""

# ---- 2: a port range opened too narrowly ----------------------------------------------------------
nft_in "$h3" hcnrange "tcp dport 41004-41031 ct state new drop"
envs=(HCCL_IF_BASE_PORT=41000)
rc=0
doctor "$scratch/range.txt" "$scratch/range.json" || rc=$?
envs=()
out=$(cat "$scratch/range.txt")
echo "$out"
[ "$rc" -eq 1 ] || fail "narrow port range: exited $rc, not 1"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +(shm|tcp) .* OK( \(measured twice\))?$' <<<"$out")" -eq 15 ] || fail "narrow port range: links not all OK"
grep -qE "^FAIL: firewall: ranks 0-3 \($h1, $h2\) -> $h3 $sub\.0\.3 ports 41004-41031: no answer \(dropped\) within 1\.0 s; communicators need ports 41000-41031" \
  <<<"$out" || fail "narrow port range: host 3's closed ports not named"
grep -qE '^  OK +interfaces .*HCCL_IF_BASE_PORT \(41000\)' <<<"$out" || fail "HCCL_IF_BASE_PORT not reported"
"$py" - "$scratch/range.json" <<'EOF' || fail "narrow port range: the JSON disagrees"
import json, sys
doc = json.load(open(sys.argv[1]))
closed = doc["closed_ports"]
assert sorted(c["from"] for c in closed) == [0, 1, 2, 3], closed
assert all(c["to"] == 4 and c["ports"] == list(range(41004, 41032)) for c in closed), closed
assert doc["links_status"] == "OK" and doc["exit"] == 1, doc["exit"]
EOF
ip netns exec "$h3" nft delete table inet hcnrange

# ---- 3: broken -----------------------------------------------------------------------------------
shape=(--rate 50mbit)
if "$cl" has-netem; then shape+=(--delay 10ms); fi
"$cl" shape 3 "${shape[@]}"
ip -n "$h2" link set eth0 mtu 1400
mkdir "$scratch/gate"
(
  for ((t = 0; t < 600; t++)); do [ -e "$scratch/gate/up" ] && break; sleep 0.1; done
  nft_in "$h3" hcndoctor "ip saddr $sub.0.2 ct state new drop"
  touch "$scratch/gate/go"
) &
watcher=$!
start=$(date +%s)
rc=0
doctor "$scratch/broken.txt" "$scratch/broken.json" -x LD_PRELOAD="$shim" -x HCCL_DOCTOR_SHIM="gate:$scratch/gate" || rc=$?
elapsed=$(($(date +%s) - start))
wait "$watcher" || fail "the firewall could not be set up"
watcher=''
out=$(cat "$scratch/broken.txt")
echo "$out"
[ "$rc" -eq 1 ] || fail "broken run exited $rc, not 1"
for p in 0-4 0-5 1-4 1-5; do
  grep -qE "^DEGRADED: rank ${p%-*} \($h1 $sub\.0\.1:[0-9]+\) - rank ${p#*-} \($h3 $sub\.0\.3:[0-9]+\): .*< expected 0\.05" \
    <<<"$out" || fail "slow pair $p not named DEGRADED with both hosts and addresses"
done
for p in 2-4 2-5 3-4 3-5; do
  grep -qE "^DOWN: rank ${p%-*} \($h2 $sub\.0\.2:[0-9]+\) - rank ${p#*-} \($h3 $sub\.0\.3:[0-9]+\): not connected within 2 s" \
    <<<"$out" || fail "unreachable pair $p not named DOWN with both hosts and addresses"
done
[ "$(grep -cE '^(DEGRADED|DOWN|UNTESTED): ' <<<"$out")" -eq 8 ] || fail "pairs other than those 8 were named"
[ "$(grep -cE '^  [0-9]+-[0-9]+ +(shm|tcp) .* OK( \(measured twice\))?$' <<<"$out")" -eq 7 ] || fail "expected the 7 other pairs OK"
grep -qE "^FAIL: firewall: ranks 2-3 \($h2\) -> $h3 $sub\.0\.3 port [0-9]+: no answer \(dropped\) within 1\.0 s; communicators listen on ephemeral ports" \
  <<<"$out" || fail "the closed ports of host 3, and only those, not named for ranks 2-3"
grep -qE "^  WARN +MTU +differs between hosts: .*$h2 eth0 1400 \(lower\)" <<<"$out" || fail "host 2's MTU not named"
grep -q "hccl-doctor: problems found (exit 1)" <<<"$out" || fail "no problems line"
# The bound: 4 DOWN pairs at 2 s each (no communicator within max(2, 2 x --timeout)), 8 slow pairs
# at about a second each (measured and retested), the rest well under a second per pair.
[ "$elapsed" -le 60 ] || fail "the broken run took ${elapsed} s"
check_json "$scratch/broken.json" 1 "0-1 0-2 0-3 1-2 1-3 2-3 4-5" "0-4 0-5 1-4 1-5" "2-4 2-5 3-4 3-5"
"$py" -c 'import json, sys; c = json.load(open(sys.argv[1]))["closed_ports"]
assert sorted(x["from"] for x in c) == [2, 3] and all(x["to"] == 4 and len(x["ports"]) == 1 for x in c), c' \
  "$scratch/broken.json" || fail "the JSON's closed ports are not exactly host 3's port from ranks 2 and 3"
echo "hccl-doctor on 3 netns hosts: healthy passes; slow, unreachable, closed ports and MTU named in ${elapsed} s"
