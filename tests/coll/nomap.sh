#!/usr/bin/env bash
# Ranks of one host that cannot map each other's memory (here: rank 1 runs as another user, as in
# containers with different users) must still work, over TCP: every collective on 2 ranks, the
# fallback said once as a warning, no error line. Root only (setpriv to nobody); skips otherwise.
# Then rank 1 in a pid namespace of its own (one rank per pod): the ranks count as different hosts
# (they cannot see each other's /proc) and run over TCP, correctly and without an error line.
# usage: nomap.sh HCCL_RUN COLL_MATRIX
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to run a rank as another user"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: needs setpriv (util-linux)"; exit 77; }
hccl_run=$1 matrix=$2
wrapper=$(mktemp) copy=
trap 'rm -f "$wrapper"; [ -z "$copy" ] || rm -rf "$copy"' EXIT
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# The other user must be able to run the binary and read its libraries. A build tree it cannot
# reach (a clone in a 0700 mktemp directory, as CI makes) gets a copy of both in a directory it can.
if ! as_nobody "$matrix" --counts 0 >/dev/null 2>&1; then
  copy=$(mktemp -d)
  chmod 755 "$copy"
  deps=$(ldd "$matrix")
  cp "$matrix" "$copy/"
  for lib in $(awk '/lib(hccl|ascendcl)[.]so/ {print $3}' <<<"$deps"); do cp -L "$lib" "$copy/"; done
  chmod -R a+rX "$copy"
  matrix=$copy/$(basename "$matrix")
  export LD_LIBRARY_PATH=$copy${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
probe=$(as_nobody "$matrix" --counts 0 2>&1) || { echo "SKIP: user nobody cannot run $matrix here ($probe)"; exit 77; }
cat > "$wrapper" <<'W'
#!/bin/sh
[ "$RANK" = 1 ] && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
exec "$@"
W
chmod 755 "$wrapper"
out=$("$hccl_run" -n 2 --timeout 200 "$wrapper" "$matrix" --counts 0,1,7,4097 --dtypes int8,fp16,fp32 2>&1) ||
  { echo "$out"; echo "FAIL: the job failed"; exit 1; }
grep -q "coll_matrix: 2 ranks, [0-9]* cases, 0 failed" <<<"$out" || { echo "$out"; echo "FAIL: wrong results"; exit 1; }
grep -q "cannot share memory (see above): using TCP between all ranks" <<<"$out" ||
  { echo "$out"; echo "FAIL: no warning about the fallback"; exit 1; }
if grep -q "\] error:" <<<"$out"; then echo "$out"; echo "FAIL: an error line for a handled fallback"; exit 1; fi
command -v unshare >/dev/null || { echo "ok: ranks that cannot share memory run over TCP (no unshare: pid namespaces not tried)"; exit 0; }
cat > "$wrapper" <<'W'
#!/bin/sh
[ "$RANK" = 1 ] && exec unshare --pid --fork --mount-proc "$@"
exec "$@"
W
out=$("$hccl_run" -n 2 --timeout 200 "$wrapper" "$matrix" --counts 0,1,7,4097 --dtypes int8,fp16,fp32 2>&1) ||
  { echo "$out"; echo "FAIL: the job with a rank in its own pid namespace failed"; exit 1; }
grep -q "coll_matrix: 2 ranks, [0-9]* cases, 0 failed" <<<"$out" || { echo "$out"; echo "FAIL: wrong results (pid namespace)"; exit 1; }
if grep -q "\] error:" <<<"$out"; then echo "$out"; echo "FAIL: an error line (pid namespace)"; exit 1; fi
echo "ok: ranks that cannot share memory (another user, another pid namespace) run over TCP"
