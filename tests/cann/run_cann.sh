#!/usr/bin/env bash
# CANN programs built the way CANN builds them, against hostccl installed as a CANN tree:
#  1. `cmake --install` staged with DESTDIR, then moved elsewhere: the tree (include/, lib64/,
#     set_env.sh) must still be whole (no dangling link) and correct after the move;
#  2. `source set_env.sh` sets ASCEND_HOME_PATH to where the tree now is (sourcing twice changes
#     nothing) and the programs are built with their own kind of Makefile (C++14, -Werror);
#  3. the thread-per-device program runs on the default 8 devices and on ASCEND_RT_VISIBLE_DEVICES'
#     pick, its output compared line by line with what it must print;
#  4. with Open MPI or MPICH installed, the MPI + root info program runs on 2 ranks with
#     HCCL_TEST_PROFILING=1 and leaves one Chrome trace per rank with its allreduces in it.
# Usage: run_cann.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
scratch=$(mktemp -d /tmp/hostccl_cann_XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Staged install, moved into place.
DESTDIR="$scratch/stage" cmake --install "$build" --prefix /opt/hostccl >/dev/null
mv "$scratch/stage/opt/hostccl" "$scratch/cann"
for f in include/hccl/hccl.h include/hccl/hccl_comm.h include/hccl/hccl_types.h include/acl/acl.h \
         include/acl/acl_prof.h lib64/libhccl.so lib64/libascendcl.so lib64/libacl_rt.so \
         lib64/libmsprofiler.so set_env.sh; do
  [ -e "$scratch/cann/$f" ] || fail "the installed tree has no $f"
done
dangling=$(find "$scratch/cann" -xtype l)
[ -z "$dangling" ] || fail "dangling links after the move: $dangling"

# 2. The environment CANN's Makefiles expect, then their kind of build.
unset ASCEND_HOME_PATH ASCEND_TOOLKIT_HOME HOSTCCL_DEVICE_COUNT ASCEND_RT_VISIBLE_DEVICES
# shellcheck disable=SC1091
source "$scratch/cann/set_env.sh"
ld_once="$LD_LIBRARY_PATH"
# shellcheck disable=SC1091
source "$scratch/cann/set_env.sh"
[ "$ASCEND_HOME_PATH" = "$(cd "$scratch/cann" && pwd -P)" ] || fail "ASCEND_HOME_PATH is $ASCEND_HOME_PATH"
[ "$LD_LIBRARY_PATH" = "$ld_once" ] || fail "sourcing set_env.sh twice changed LD_LIBRARY_PATH"
case ":$LD_LIBRARY_PATH:" in *":$ASCEND_HOME_PATH/lib64:"*) ;; *) fail "lib64 is not on LD_LIBRARY_PATH";; esac
mkdir "$scratch/work"
cp "$src/Makefile" "$src"/*.cc "$scratch/work/"
make -C "$scratch/work" >"$scratch/make.log" 2>&1 || { cat "$scratch/make.log"; fail "make"; }
# ldd's output whole first: under pipefail, grep -q closing the pipe early fails ldd with SIGPIPE.
deps=$(ldd "$scratch/work/thread_per_device")
grep -q "libhccl.so.0 => $ASCEND_HOME_PATH/lib64/" <<<"$deps" ||
  { echo "$deps"; fail "libhccl does not resolve into the installed tree"; }

# 3. One thread per device: 8 by default, 2 with ASCEND_RT_VISIBLE_DEVICES=2,5.
expect() {
  local n=$1 line
  echo "Found $n NPU device(s) available"
  for ((r = 0; r < n; r++)); do
    line="rankId: $r, allreduce: ["
    for ((i = 0; i < n; i++)); do line+=" $((n * i + n * (n - 1) / 2))"; done
    echo "$line ]"
  done
  echo "all checks passed"
}
run_threads() {
  local n=$1 got
  got=$(cd "$scratch/work" && timeout 180 ./thread_per_device 2>&1) || { echo "$got"; fail "thread_per_device ($n devices)"; }
  diff <(expect "$n") <(echo "$got") || fail "thread_per_device printed something else ($n devices)"
  echo "thread_per_device on $n devices: output as expected"
}
run_threads 8
ASCEND_RT_VISIBLE_DEVICES=2,5 run_threads 2

# 4. MPI + root info, profiled.
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
  echo "no MPI installed: the MPI program is skipped"
  exit 0
fi
mpi_inc=$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')
[ -n "$mpi_inc" ] || mpi_inc=$(mpicc -show | tr ' ' '\n' | sed -n 's/^-I//p' | head -1)
mpi_home=$(dirname "$mpi_inc")
mpi_cxx=""
mpi_flags=()
if grep -q "Open MPI" <<<"$(mpirun --version 2>&1)"; then
  mpi_cxx=-lmpi_cxx # Open MPI's C++ bindings (mpi.h pulls them in under C++); MPICH needs nothing
  mpi_flags=(--oversubscribe --mca btl self,vader)
  [ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
fi
make -C "$scratch/work" mpi MPI_HOME="$mpi_home" MPI_CXX_LIB="$mpi_cxx" >"$scratch/make.log" 2>&1 ||
  { cat "$scratch/make.log"; fail "make mpi"; }
out=$(cd "$scratch/work" && HCCL_TEST_PROFILING=1 HCCL_TEST_PROFILING_PATH="$scratch/prof" \
      timeout 180 mpirun "${mpi_flags[@]}" -n 2 ./mpi_rootinfo 2>&1) || { echo "$out"; fail "mpirun -n 2 mpi_rootinfo"; }
echo "$out"
grep -q "mpi check passed" <<<"$out" || fail "the MPI program did not pass"
[ "$(grep -c "allreduce over mapped memory correct" <<<"$out")" -eq 2 ] || fail "not every rank checked its result"
traces=("$scratch"/prof/hostccl_trace_*.json)
[ "${#traces[@]}" -eq 2 ] || fail "expected one trace per rank, found ${#traces[@]}"
for t in "${traces[@]}"; do
  [ "$(grep -o '"name":"allreduce","cat":"hccl"' "$t" | wc -l)" -eq 5 ] || fail "$t lacks its 5 allreduces"
done
echo "MPI program on 2 ranks: results correct, one Chrome trace per rank"
