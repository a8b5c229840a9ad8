"""Where this process sits in the job, and ``init()``: a communicator from the launcher's environment."""
import ctypes
import itertools
import os
from datetime import timedelta
from typing import NamedTuple

from . import _lib
from .comm import Comm, broadcast_root_info, get_root_info


class LaunchInfo(NamedTuple):
    """HcclHostLaunchInfo: rank, size, local rank and size, and which launcher said so."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    launcher: str


def launch_info():
    """Read the launcher's variables (hccl-run/torchrun, Open MPI, MPICH/PMI, Slurm; none: rank 0 of 1)."""
    info = _lib.LaunchInfo()
    _lib.check(_lib.HcclHostGetLaunchInfo(ctypes.byref(info)), "HcclHostGetLaunchInfo")
    return LaunchInfo(info.rank, info.size, info.localRank, info.localSize, info.launcher.decode())


def device_count():
    n = ctypes.c_uint32()
    _lib.check_acl(_lib.aclrtGetDeviceCount(ctypes.byref(n)), "aclrtGetDeviceCount")
    return n.value


_exchanges = itertools.count()  # n-th init() of this process: key of its root info in a torch store
_torch_stores = []  # rendezvous stores are kept: a later init_process_group(env://) shares their server


def _torch_store(info, timeout):
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.distributed_c10d._get_default_store()
    from torch.distributed import rendezvous

    store, _, _ = next(rendezvous("env://", rank=info.rank, world_size=info.size, timeout=timeout))
    _torch_stores.append(store)
    return store


def _exchange_by_torch_store(info, mine, timeout):
    try:
        store = _torch_store(info, timeout)
    except ImportError:
        raise _lib.HcclError(_lib.Result.E_NOT_SUPPORT, "MASTER_ADDR/MASTER_PORT name a torch store, but torch "
                             "is not installed (apt-get install python3-torch)", "hostccl.init") from None
    key = f"hostccl/root_info/{next(_exchanges)}"
    if info.rank == 0:
        store.set(key, mine)
        return mine
    store.wait([key], timeout)
    return bytes(store.get(key))


def _exchange_by_mpi(info, mine):
    """Through mpi4py's MPI_COMM_WORLD; None when mpi4py is missing or its world is not the job's."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    world = MPI.COMM_WORLD
    if (world.Get_rank(), world.Get_size()) != (info.rank, info.size):
        return None  # e.g. launcher variables without mpirun: MPI starts as a singleton
    return world.bcast(mine, root=0)


def exchange_root_info(info, timeout=timedelta(seconds=120)):
    """Rank 0's fresh root info, given to every rank of the job by whatever the launcher offers.

    hccl-run's store (HOSTCCL_STORE), else a torch store at MASTER_ADDR:MASTER_PORT (torchrun), else
    MPI through mpi4py under mpirun/srun.
    """
    mine = get_root_info() if info.rank == 0 else None
    if info.size == 1:
        return mine
    if os.environ.get("HOSTCCL_STORE"):
        return broadcast_root_info(mine)
    if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
        return _exchange_by_torch_store(info, mine, timeout)
    if info.launcher in ("openmpi", "pmi", "slurm"):
        root = _exchange_by_mpi(info, mine)
        if root is not None:
            return root
    raise _lib.HcclError(
        _lib.Result.E_NOT_SUPPORT,
        f"rank {info.rank} of {info.size} (launcher {info.launcher}) has no way to receive rank 0's root info: "
        "run under hccl-run, set HOSTCCL_STORE and HOSTCCL_STORE_TOKEN, set MASTER_ADDR and MASTER_PORT "
        "(torchrun; needs torch), or run under mpirun/srun with mpi4py installed (whose MPI_COMM_WORLD must "
        "be the job's)", "hostccl.init")


def init(*, name=None, buffer_size_mb=None, deterministic=None, device=None, timeout=timedelta(seconds=120)):
    """A communicator of every rank of the job, from the launcher's environment.

    The rank and size come from ``launch_info()``; rank 0's root info reaches the others as
    ``exchange_root_info`` says. The calling thread's device becomes ``device`` (default: the
    local rank, modulo the device count). Every rank must call it, in the same order as its other
    ``init()`` calls.
    """
    info = launch_info()
    if device is None:
        device = info.local_rank % max(1, device_count())
    root = exchange_root_info(info, timeout)
    return Comm(info.size, info.rank, root, name=name, buffer_size_mb=buffer_size_mb, deterministic=deterministic,
                device=device)
