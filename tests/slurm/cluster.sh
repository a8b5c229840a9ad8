#!/usr/bin/env bash
# A one-node Slurm cluster of its own for a test: munged (as the munge user), slurmctld and slurmd
# on 127.0.0.1 with every file (config, state, spool, logs, sockets) in a scratch folder and ports
# free at the time, so it touches nothing of the machine's own Slurm, if any.
#
#   cluster.sh run [--timeout S] -- CMD [ARG...]
#       starts the daemons, waits until the node takes jobs, runs CMD with SLURM_CONF set (and
#       HC_SLURM_DIR, the scratch folder), then stops every daemon and removes the folder, also when
#       CMD fails or is interrupted; exits with CMD's status.
#
# Needs root and Debian's slurmd, slurmctld, slurm-client and munge: without them it prints one
# SKIP line and exits 77 (CTest's SKIP_RETURN_CODE). What the configuration holds is what works
# on a VM without cgroups or systemd: proctrack/linuxproc, task/none, select/cons_tres with CR_CPU,
# 8 CPUs, a partition with OverSubscribe=YES.
set -euo pipefail

die() { echo "slurm/cluster.sh: $*" >&2; exit 2; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "the Slurm tests start their own slurmctld/slurmd and need root"
for tool in slurmctld slurmd srun sbatch sinfo munged setpriv; do
  command -v "$tool" >/dev/null ||
    skip "the Slurm tests need $tool (apt-get install -y slurmd slurmctld slurm-client munge)"
done
id munge >/dev/null 2>&1 || skip "the Slurm tests need the munge user (apt-get install -y munge)"
[ -r /etc/munge/munge.key ] || skip "the Slurm tests need /etc/munge/munge.key (apt-get install -y munge)"

[ "${1:-}" = run ] || die "usage: cluster.sh run [--timeout S] -- CMD [ARG...]"
shift
timeout_s=600
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option '$1'" ;;
  esac
done
[ $# -gt 0 ] || die "no command after --"

dir=$(mktemp -d /tmp/hc-slurm.XXXXXX)
chmod 755 "$dir"
pids=()

# stop: the jobs still in our cluster (their steps' processes are not our children: slurmstepd
# runs them), then every daemon we started, by pid (TERM, then KILL after 5 s), then the folder.
stop() {
  local p t
  if [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ]; then
    local ids
    ids=$(squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || scancel --full --signal=KILL $ids 2>/dev/null || true
    for ((t = 0; t < 100; t++)); do
      [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for ((t = 0; t < 50; t++)); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_munge() {
  mkdir -p "$dir/munge"
  chown munge:munge "$dir/munge"
  chmod 700 "$dir/munge"
  setpriv --reuid=munge --regid=munge --init-groups munged --foreground --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" \
    --key-file=/etc/munge/munge.key >/dev/null 2>&1 &
  pids+=($!)
  chmod 755 "$dir/munge" # the socket is for everyone; munged wants its folder private only at start
}

write_conf() {
  local host
  host=$(hostname)
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$dir/slurm.conf" <<EOF
ClusterName=hostccl
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
# The node claims 8 CPUs whatever the machine has (jobs of 8 tasks on a 2-CPU VM).
SlurmdParameters=config_overrides
MailProg=/bin/true
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=hcnode NodeAddr=127.0.0.1 NodeHostname=$host CPUs=8 State=UNKNOWN
PartitionName=test Nodes=hcnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  export SLURM_CONF=$dir/slurm.conf
}

wait_ready() {
  local t
  for ((t = 0; t < 300; t++)); do
    if grep -qE '^(idle|mix|alloc)' <<<"$(sinfo -h -o %t 2>/dev/null)"; then return 0; fi
    sleep 0.1
  done
  echo "slurm/cluster.sh: the node did not come up within 30 s" >&2
  tail -n 20 "$dir"/*.log "$dir"/munge/munged.log >&2 || true
  return 1
}

start_munge
for ((t = 0; t < 50; t++)); do [ -S "$dir/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$dir/munge/munge.sock" ] || { cat "$dir/munge/munged.log" >&2 || true; die "munged did not start"; }
write_conf
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N hcnode -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)
wait_ready
export HC_SLURM_DIR=$dir
rc=0
timeout -k 5 "$timeout_s" "$@" || rc=$?
[ $rc -ne 124 ] || echo "slurm/cluster.sh: '$*' ran past $timeout_s s; stopped" >&2
exit $rc
