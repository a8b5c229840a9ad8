#!/usr/bin/env bash
# A cluster of H "hosts" on one Linux machine: each host is a network namespace with one interface
# (eth0, 10.77.0.I/24) on a Linux bridge that lives in a namespace of its own, so nothing is added
# to the machine's own network namespace and addresses exist only inside the cluster. Needs root;
# otherwise prints one skip line and exits 77 (CTest's SKIP_RETURN_CODE). docs/testing.md.
#
#   cluster.sh run [--hosts H] [--subnet 10.X] [--timeout S] [SHAPE...] -- CMD [ARG...]
#       builds the cluster, runs CMD (in the machine's namespace) with HC_CLUSTER, HC_CLUSTER_HOSTS,
#       HC_CLUSTER_ADDRS and HC_CLUSTER_SH exported, removes everything when CMD ends, fails, is
#       interrupted or passes S seconds (default 600), and exits with CMD's status.
#   cluster.sh up [--hosts H] [--subnet 10.X] [SHAPE...]   builds one and prints `export` lines
#       (eval them); it stays until `cluster.sh down`.
# With HC_CLUSTER set (inside `run`, or after eval of `up`), HOST is an index 1..H or a name:
#   cluster.sh exec HOST CMD [ARG...]      run CMD inside HOST (ip netns exec), with HOST's name as
#                                          host name
#   cluster.sh ns HOST | addr HOST | hosts  print HOST's namespace name / address / every name
#   cluster.sh shape HOST SHAPE... | shape HOST clear
#   cluster.sh link HOST down|up           take HOST's link down or up (its end on the bridge)
#   cluster.sh down                        remove the cluster
#   cluster.sh sweep                       remove clusters whose `run` process died (kill -9)
# SHAPE: --delay 5ms --rate 100mbit --loss 1%, applied to each direction of the host's link (so
# between two hosts shaped alike a packet sees the delay twice, the loss twice).
#
# Names: the cluster prefix is hcn<pid> (pid of the `run`/`up` process); hosts are namespaces
# hcn<pid>h1..hcn<pid>hH, the bridge's namespace hcn<pid>sw. /etc/netns/<host>/hosts maps every
# host name to its address, so inside the cluster (under `ip netns exec`) host names resolve.
set -euo pipefail

readonly CL_LOCK_DIR=/run/hostccl-netns
CL_SELF=$(readlink -f "${BASH_SOURCE[0]}")

die() { echo "cluster.sh: $*" >&2; exit 2; }
skip() { echo "SKIP: $*"; exit 77; }

need_root() {
  [ "$(id -u)" -eq 0 ] || skip "network-namespace tests need root (ip netns add); run them as root"
  command -v ip >/dev/null || skip "network-namespace tests need iproute2 (apt-get install -y iproute2)"
}

cl_prefix() { [ -n "${HC_CLUSTER:-}" ] || die "HC_CLUSTER is not set (use 'run', or eval 'up')"; echo "$HC_CLUSTER"; }

# host_ns HOST: the namespace name of HOST (an index or a name of this cluster).
host_ns() {
  local p; p=$(cl_prefix)
  case "$1" in
    ''|*[!0-9]*) [[ "$1" == "${p}h"* ]] || die "no host '$1' in cluster $p"; echo "$1" ;;
    *) echo "${p}h$1" ;;
  esac
}
host_index() { local ns; ns=$(host_ns "$1"); echo "${ns##*h}"; }
host_addr() { echo "${HC_CLUSTER_SUBNET:-10.77}.0.$(host_index "$1")"; }

# ---- shaping -------------------------------------------------------------------------------------
# Rate: tbf, loss: nftables (numgen random) in the host, delay: netem. All three exist in every
# Debian kernel; netem alone is missing from some minimal kernels (asked for there, delay fails with
# a line saying so, exit 3), which is why rate and loss do not depend on it.
has_netem() {
  local t=hcnprobe$$ ok=1
  ip netns add "$t" || return 1
  ip -n "$t" link add p0 type veth peer name p1 && tc -n "$t" qdisc add dev p0 root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$t"
  return $ok
}

# qdisc_apply NS DEV DELAY RATE: one device's egress shaping, replacing what was there.
qdisc_apply() {
  local ns=$1 dev=$2 delay=$3 rate=$4
  tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
  if [ -n "$delay" ]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>/dev/null ||
      { echo "cluster.sh: --delay needs the kernel's sch_netem (CONFIG_NET_SCH_NETEM), which this kernel lacks" >&2; exit 3; }
    [ -z "$rate" ] || tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst 64kb latency 200ms
  elif [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst 64kb latency 200ms
  fi
}

# loss_apply NS PERCENT: drop that share of what the host sends and of what it receives on eth0.
loss_apply() {
  local ns=$1 pct=${2%\%} per10k
  ip netns exec "$ns" nft delete table inet hcnshape 2>/dev/null || true
  [ -n "$pct" ] || return 0
  command -v nft >/dev/null || die "--loss needs nftables (apt-get install -y nftables)"
  per10k=$(awk -v p="$pct" 'BEGIN { if (p !~ /^[0-9]*\.?[0-9]+$/ || p > 100) exit 1; printf "%d", p * 100 + 0.5 }') ||
    die "--loss wants a percentage 0-100, not '$2'"
  [ "$per10k" -gt 0 ] || return 0
  local when="numgen random mod 10000 < $per10k"
  [ "$per10k" -lt 10000 ] || when=''
  ip netns exec "$ns" nft -f - <<EOF
table inet hcnshape {
  chain out { type filter hook output priority 0; oifname "eth0" $when drop; }
  chain in { type filter hook input priority 0; iifname "eth0" $when drop; }
}
EOF
}

# shape HOST [--delay D] [--rate R] [--loss P] | shape HOST clear
cmd_shape() {
  [ $# -ge 1 ] || die "shape HOST [--delay D] [--rate R] [--loss P] | clear"
  local ns i p delay='' rate='' loss=''
  ns=$(host_ns "$1"); i=$(host_index "$1"); p=$(cl_prefix); shift
  if [ "${1:-}" != clear ]; then
    while [ $# -gt 0 ]; do
      case "$1" in
        --delay) delay=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --loss) loss=$2; shift 2 ;;
        *) die "shape: unknown option '$1'" ;;
      esac
    done
  fi
  qdisc_apply "$ns" eth0 "$delay" "$rate"
  qdisc_apply "${p}sw" "h$i" "$delay" "$rate"
  loss_apply "$ns" "$loss"
}

# ---- building and removing -----------------------------------------------------------------------
cl_build() {
  local p=$1 n=$2 i j ns
  ip netns add "${p}sw"
  ip -n "${p}sw" link add br0 type bridge
  ip -n "${p}sw" link set br0 up
  for ((i = 1; i <= n; i++)); do
    ns="${p}h$i"
    ip netns add "$ns"
    # Created inside the bridge's namespace with its peer moved straight into the host: no
    # interface ever appears in the machine's own namespace.
    ip -n "${p}sw" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "${p}sw" link set "h$i" master br0 up
    ip -n "$ns" addr add "$HC_CLUSTER_SUBNET.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # The tests' HCCL_IF_BASE_PORT range is not handed out as ephemeral ports (as a site would
    # reserve it): an outgoing connection that got one of them kept hccl-doctor from listening
    # there, and its port check then named the range with a gap (netns.doctor, once in six CI runs).
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_reserved_ports=41000-41031
  done
  for ((i = 1; i <= n; i++)); do
    mkdir -p "/etc/netns/${p}h$i"
    { printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n'
      for ((j = 1; j <= n; j++)); do printf '%s.0.%d\t%sh%d\n' "$HC_CLUSTER_SUBNET" "$j" "$p" "$j"; done
    } >"/etc/netns/${p}h$i/hosts"
  done
}

# kill_ns NS: end every process still inside NS (ranks a failed test left behind): TERM, up to 2 s
# for them to go, then KILL. Only processes of this cluster's namespaces are touched.
kill_ns() {
  local ns=$1 pids t
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  kill -TERM $pids 2>/dev/null || true
  for ((t = 0; t < 20; t++)); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  kill -KILL $pids 2>/dev/null || true
}

cl_remove() {
  local p=$1 ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^${p}\(h[0-9]*\|sw\)$" || true); do
    kill_ns "$ns"
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -f "$CL_LOCK_DIR/$p.lock"
}

# sweep: clusters whose `run` process (the holder of its lock) is gone. A cluster made by `up` has
# no lock file and is never swept.
cmd_sweep() {
  local f p
  [ -d "$CL_LOCK_DIR" ] || return 0
  for f in "$CL_LOCK_DIR"/hcn*.lock; do
    [ -e "$f" ] || continue
    p=$(basename "$f" .lock)
    if flock -n "$f" true; then
      echo "cluster.sh: removing $p, left by a run that was killed"
      cl_remove "$p"
    fi
  done
}

parse_build_opts() {
  B_HOSTS=2 B_SHAPE=() B_TIMEOUT=600 HC_CLUSTER_SUBNET=${HC_CLUSTER_SUBNET:-10.77}
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) B_HOSTS=$2; shift 2 ;;
      --subnet) HC_CLUSTER_SUBNET=$2; shift 2 ;;
      --timeout) B_TIMEOUT=$2; shift 2 ;;
      --delay|--rate|--loss) B_SHAPE+=("$1" "$2"); shift 2 ;;
      --) shift; B_CMD=("$@"); return 0 ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  B_CMD=()
}

cl_export() {
  local i hosts='' addrs=''
  for ((i = 1; i <= B_HOSTS; i++)); do
    hosts+="${hosts:+ }${HC_CLUSTER}h$i"; addrs+="${addrs:+ }$HC_CLUSTER_SUBNET.0.$i"
  done
  export HC_CLUSTER HC_CLUSTER_SUBNET HC_CLUSTER_SH="$CL_SELF"
  export HC_CLUSTER_HOSTS="$hosts" HC_CLUSTER_ADDRS="$addrs"
}

cl_up() {
  [[ "$B_HOSTS" =~ ^[0-9]+$ ]] && [ "$B_HOSTS" -ge 1 ] && [ "$B_HOSTS" -le 250 ] || die "--hosts wants 1-250"
  [[ "$HC_CLUSTER_SUBNET" =~ ^10\.[0-9]+$ ]] || die "--subnet wants 10.X"
  cl_build "$HC_CLUSTER" "$B_HOSTS"
  cl_export
  if [ ${#B_SHAPE[@]} -gt 0 ]; then
    for ((i = 1; i <= B_HOSTS; i++)); do cmd_shape "$i" "${B_SHAPE[@]}"; done
  fi
}

# fresh_prefix: hcn<pid>, refused if a namespace of that name survives from an earlier `up` whose
# pid this process now has (removing it on our way out would take someone else's cluster).
fresh_prefix() {
  HC_CLUSTER="hcn$$"
  ! grep -q "^${HC_CLUSTER}\(h[0-9]*\|sw\)$" <<<"$(ip netns list | awk '{print $1}')" ||
    die "namespaces named $HC_CLUSTER* exist already (a cluster made by 'up'?); remove them first"
}

cmd_run() {
  parse_build_opts "$@"
  [ ${#B_CMD[@]} -gt 0 ] || die "run: no command after --"
  cmd_sweep
  fresh_prefix
  mkdir -p "$CL_LOCK_DIR"
  exec 9>"$CL_LOCK_DIR/$HC_CLUSTER.lock"
  flock -n 9 || die "lock $CL_LOCK_DIR/$HC_CLUSTER.lock is held"
  local child='' rc=0
  # The command runs in the background so that a signal to this process is handled at once
  # (bash runs traps only between commands): stop the command, then remove the cluster.
  trap 'cl_remove "$HC_CLUSTER"' EXIT
  trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT
  trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 143' TERM HUP
  cl_up
  # fd 9 (the lock) stays with this process only: the lock says "the run that owns it is alive".
  # A background job's stdin would be /dev/null: give it ours (fd 3) explicitly.
  exec 3<&0
  timeout -k 5 "$B_TIMEOUT" "${B_CMD[@]}" <&3 3<&- 9>&- &
  child=$!
  wait "$child" || rc=$?
  child=''
  [ $rc -ne 124 ] || echo "cluster.sh: '${B_CMD[*]}' ran past ${B_TIMEOUT} s; stopped" >&2
  return $rc
}

cmd_up() {
  parse_build_opts "$@"
  fresh_prefix
  trap 'cl_remove "$HC_CLUSTER"' ERR
  cl_up
  trap - ERR
  echo "export HC_CLUSTER=$HC_CLUSTER HC_CLUSTER_SUBNET=$HC_CLUSTER_SUBNET HC_CLUSTER_SH=$CL_SELF"
  echo "export HC_CLUSTER_HOSTS='$HC_CLUSTER_HOSTS' HC_CLUSTER_ADDRS='$HC_CLUSTER_ADDRS'"
}

main() {
  [ $# -ge 1 ] || die "usage: cluster.sh run|up|exec|ns|addr|hosts|shape|link|down|sweep ... (see the head of this file)"
  local verb=$1; shift
  need_root
  case "$verb" in
    run) cmd_run "$@" ;;
    up) cmd_up "$@" ;;
    exec)
      [ $# -ge 2 ] || die "exec HOST CMD..."
      local ns; ns=$(host_ns "$1"); shift
      # The host's name as host name too (a UTS namespace per command): launchers such as Open MPI
      # tell hosts apart by name, and would take every namespace for one host.
      exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@" ;;
    ns) host_ns "$1" ;;
    addr) host_addr "$1" ;;
    hosts) echo "${HC_CLUSTER_HOSTS:?HC_CLUSTER_HOSTS is not set}" ;;
    shape) cmd_shape "$@" ;;
    link)
      [ "${2:-}" = down ] || [ "${2:-}" = up ] || die "link HOST down|up"
      ip -n "$(cl_prefix)sw" link set "h$(host_index "$1")" "$2" ;;
    down) cl_remove "$(cl_prefix)" ;;
    sweep) cmd_sweep ;;
    has-netem) has_netem ;;
    *) die "unknown command '$verb'" ;;
  esac
}

main "$@"
