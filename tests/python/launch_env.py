"""hostccl.init() and dist.init_process_group("hccl") under torchrun's environment (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, no hccl-run store): ranks started by hand with those
variables (--env), and by torchrun's agent (--torchrun). hostccl.init() under mpirun, the root info
broadcast through mpi4py (--mpirun).
Run: /usr/bin/python3 tests/python/launch_env.py --env | --torchrun | --mpirun
"""
import shutil
import os
import socket
import subprocess
import sys

from _setup import ROOT, check, require

require("torch")
N = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker():
    import torch
    import torch.distributed as dist

    import hostccl
    import hostccl.torch  # noqa: F401

    r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # 1. hostccl.init() first: the root info goes through a torch store at MASTER_ADDR:MASTER_PORT.
    comm = hostccl.init()
    check((comm.rank, comm.size) == (r, n), f"init: {comm}")
    x = torch.full((100,), float(r + 1))
    comm.all_reduce(x)
    check(bool((x == n * (n + 1) / 2).all()), f"hostccl.init all_reduce: {x[:4]}")
    # 2. then torch's own init on the same rendezvous (the store server is shared).
    dist.init_process_group("hccl")
    y = torch.arange(10, dtype=torch.int64) * (r + 1)
    dist.all_reduce(y)
    check(torch.equal(y, torch.arange(10) * (n * (n + 1) // 2)), f"dist all_reduce: {y}")
    # 3. and hostccl.init() again, now through torch's default store.
    with hostccl.init() as again:
        z = torch.full((3,), r, dtype=torch.int32)
        again.all_reduce(z, op="max")
        check(torch.equal(z, torch.full((3,), n - 1, dtype=torch.int32)), f"second init: {z}")
    dist.barrier()
    dist.destroy_process_group()
    comm.close()
    print(f"rank {r}: launch_env passed", flush=True)


def mpi_worker():
    import numpy as np

    import hostccl

    info = hostccl.launch_info()
    check(info.launcher == "openmpi" and info.size == N, f"launch info under mpirun: {info}")
    comm = hostccl.init()
    x = np.arange(100, dtype=np.int64) * (comm.rank + 1)
    comm.all_reduce(x)
    check(np.array_equal(x, np.arange(100) * (N * (N + 1) // 2)), f"all_reduce under mpirun: {x[:4]}")
    comm.close()
    print(f"rank {comm.rank}: launch_env --mpirun passed", flush=True)


def run_mpirun():
    require("numpy", "mpi4py")
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found (apt-get install openmpi-bin)")
        return 77
    cmd = ["mpirun", "--oversubscribe", "-np", str(N), "--mca", "btl", "self,vader", sys.executable, __file__,
           "--mpi-worker"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return wait_all([subprocess.Popen(cmd, env=clean_env())])


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "HOSTCCL_STORE", "OMPI_", "PMI_",
                                 "SLURM_", "TORCHELASTIC", "GROUP_"))}


def run_env():
    port = free_port()
    procs = []
    for r in range(N):
        env = dict(clean_env(), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(N),
                   LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(N))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker"], env=env))
    return wait_all(procs)


def run_torchrun():
    """torchrun's elastic agent through its Python API: Debian 12's torchrun command (torch 1.13 on
    Python 3.11) fails parsing --redirects/--tee before it starts any worker."""
    from torch.distributed.elastic.multiprocessing import Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ.clear()
    os.environ.update(clean_env())
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=N, run_id="hostccl-test",
                          rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{free_port()}", max_restarts=0,
                          monitor_interval=0.1, redirects=Std.NONE, tee=Std.NONE)
    elastic_launch(config, sys.executable)(__file__, "--worker")
    return 0


def wait_all(procs):
    status = 0
    for p in procs:
        try:
            status = p.wait(timeout=150) or status
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print("launch_env: ranks did not finish within 150 s")
            return 1
    return status


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", os.path.join(ROOT, "python"))
    mode = sys.argv[1] if len(sys.argv) > 1 else "--env"
    if mode == "--worker":
        worker()
    elif mode == "--mpi-worker":
        mpi_worker()
    else:
        sys.exit({"--env": run_env, "--torchrun": run_torchrun, "--mpirun": run_mpirun}[mode]())
