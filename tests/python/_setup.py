"""Shared by the Python tests: find the package in the checkout, skip cleanly without numpy/torch.

CTest sets PYTHONPATH and HOSTCCL_LIBRARY_PATH (tests/python/CMakeLists.txt); run by hand, the
tests find <checkout>/python and <checkout>/build themselves.
"""
import importlib
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("hostccl") is None:
    sys.path.insert(0, os.path.join(ROOT, "python"))

SKIP = 77  # SKIP_RETURN_CODE of the CTest tests


def require(*modules):
    """Exit with SKIP and one clear line when a module is missing from this interpreter."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            print(f"SKIP: {name} is not installed for {sys.executable} (apt-get install python3-{name}; "
                  "`make test` as root installs it through scripts/deps.sh)")
            sys.exit(SKIP)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
