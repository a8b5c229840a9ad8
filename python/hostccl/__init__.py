"""hostccl for Python: the HCCL collectives on numpy arrays, torch CPU tensors and any buffer.

    import hostccl
    comm = hostccl.init()                 # under hccl-run, torchrun, mpirun (mpi4py) or srun
    x = numpy.ones(1024, numpy.float32)
    comm.all_reduce(x)                    # in place, zero copy; x == comm.size

``import hostccl.torch`` registers the torch.distributed backend "hccl". docs/python.md has the
whole interface. The package is pure Python over libhccl and libascendcl (ctypes).
"""
from ._buffer import DataType
from ._lib import HcclError, Result, library_path
from .comm import Comm, ReduceOp, broadcast_root_info, get_root_info, group
from .launch import LaunchInfo, device_count, exchange_root_info, init, launch_info
from .memory import empty, raw_buffer, zeros
from .stream import Stream, Work


def version():
    """The library's version as (major, minor, patch)."""
    import ctypes

    from . import _lib

    v = ctypes.c_uint32()
    _lib.check(_lib.HcclHostGetVersion(ctypes.byref(v)), "HcclHostGetVersion")
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)


__all__ = ["Comm", "DataType", "HcclError", "LaunchInfo", "ReduceOp", "Result", "Stream", "Work",
           "broadcast_root_info", "device_count", "empty", "exchange_root_info", "get_root_info", "group", "init",
           "launch_info", "library_path", "raw_buffer", "version", "zeros"]
