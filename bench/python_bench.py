#!/usr/bin/python3
"""The Python package's figures (docs/python.md), side by side in the same two processes.

1. torch.distributed AllReduce (fp32 SUM) of CPU tensors through the "hccl" backend against gloo,
   per size, alternating the two backends round after round.
2. The Python call overhead of one small collective: the same blocking 8-byte AllReduce loop
   (enqueue, synchronise) run by C (bench/peers/call_loop.c, loaded with ctypes, on the very
   communicator, stream and tensor), by hostccl.Comm.all_reduce, and by dist.all_reduce.

Each figure is the best of ROUNDS rounds of the mean time per call; the median is printed too.

    /usr/bin/python3 bench/python_bench.py [--build build] [--rounds 5] [--out FILE.md]

The driver builds the C loop into BUILD/bench/, starts two ranks under hccl-run with Debian's
interpreter and writes the table. Needs python3-torch and python3-numpy (scripts/deps.sh test).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = [16 * 1024, 1024 * 1024]


def build_call_loop(build):
    out = os.path.join(build, "bench", "libcall_loop.so")
    src = os.path.join(HERE, "peers", "call_loop.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run(["cc", "-O2", "-std=c11", "-shared", "-fPIC", "-I", os.path.join(ROOT, "include"), "-o", out,
                        src, "-L", build, "-lhccl", "-lascendcl", "-Wl,-rpath," + build], check=True)
    return out


def iters_for(nbytes, per_call_us):
    """Enough calls for ~60 ms per measurement, at least 10."""
    return max(10, int(60000 / max(per_call_us, 1.0)))


def timed(fn, iters):
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters * 1e6


def worker(args):
    import torch
    import torch.distributed as dist

    import hostccl
    import hostccl.torch as ht

    dist.init_process_group("hccl")
    gloo = dist.new_group(backend="gloo")
    rank = dist.get_rank()
    pg = dist.distributed_c10d._get_default_group()
    results = {"sizes": {}, "overhead": {}}

    # 1. AllReduce through torch: hccl against gloo.
    for nbytes in SIZES:
        t = torch.zeros(nbytes // 4)
        groups = {"hccl": None, "gloo": gloo}
        iters = {}
        for name, g in groups.items():  # warm up and size the loops on a short run; ranks agree
            per = torch.tensor([timed(lambda: dist.all_reduce(t, group=g), 10)], dtype=torch.float64)
            dist.all_reduce(per, op=dist.ReduceOp.MAX, group=gloo)
            iters[name] = iters_for(nbytes, float(per))
        rows = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, g in groups.items():
                dist.barrier(group=gloo)
                rows[name].append(timed(lambda: dist.all_reduce(t, group=g), iters[name]))
        results["sizes"][nbytes] = {n: (min(v), statistics.median(v)) for n, v in rows.items()}

    # 2. Overhead of one 8-byte AllReduce: C loop vs hostccl.Comm vs dist.all_reduce (hccl).
    lib = ctypes.CDLL(args.call_loop)
    lib.hostccl_bench_allreduce_loop.restype = ctypes.c_double
    lib.hostccl_bench_allreduce_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                                 ctypes.c_int, ctypes.c_int]
    comm = pg.comm
    small = torch.zeros(2)
    iters = 20000

    def c_loop():
        s = lib.hostccl_bench_allreduce_loop(comm.handle, comm.stream.handle, small.data_ptr(), 2,
                                             int(hostccl.DataType.FP32), iters)
        if s < 0:
            raise RuntimeError("C loop failed")
        return s / iters * 1e6

    from hostccl import _lib

    ptr, h, sh = small.data_ptr(), comm.handle, comm.stream.handle
    enqueue, sync = _lib.HcclAllReduce, _lib.aclrtSynchronizeStream
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    tensors = [small]

    def bare_ctypes():
        enqueue(ptr, ptr, 2, 4, 0, h, sh)
        sync(sh)

    # From the bare FFI up to torch's own wrapper, so that each layer's cost can be read off.
    loops = {"C": c_loop,
             "ctypes: HcclAllReduce + aclrtSynchronizeStream": lambda: timed(bare_ctypes, iters),
             "hostccl.Comm.all_reduce": lambda: timed(lambda: comm.all_reduce(small), iters),
             "ProcessGroupHCCL.allreduce().wait()": lambda: timed(lambda: pg.allreduce(tensors, opts).wait(), iters),
             "dist.all_reduce": lambda: timed(lambda: dist.all_reduce(small), iters)}
    for fn in loops.values():
        fn()
    rows = {name: [] for name in loops}
    for _ in range(args.rounds):
        for name, fn in loops.items():
            dist.barrier(group=gloo)
            rows[name].append(fn())
    results["overhead"] = {n: (min(v), statistics.median(v)) for n, v in rows.items()}

    # 3. What the 1 MiB figure is made of: the library's paths for plain and arena memory.
    n = (1 << 20) // 4
    plain, half, arena = torch.zeros(n), torch.zeros(n // 2), ht.empty(n)
    arena.zero_()

    def rs_ag():
        comm.reduce_scatter(plain, half)
        comm.all_gather(half, plain)

    paths = {"all_reduce, plain tensor": lambda: comm.all_reduce(plain),
             "all_reduce, arena tensor (hostccl.torch.empty)": lambda: comm.all_reduce(arena),
             "reduce_scatter + all_gather, plain tensor": rs_ag}
    rows = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, fn in paths.items():
            dist.barrier(group=gloo)
            rows[name].append(timed(fn, 100))
    results["paths"] = {n: (min(v), statistics.median(v)) for n, v in rows.items()}
    results["torch"] = torch.__version__
    if rank == 0:
        print("RESULT " + json.dumps(results), flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    del ht


def table(res, args, load_before, load_after, commit):
    lines = [f"# Python package — {args.date}", "",
             f"hostccl {commit}, torch {res['torch']}, 2 ranks under hccl-run (default binding), Debian's "
             f"/usr/bin/python3. Command: `/usr/bin/python3 bench/python_bench.py --rounds {args.rounds}`.  ",
             f"Load before: `{load_before}`  ", f"Load after: `{load_after}`", "",
             "## AllReduce fp32 SUM of a CPU tensor through torch.distributed (time per call, us)", "",
             "Best of the rounds (median in brackets); both backends in the same processes, alternating.", "",
             "| size | hccl | gloo | gloo / hccl |", "|---:|---:|---:|---:|"]
    for nbytes, row in sorted(res["sizes"].items(), key=lambda kv: int(kv[0])):
        h, g = row["hccl"], row["gloo"]
        size = f"{int(nbytes) // 1024} KiB" if int(nbytes) < 1 << 20 else f"{int(nbytes) >> 20} MiB"
        lines.append(f"| {size} | {h[0]:.1f} ({h[1]:.1f}) | {g[0]:.1f} ({g[1]:.1f}) | {g[0] / h[0]:.1f}x |")
    c = res["overhead"]["C"][0]
    lines += ["", "## One 8-byte AllReduce, blocking (enqueue + synchronise per call), time per call (us)", "",
              "Same communicator, stream and tensor; the C loop is bench/peers/call_loop.c called through ctypes.",
              "", "| caller | best | median | over C |", "|---|---:|---:|---:|"]
    for name, (best, med) in res["overhead"].items():
        lines.append(f"| {name} | {best:.2f} | {med:.2f} | {best - c:+.2f} |")
    lines += ["", "## 1 MiB fp32 SUM through hostccl.Comm by memory kind and path, time per call (us)", "",
              "| path | best | median |", "|---|---:|---:|"]
    for name, (best, med) in res["paths"].items():
        lines.append(f"| {name} | {best:.1f} | {med:.1f} |")
    return "\n".join(lines) + "\n"


def driver(args):
    build = os.path.abspath(args.build)
    args.call_loop = build_call_loop(build)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), HOSTCCL_LIBRARY_PATH=build)
    cmd = [os.path.join(build, "tools", "hccl-run", "hccl-run"), "-n", "2", "--timeout", "600", "/usr/bin/python3",
           os.path.abspath(__file__), "--worker", "--rounds", str(args.rounds), "--call-loop", args.call_loop]
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    sys.stderr.write(out.stderr)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        sys.stdout.write(out.stdout)
        sys.exit(f"python_bench: the ranks failed (status {out.returncode})")
    res = json.loads(lines[0][len("RESULT "):])
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    text = table(res, args, load_before, load_after, commit)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", help="write the markdown table here too")
    p.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--call-loop", help=argparse.SUPPRESS)
    args = p.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
