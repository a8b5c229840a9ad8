#!/usr/bin/env bash
# `make install` into a scratch prefix (and with DESTDIR): the package lands where docs/python.md
# says, finds the installed libraries by itself, and works from any directory with no other path.
set -euo pipefail
build_dir=$1
python=$2
"$python" -c "import numpy" 2>/dev/null || { echo "SKIP: numpy is not installed for $python"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
unset PYTHONPATH HOSTCCL_LIBRARY_PATH

check() {  # check PREFIX_AS_INSTALLED PKGDIR
  local pkg=$2/hostccl
  [ -f "$pkg/__init__.py" ] && [ -f "$pkg/_installed.py" ] && [ -f "$pkg/torch.py" ] ||
    { echo "package not installed at $pkg"; ls -R "$1" | head -40; exit 1; }
  [ ! -e "$pkg/__pycache__" ] || { echo "bytecode installed"; exit 1; }
  (cd / && PYTHONPATH=$2 "$python" -c "
import numpy, hostccl
assert hostccl.library_path.startswith('$1/'), hostccl.library_path
x = numpy.ones(4, numpy.float32)
hostccl.init().all_reduce(x)
assert (x == 1).all()
print('installed package works:', hostccl.library_path)")
}

cmake --install "$build_dir" --prefix "$scratch/p" >/dev/null
check "$scratch/p" "$scratch/p/lib/python$ver/dist-packages"
# A moved tree still works: the library directory is relative to the package.
mv "$scratch/p" "$scratch/moved"
check "$scratch/moved" "$scratch/moved/lib/python$ver/dist-packages"
# Prefix /usr under DESTDIR: Debian's system layout.
DESTDIR=$scratch/root cmake --install "$build_dir" --prefix /usr >/dev/null
check "$scratch/root/usr" "$scratch/root/usr/lib/python3/dist-packages"
