#!/usr/bin/env bash
# Install the Debian packages hostccl needs to build and test (as root), or print the command.
# Usage: scripts/deps.sh [build|test|demo|bench]
set -euo pipefail
what=${1:-test}
pkgs=(build-essential cmake pkg-config libcjson-dev)
optional=()
case "$what" in
  # iputils-ping, nftables and python3: the network-namespace cluster (tests/netns: ping, loss, a
  # transfer sink); OpenBLAS: the demo's matrix products (examples/demo); mpich: its launcher across
  # those hosts (Open MPI keeps the mpicc alternative); python3-numpy, python3-torch, python3-mpi4py:
  # tests/python (the package, the torch backend and hostccl.init() under mpirun, run by Debian's
  # /usr/bin/python3); slurm*, munge, libpmix2: the one-node Slurm cluster of tests/slurm.
  test) pkgs+=(libcmocka-dev openmpi-bin libopenmpi-dev valgrind iproute2 procps iputils-ping nftables python3
               libopenblas-dev mpich libmpich-dev python3-numpy python3-torch python3-mpi4py slurmd slurmctld
               slurm-client munge libpmix2) ;;
  # make demo: OpenBLAS for the transformer's matrix products (examples/demo); cmocka because the
  # build configures the test suite too.
  demo) pkgs+=(libopenblas-dev libcmocka-dev) ;;
  # make bench: both MPIs side by side (mpicc.openmpi/mpicc.mpich; Open MPI keeps the mpicc and
  # mpirun alternatives by its higher priority), python3 for bench/bench.py, procps for uptime;
  # iproute2 and iperf3 for the multi-host section (bench/multihost.py: netns hosts, the link's
  # capacity).
  bench) pkgs+=(libcmocka-dev openmpi-bin libopenmpi-dev mpich libmpich-dev python3 procps iproute2 iperf3)
         optional=(libgloo-dev) ;;
esac
missing=()
for p in "${pkgs[@]}" ${optional[@]+"${optional[@]}"}; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Optional packages (Gloo is not in every Debian release) are left out when this Debian
  # release has no candidate for them; the bench then runs without that peer and says so.
  available=()
  for p in "${missing[@]}"; do
    if [[ " ${optional[*]-} " == *" $p "* ]] &&
       ! grep -q 'Candidate: [^(]' <<<"$(apt-cache policy "$p" 2>/dev/null || true)"; then
      echo "not installing $p: this Debian release has no such package (its bench column is skipped)"
    else
      available+=("$p")
    fi
  done
  [ ${#available[@]} -eq 0 ] && exit 0
  missing=("${available[@]}")
  echo "installing: ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "hostccl needs these Debian packages; run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
