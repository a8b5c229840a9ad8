#!/usr/bin/env bash
# docs/api.md against the code: every function the public headers declare has a table row (with
# its status) in docs/api.md, none of them is listed as "not provided", and every HCCL/ACL symbol
# the libraries export is declared in a public header (aclrtHost* is the libraries' private
# interface, rt_ext.h).
# Usage: check_api_doc.sh SOURCE_DIR LIBHCCL LIBASCENDCL
set -euo pipefail
src=$1
doc="$src/docs/api.md"
fail() { echo "FAIL: $*" >&2; exit 1; }

declared=$(cat "$src"/include/hccl/*.h "$src"/include/acl/*.h | tr '\n' ' ' |
           grep -oE '(extern|static inline) [A-Za-z0-9_ *]+[ *]((Hccl|acl)[A-Za-z0-9_]+) *\(' |
           grep -oE '(Hccl|acl)[A-Za-z0-9_]+ *\($' | tr -d '( ' | sort -u)
[ "$(wc -l <<<"$declared")" -gt 100 ] || fail "found only $(wc -l <<<"$declared") declarations"
rows=$(grep '^| ' "$doc")
not_provided=$(grep '^Not provided' "$doc" || true)
for f in $declared; do
  grep -q "\`$f\`" <<<"$rows" || fail "$f is declared but has no row in docs/api.md"
  if grep -q "\`$f\`" <<<"$not_provided"; then fail "$f is declared but listed as not provided"; fi
done
for lib in "$2" "$3"; do
  for sym in $(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | grep -E '^(Hccl|acl)' | grep -v '^aclrtHost'); do
    grep -qx "$sym" <<<"$declared" || fail "$(basename "$lib") exports $sym, which no public header declares"
  done
done
echo "docs/api.md lists all $(wc -l <<<"$declared") declared functions; every export is declared"
