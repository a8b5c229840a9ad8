#!/usr/bin/env bash
# Self-test of cluster.sh (ctest -L netns): two hosts ping each other by address and by name, a
# link taken down stops traffic and brought up restores it, shaping has the effect it claims (loss
# 100% drops everything, rate limits a transfer, delay shows in the round trip where the kernel has
# netem), and after a clean run, a failing run that leaves a process behind, a run stopped by
# SIGTERM and a run killed with SIGKILL (then swept) nothing of the clusters is left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/cluster.sh
py=/usr/bin/python3

fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- inside a cluster (cluster.sh run ... -- selftest.sh --inside FILE) ---------------------------
reach() { "$cluster" exec "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; }

# transfer_seconds BYTES: time to send BYTES from host 1 to a sink on host 2 over TCP.
transfer_seconds() {
  local bytes=$1 a2 port=5301
  a2=$("$cluster" addr 2)
  "$cluster" exec 2 "$py" - "$a2" "$port" "$bytes" <<'EOF' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.settimeout(20); n = 0; t0 = time.monotonic()
while n < int(sys.argv[3]):
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
print("%d %.3f" % (n, time.monotonic() - t0))
EOF
  local sink=$!
  "$cluster" exec 1 "$py" - "$a2" "$port" "$bytes" <<'EOF'
import socket, sys, time
for _ in range(200):                       # the sink may not listen yet: retry, 10 ms apart
    try:
        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20); break
    except ConnectionRefusedError:
        time.sleep(0.01)
c.sendall(b"\0" * int(sys.argv[3])); c.close()
EOF
  wait "$sink"
}

inside() {
  echo "$HC_CLUSTER" >"$1"
  local a1 a2 n2
  a1=$("$cluster" addr 1); a2=$("$cluster" addr 2); n2=$("$cluster" ns 2)
  [ "$a1" != "$a2" ] || fail "hosts share an address"
  reach 1 "$a2" || fail "host 1 cannot reach host 2 at $a2"
  reach 2 "$a1" || fail "host 2 cannot reach host 1 at $a1"
  reach 1 "$n2" || fail "host 1 cannot resolve or reach host 2 by its name $n2"
  ! grep -q "dev $HC_CLUSTER" <<<"$(ip route get "$a2" 2>/dev/null)" || fail "the machine's namespace has a route into the cluster"

  "$cluster" link 2 down
  ! reach 1 "$a2" || fail "host 2 still answers with its link down"
  "$cluster" link 2 up
  local t
  for ((t = 0; t < 50; t++)); do reach 1 "$a2" && break; done
  reach 1 "$a2" || fail "host 2 unreachable after its link came back"

  "$cluster" shape 2 --loss 100%
  ! reach 1 "$a2" || fail "loss 100% on host 2 let a ping through"
  "$cluster" shape 2 clear
  reach 1 "$a2" || fail "host 2 unreachable after clearing its shaping"

  # 1 MB at 8 Mbit/s takes about 1 s; unshaped, a few ms.
  "$cluster" shape 1 --rate 8mbit
  read -r got secs < <(transfer_seconds 1000000)
  [ "$got" = 1000000 ] || fail "rate test: the sink got $got bytes of 1000000"
  awk -v s="$secs" 'BEGIN { exit !(s >= 0.8 && s < 5) }' || fail "1 MB at 8mbit took $secs s, expected about 1 s"
  echo "rate 8mbit: 1 MB in $secs s"
  "$cluster" shape 1 clear

  if "$cluster" has-netem; then
    "$cluster" shape 2 --delay 20ms
    local rtt
    rtt=$("$cluster" exec 1 ping -c 3 -i 0.2 -W 2 "$a2" | awk -F/ '/^rtt/ { print $5 }')
    awk -v r="$rtt" 'BEGIN { exit !(r >= 38 && r < 200) }' || fail "delay 20ms on host 2: average rtt $rtt ms, expected about 40"
    echo "delay 20ms each way on host 2's link: average rtt $rtt ms"
  else
    echo "delay not checked: this kernel has no sch_netem (--delay reports that and exits 3)"
    "$cluster" shape 2 --delay 20ms 2>/dev/null && fail "--delay succeeded without netem" || [ $? -eq 3 ] ||
      fail "--delay without netem did not exit 3"
  fi
}

# ---- outside ------------------------------------------------------------------------------------
assert_gone() {
  local p=$1
  [ -n "$p" ] || fail "no cluster name recorded"
  ! grep -q "^$p" <<<"$(ip netns list)" || fail "namespaces of $p left: $(ip netns list | grep "^$p" | tr '\n' ' ')"
  ! grep -q "$p" <<<"$(ip link)" || fail "interfaces of $p left in the machine's namespace"
  ! ls -d /etc/netns/"$p"* >/dev/null 2>&1 || fail "/etc/netns/$p* left"
  [ ! -e "/run/hostccl-netns/$p.lock" ] || fail "lock of $p left"
}

# running PID: alive and not a zombie (a killed process stays a zombie until its parent reaps it).
running() { [ -r "/proc/$1/stat" ] && ! awk '{ exit $3 == "Z" ? 0 : 1 }' "/proc/$1/stat"; }

# kill_tree PID: SIGKILL to PID and its descendants, as CTest does to a test past its timeout.
kill_tree() {
  local c
  kill -STOP "$1" 2>/dev/null || true
  for c in $(pgrep -P "$1"); do kill_tree "$c"; done
  kill -KILL "$1" 2>/dev/null || true
}

wait_for_file() { local t; for ((t = 0; t < 100; t++)); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "$1 never written"; }

outside() {
  local rc pid
  name=$(mktemp); left=$(mktemp); trap 'rm -f "$name" "$left"' EXIT

  # 1. the self-test proper
  "$cluster" run --hosts 2 --timeout 60 -- "$0" --inside "$name" || { rc=$?; [ $rc -ne 77 ] || exit 77; fail "inside run exited $rc"; }
  assert_gone "$(cat "$name")"

  # 2. a failing command that leaves a process running inside host 2
  : >"$name"
  rc=0
  "$cluster" run --hosts 2 --timeout 60 -- bash -c '
    echo "$HC_CLUSTER" >"$1"
    "$HC_CLUSTER_SH" exec 2 setsid bash -c "echo \$\$ >$2; exec sleep 1000" </dev/null >/dev/null 2>&1 &
    for ((t = 0; t < 100; t++)); do [ -s "$2" ] && exit 7; sleep 0.1; done; exit 1' _ "$name" "$left" || rc=$?
  [ $rc -eq 7 ] || fail "run did not pass on its command's status 7 (got $rc)"
  assert_gone "$(cat "$name")"
  running "$(cat "$left")" && fail "process $(cat "$left") left running in a removed host"

  # 3. SIGTERM to the run while its command runs: the command is stopped too
  : >"$name"; : >"$left"
  "$cluster" run --hosts 2 --timeout 60 -- bash -c 'echo $$ >"$2"; echo "$HC_CLUSTER" >"$1"; exec sleep 1000' _ "$name" "$left" &
  pid=$!
  wait_for_file "$name"
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  [ $rc -eq 143 ] || fail "run stopped by SIGTERM exited $rc, not 143"
  assert_gone "$(cat "$name")"
  local t; for ((t = 0; t < 50; t++)); do running "$(cat "$left")" || break; sleep 0.1; done
  running "$(cat "$left")" && fail "the command of a run stopped by SIGTERM still runs"

  # 4. SIGKILL to the run and its command: nothing can clean up then; the next run sweeps it.
  : >"$name"
  "$cluster" run --hosts 2 --timeout 60 -- bash -c 'echo "$HC_CLUSTER" >"$1"; exec sleep 1000' _ "$name" &
  pid=$!
  wait_for_file "$name"
  kill_tree "$pid"
  wait "$pid" 2>/dev/null || true
  grep -q "^$(cat "$name")" <<<"$(ip netns list)" || fail "the killed run's cluster vanished by itself?"
  "$cluster" sweep
  assert_gone "$(cat "$name")"
  echo "cluster.sh self-test passed"
}

if [ "${1:-}" = --inside ]; then inside "$2"; else outside; fi
