#!/usr/bin/env bash
# Install the Debian packages hostccl needs to build and test (as root), or print the command.
# Usage: scripts/deps.sh [build|test|bench]
set -euo pipefail
what=${1:-test}
pkgs=(build-essential cmake pkg-config libcjson-dev)
case "$what" in
  test) pkgs+=(libcmocka-dev openmpi-bin libopenmpi-dev valgrind iproute2 procps) ;;
  bench) pkgs+=(libcmocka-dev openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "hostccl needs these Debian packages; run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
