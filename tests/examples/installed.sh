#!/usr/bin/env bash
# Install hostccl into a scratch prefix, copy share/hostccl/examples out of it, build the examples
# with their Makefile exactly as a user would (pkg-config, nothing from the source tree) and run
# each one on 2 ranks with the installed hccl-run: every one must print its verified line.
set -euo pipefail
build_dir=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig:$scratch/prefix/lib64/pkgconfig:$scratch/prefix/lib/x86_64-linux-gnu/pkgconfig"
cp -r "$scratch/prefix/share/hostccl/examples" "$scratch/examples"
# MPICC=none: seed_mpi has its own test (mpi.seed_pattern).
make -s -C "$scratch/examples" MPICC=none CFLAGS="-O2 -Wall -Wextra -Werror"
out=$(cd "$scratch/examples" && timeout 180 make -s run NP=2 2>&1) || { echo "$out"; exit 1; }
echo "$out"
for e in "/2: allreduce of" "/2: tp mlp" "1F1B order" "/2: moe "; do
  n=$(grep "$e" <<<"$out" | grep -c verified || true)
  [ "$n" -eq 2 ] || { echo "expected 2 verified lines for '$e', got $n"; exit 1; }
done
# The demo's sources build against the installed tree too (where pkg-config finds OpenBLAS).
if pkg-config --exists openblas; then
  [ -x "$scratch/examples/demo/demo" ] || { echo "demo/demo was not built"; exit 1; }
  out=$(cd "$scratch/examples" && HCCL_DETERMINISTIC=true timeout 120 "$scratch/prefix/bin/hccl-run" -n 2 \
        ./demo/demo --layers 2 --hidden 128 --vocab 256 --prompt 4 --gen 3 2>&1) || { echo "$out"; exit 1; }
  echo "$out"
  grep -q "demo: verified" <<<"$out"
fi
