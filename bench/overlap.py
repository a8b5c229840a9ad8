#!/usr/bin/python3
"""Overlap of communication and compute: hostccl against Open MPI and MPICH, same run, 2 ranks.

What the seed's overlap pattern (HcclAllReduce; compute; aclrtSynchronizeStream) and its MPI
equivalent (MPI_Iallreduce; compute; MPI_Wait) give, per size (fp32 sum AllReduce):

  peer wait   rank 0 enqueues, then sleeps (--sleep-ms); how long the other rank waits for the op,
              from the later of the two enqueues, as a ratio to the bare op (1.0: the op did not
              wait for rank 0 to come back);
  ovl/seq     enqueue + compute + synchronise against the op followed by the same compute, every
              rank computing (compute = the bare op's time), ranks bound to a CPU each: <= 1.0
              means overlapping is never slower than doing the two in turn;
  hidden      (seq - ovl) / the shorter of op and compute: the fraction of it that overlapping
              hid (pipelined: each round enqueues the next op and waits for the previous one's
              event, double buffering, so that the stream is never drained at a wait). Measured
              twice: with no spare core (as above), and with a core free for the library's
              progress: hccl-run's default binding when there are 2 CPUs per rank; on a smaller
              machine only rank 0 computes, ranks unbound, so that the core of the rank that waits
              is the free one (the table says which).

The drivers are bench/peers/overlap_hccl.c and overlap_mpi.c (the measurements themselves are
bench/peers/overlap_common.c, shared); this script builds them into BUILD/bench. Implementations
run in turns (hostccl, Open MPI, MPICH, then again, --rounds times); every figure is the median over
the rounds. Stdlib only.

  /usr/bin/python3 bench/overlap.py --build build [--quick] [--json OUT] [--sizes 8,64K,4M] [--no-build]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")
CFLAGS = ["-O2", "-g", "-std=c11", "-Wall", "-Wextra"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build_drivers(build):
    """Compile the drivers that can be built here; returns {impl: (launcher argv prefix, binary)}."""
    out = os.path.join(build, "bench")
    os.makedirs(out, exist_ok=True)
    common = [os.path.join(PEERS, "overlap_common.c")]
    impls = {}
    hccl = os.path.join(out, "overlap_hccl")
    lib = os.path.abspath(build)
    subprocess.run(["cc"] + CFLAGS + ["-I", os.path.join(ROOT, "include"), "-o", hccl,
                    os.path.join(PEERS, "overlap_hccl.c")] + common +
                   ["-L" + lib, "-lhccl", "-lascendcl", "-Wl,-rpath," + lib], check=True)
    impls["hostccl"] = hccl
    for name, mpicc in (("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")):
        if shutil.which(mpicc) is None:
            log("overlap.py: skipping %s: %s not found" % (name, mpicc))
            continue
        binary = os.path.join(out, "overlap_mpi." + name)
        pretty = {"openmpi": "Open MPI", "mpich": "MPICH"}[name]
        subprocess.run([mpicc] + CFLAGS + ['-DOVERLAP_MPI_NAME="%s"' % pretty, "-o", binary,
                        os.path.join(PEERS, "overlap_mpi.c")] + common, check=True)
        impls[name] = binary
    return impls


def launcher(build, impl, bound, ranks):
    """How to start `ranks` ranks of impl, each bound to a CPU of its own (bound) or not."""
    if impl == "hostccl":
        argv = [os.path.join(build, "tools", "hccl-run", "hccl-run"), "-n", str(ranks)]
        return argv if bound else argv + ["--bind-to", "none"]
    if impl == "openmpi":
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                "core" if bound else "none", "-np", str(ranks)]
    return ["mpirun.mpich", "-bind-to", "core" if bound else "none", "-np", str(ranks)]


def run_driver(argv, timeout, cpus=None):
    """Run a driver, on the CPUs `cpus` only where given (its launcher binds within them)."""
    pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=pin)
    if done.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(argv), done.returncode, done.stderr[-1500:]))
    return [json.loads(line[len("OVERLAP "):]) for line in done.stdout.splitlines() if line.startswith("OVERLAP ")]


def scenarios(ranks):
    """(name, bound, driver args, CPUs to run on or None) of the two scenarios on this machine. On a
    machine with more CPUs than that, the drivers run on the first `ranks` (no spare core) or
    2 x `ranks` CPUs (core free), so that each rank's share is what the scenario says."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) >= 2 * ranks:
        free = ("core free (2 CPUs per rank, every rank computes)", True, [], set(mine[:2 * ranks]))
    else:
        free = ("core free (%d CPUs: only rank 0 computes, unbound)" % len(mine), False, ["--compute-ranks", "0"],
                None)
    return [("no spare core", True, [], set(mine[:ranks]) if len(mine) > ranks else None), free]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    return "-" if v is None else "%.*f" % (digits, v)


def measure(args, impls):
    """rows[(scenario, impl, bytes)] = list of the driver's rows, one per round."""
    rows = {}
    plan = scenarios(2)
    for r in range(args.rounds):
        for si, (sname, bound, extra, cpus) in enumerate(plan):
            for impl, binary in impls.items():
                argv = launcher(args.build, impl, bound, 2) + [binary, "--sizes", args.sizes,
                                                               "--sleep-ms", str(args.sleep_ms)] + extra
                if si > 0:
                    argv += ["--phases", "overlap"]  # the sleep test does not depend on the binding
                if args.quick:
                    argv.append("--quick")
                log("overlap.py: round %d/%d, %s, %s" % (r + 1, args.rounds, sname, impl))
                try:
                    for row in run_driver(argv, args.timeout, cpus):
                        rows.setdefault((si, impl, row["bytes"]), []).append(row)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    log("overlap.py: %s" % e)
    return plan, rows


def summarise(plan, rows, impls):
    out = []
    sizes = sorted({k[2] for k in rows})
    for impl in impls:
        for size in sizes:
            a, b = rows.get((0, impl, size), []), rows.get((1, impl, size), [])
            if not a:
                continue
            bare = median([x["bare_us"] for x in a])
            wait = median([x["sleep_wait_us"] for x in a])
            cold = median([x.get("cold_us") for x in a])
            single = median([x.get("single_us") for x in a])
            seq, ovl = median([x["seq_us"] for x in a]), median([x["ovl_us"] for x in a])
            out.append({
                "impl": impl, "bytes": size, "bare_us": bare, "sleep_ms": a[0]["sleep_ms"],
                "peer_wait_us": wait, "peer_wait_ratio": wait / bare if wait is not None and bare else None,
                "first_wait_us": median([x.get("first_wait_us") for x in a]),
                "cold_us": cold, "peer_wait_over_cold": wait / cold if wait is not None and cold else None,
                "single_us": single,
                "peer_wait_over_single": wait / single if wait is not None and single else None,
                "seq_us": seq, "ovl_us": ovl, "ovl_over_seq": ovl / seq if seq else None,
                "pipe_us": median([x.get("pipe_us") for x in a]),
                "pipe_over_seq": (median([x.get("pipe_us") for x in a]) or 0) / seq if seq else None,
                "pipe_hidden_core_free": median([x.get("pipe_hidden") for x in b]) if b else None,
                "hidden_no_spare": median([x["hidden"] for x in a]),
                "hidden_core_free": median([x["hidden"] for x in b]) if b else None,
                "free_seq_us": median([x["seq_us"] for x in b]) if b else None,
                "free_ovl_us": median([x["ovl_us"] for x in b]) if b else None,
                "rounds": len(a)})
    return out


def size_name(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %siB" % (n >> shift, unit)
    return "%d B" % n


def print_table(summary, plan, args):
    names = {"hostccl": "hostccl", "openmpi": "Open MPI", "mpich": "MPICH"}
    print("Overlap, 2 ranks, fp32 sum AllReduce (median of %d rounds; %s)" % (args.rounds, load()))
    print()
    print("| impl | size | bare op us | peer wait when rank 0 sleeps %g ms: us (x bare) | single op us "
          "(peer wait / single) | cold op us (peer wait / cold) | first round's peer wait us | seq us | ovl us | "
          "ovl/seq | hidden, no spare core | hidden, %s | pipelined / seq, no spare core | "
          "hidden pipelined, core free |" %
          (args.sleep_ms, plan[1][0]))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in summary:
        print("| %s | %s | %s | %s (%s) | %s (%s) | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            names.get(r["impl"], r["impl"]), size_name(r["bytes"]), fmt(r["bare_us"]), fmt(r["peer_wait_us"], 1),
            fmt(r["peer_wait_ratio"]), fmt(r.get("single_us"), 1), fmt(r.get("peer_wait_over_single")),
            fmt(r["cold_us"], 1), fmt(r["peer_wait_over_cold"]), fmt(r.get("first_wait_us"), 1), fmt(r["seq_us"]),
            fmt(r["ovl_us"]), fmt(r["ovl_over_seq"]), fmt(r["hidden_no_spare"]), fmt(r["hidden_core_free"]),
            fmt(r["pipe_over_seq"] or None), fmt(r["pipe_hidden_core_free"])))
    print()
    print("seq: the op, then compute; ovl: enqueue (MPI_Iallreduce), compute, synchronise (MPI_Wait); compute = "
          "the bare op's time. hidden = (seq - ovl) / min(op, compute); negative: overlapping was slower. "
          "single op: a barrier and one blocking op, timed as the peer wait is (a lone op, against the bare "
          "op's average over a loop of them). cold op: the same after every rank was idle as long as rank 0 "
          "sleeps (the floor of the peer wait: what the op costs once ranks come back from idle). first round: the "
          "peer wait of the first sleep round, which follows the bare op's loop of blocking calls (a stream still "
          "in the synchronous pattern; the median leaves it out). pipelined: "
          "each round enqueues the next op and records its event (MPI_Iallreduce), computes, and waits for the "
          "previous op's event (MPI_Wait), so that the next op is always queued behind the one waited for; "
          "its hidden fraction is (seq - pipelined round) / min(op, compute).")


def load():
    try:
        with open("/proc/loadavg") as f:
            return "load average %s" % " ".join(f.read().split()[:3])
    except OSError:
        return "load unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="hostccl build folder (libraries, hccl-run)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and sizes (about a minute)")
    ap.add_argument("--json", help="also write the summary rows as JSON here")
    ap.add_argument("--sizes", help="comma-separated sizes (K, M suffixes); default 8,64K,1M,4M (quick: 64K,4M)")
    ap.add_argument("--rounds", type=int, help="rounds of every implementation (default 3, quick 1)")
    ap.add_argument("--sleep-ms", type=float, default=50.0, help="how long rank 0 sleeps after enqueueing")
    ap.add_argument("--impls", default="hostccl,openmpi,mpich", help="which implementations to run")
    ap.add_argument("--timeout", type=int, default=300, help="seconds one driver run may take")
    ap.add_argument("--no-build", action="store_true",
                    help="use the hostccl driver already in BUILD/bench (a machine without a compiler)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.sizes is None:
        args.sizes = "64K,4M" if args.quick else "8,64K,1M,4M"
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.no_build:
        impls = {"hostccl": os.path.join(args.build, "bench", "overlap_hccl")}
    else:
        impls = build_drivers(args.build)
    impls = {k: v for k, v in impls.items() if k in args.impls.split(",")}
    plan, rows = measure(args, impls)
    summary = summarise(plan, rows, impls)
    print_table(summary, plan, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scenarios": [p[0] for p in plan], "load": load(), "rows": summary}, f, indent=1)
    return 0 if summary else 1


if __name__ == "__main__":
    sys.exit(main())
