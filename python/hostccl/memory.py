"""Arrays in the shared arena (aclrtMalloc memory).

Collectives accept any memory, but on arena memory the ranks of a host read each other's buffers
in place (zero copy between ranks) where plain memory takes a copy path: for large buffers used
again and again (a model's activations), allocate them here.
"""
import ctypes

from . import _lib
from .stream import ensure_device


class _Block:
    """One aclrtMalloc allocation, freed when the last array over it goes away."""

    __slots__ = ("address",)

    def __init__(self, nbytes):
        ensure_device()
        ptr = ctypes.c_void_p()
        _lib.check_acl(_lib.aclrtMalloc(ctypes.byref(ptr), max(1, nbytes), 0), "aclrtMalloc")
        self.address = ptr.value

    def __del__(self):
        if self.address and _lib is not None:
            _lib.aclrtFree(self.address)


def raw_buffer(nbytes):
    """A writable ctypes char array of `nbytes` in the arena; it frees the memory when collected."""
    block = _Block(nbytes)
    arr = (ctypes.c_char * max(1, nbytes)).from_address(block.address)
    arr._hostccl_block = block
    return arr


def empty(shape, dtype="float32"):
    """A numpy array of `shape` and `dtype` in the arena, uninitialised."""
    import numpy as np

    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    buf = raw_buffer(count * dtype.itemsize)
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)


def zeros(shape, dtype="float32"):
    """As ``empty``, filled with zeros."""
    a = empty(shape, dtype)
    a.fill(0)
    return a
