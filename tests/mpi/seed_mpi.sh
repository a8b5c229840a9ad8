#!/usr/bin/env bash
# Install hostccl into a scratch prefix, build the seed program (examples/seed_mpi.c) the way a user
# would, with the installed examples' Makefile (mpicc + pkg-config), and run it under mpirun -np 4.
# Skips (exit 77) without Open MPI.
set -euo pipefail
build_dir=$1
command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "Open MPI not installed: skipped"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig:$scratch/prefix/lib64/pkgconfig:$scratch/prefix/lib/x86_64-linux-gnu/pkgconfig"
cp -r "$scratch/prefix/share/hostccl/examples" "$scratch/examples"
make -s -C "$scratch/examples" seed_mpi CFLAGS="-O2 -Wall -Werror"
root_flags=()
[ "$(id -u)" -eq 0 ] && root_flags=(--allow-run-as-root)
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader OMPI_MCA_plm=isolated 2>/dev/null || true
unset OMPI_MCA_plm
out=$(timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np 4 --mca btl self,vader "$scratch/examples/seed_mpi" 2>&1) || {
  echo "$out"; exit 1; }
echo "$out"
[ "$(grep -c 'fp16 allreduce verified' <<<"$out")" -eq 4 ]
