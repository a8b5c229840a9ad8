#!/usr/bin/env python3
"""make bench: hostccl's perf tools side by side with Open MPI, MPICH, Gloo and a memcpy baseline.

For every collective, rank count (2, 4, 8) and buffer kind (--mem: plain malloc memory, as numpy,
torch and MPI programs pass it, and aclrtMalloc memory) the implementations run on the same sizes,
one whole sweep each, alternating A B C A B C (--rounds times); the table keeps each size's best
(lowest) time over the rounds and lists every round's time below it. Every implementation is timed
the same way (the perf tools' method, docs/perf-tools.md): per size, warm-up iterations, a barrier,
the timed iterations back to back, the slowest rank's average. The MPIs always get malloc memory;
each hostccl buffer kind is compared with them. Ratios, not absolute times, are the result: the
machine is shared and noisy (DESIGN.md section 10).

Then, unless --no-side: bench/peers/side_by_side on 2 ranks, hostccl and each MPI in the same
processes on the same buffers (--side-mem: malloc and malloc-touch by default; thp, acl; a -touch
kind writes the input before and reads the output after every call, as programs do), every hostccl call
synchronised as a blocking MPI call is, one table of ratios against the better MPI on top; and,
when bench/overlap.py is there, the overlap section (its own output). --side-only runs just the
side-by-side client (about a minute per buffer kind).

Usage: python3 bench/bench.py [--build build] [--quick] [--collectives all_reduce,...] [--ranks 2,4,8]
       [--mem malloc,acl] [--plan SIZE:ITERS:WARMUP,...] [--side-only] [--side-mem malloc,acl]
Writes bench/results/<date>-<collective>-<n>.md and .svg, <date>-summary.md, <date>-side.md,
<date>-overlap.md; raw JSON and logs under bench/results/tmp/. Stdlib only.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (bench/report.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "alltoallv",
               "scatter", "send_recv"]
MEM_KINDS = ["malloc", "acl"]

# The size plan as bands of the perf tools' walk (-b first -e last -f factor): 8 B .. 32 KiB and
# 8 MiB .. 32 MiB by x4, 128 KiB .. 2 MiB and 128 .. 256 MiB by x2 (the midpoints 256K, 1M, 256M).
# Iterations per band are those of 2 ranks; more ranks get proportionally fewer (same CPU time,
# two cores); the plan is sized for a full `make bench` of about 20 minutes on the 2-core reference
# machine when it is otherwise idle (bench/results/2026-11-29-to-12-01-log.md has the measured times). One call of 128 MiB takes tens of milliseconds, far above the clock's noise, so
# one timed iteration after one warm-up is enough there; the rounds give the repeats.
BANDS = [
    (8, 32 << 10, 4, 1000, 100),  # 100 iterations of ~1 us were at the mercy of one 0.5 ms preemption
    (128 << 10, 2 << 20, 2, 50, 5),
    (8 << 20, 32 << 20, 4, 5, 2),  # 2 warm-ups: an op of one step per parity warms only one of them
    (128 << 20, 256 << 20, 2, 1, 1),
]
QUICK_BANDS = [(8, 32 << 10, 16, 50, 5), (1 << 20, 1 << 20, 2, 10, 2)]
# Beyond 4 ranks (four ranks per core here) every call is a round of context switches, so 8 ranks
# measure fewer sizes: what they show (that waiting holds up when ranks outnumber cores) does not
# need every step of the walk, and the full plan would cost most of an hour.
BANDS_8 = [
    (8, 32 << 10, 16, 1000, 100),
    (128 << 10, 2 << 20, 4, 50, 5),
    (8 << 20, 8 << 20, 4, 5, 2),
]

DTYPE_FLAG = {"fp32": "fp32", "fp16": "fp16", "bf16": "bfp16"}


def walk(first, last, factor):
    """The perf tools' walk: from -b, multiplied by -f (truncated to whole bytes), while <= -e."""
    size = first
    while size <= last:
        yield size
        size = int(size * factor)


# From 4 ranks the sweep stops at 32 MiB (8 ranks: BANDS_8), and so do the fp16/bf16 sweeps: what
# they show (waiting when ranks outnumber cores; the 16-bit kernels' cost per byte) is plain well
# below that, and the largest sizes would cost minutes each.
CAP_BYTES = 32 << 20


def scaled_bands(bands, nranks, max_bytes):
    """The bands up to max_bytes, with the 2-rank iterations times 2/nranks (at least 2, or 1 beyond
    4 ranks, unless the band asks for fewer) and the warm-ups likewise (at least 2 unless the band
    asks for fewer: the slots' two parities)."""
    floor = 2 if nranks <= 4 else 1
    return [(b, min(e, max_bytes), f, max(min(it, floor), round(it * 2 / nranks)), max(min(w, 2), round(w * 2 / nranks)))
            for b, e, f, it, w in bands if b <= max_bytes]


def capped(bands, max_bytes):
    return [(b, min(e, max_bytes), f, it, w) for b, e, f, it, w in bands if b <= max_bytes]


# The first size of a sweep runs in processes that have just started, and their first thousand or
# so small calls ran up to 3x slower, for hostccl and the MPIs alike (4 ranks, 8 B Broadcast, three
# runs each: hostccl 2.1-2.8 us, then 0.8-1.0 us for the same size later in the run; Open MPI
# 0.67-3.0 us, then 0.46-0.63). So a small first size gets FIRST_WARMUP warm-up calls, in every
# implementation's sweep alike.
FIRST_WARMUP = 1000
FIRST_WARMUP_MAX_BYTES = 64 << 10


def plan_text(bands):
    steps = [(s, it, w) for b, e, f, it, w in bands for s in walk(b, e, f)]
    if steps and steps[0][0] <= FIRST_WARMUP_MAX_BYTES:
        steps[0] = (steps[0][0], steps[0][1], max(steps[0][2], FIRST_WARMUP))
    return ",".join("%d:%d:%d" % step for step in steps)


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "uptime unavailable"


def line_exchange(ctx, rounds=None):
    """The cache-line exchange between two CPUs (bench/peers/line_exchange, us per round), which on a
    shared VM moves by 4x between hours and every small-message time with it: recorded before and
    after the runs so that each report says which state it was measured in, and (with fewer rounds,
    about 0.1 s) before every sweep, since the state can change between two sweeps of one table."""
    binary = os.path.join(ctx.peers, "line_exchange")
    try:
        done = subprocess.run([binary] + ([str(rounds)] if rounds else []), capture_output=True, text=True,
                              timeout=60)
        return "%.3f us" % float(done.stdout.split()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return "not measured"


class Runner:
    """Starts a command (or several, one per rank), waits with a deadline, kills the whole process
    group of each on timeout: only the processes it started."""

    def __init__(self, logdir, timeout):
        self.logdir = logdir
        self.timeout = timeout

    def run(self, argvs, log_name, envs=None):
        log_path = os.path.join(self.logdir, log_name)
        envs = envs or [None] * len(argvs)
        with open(log_path, "w") as log:
            procs = []
            for argv, env in zip(argvs, envs):
                log.write("$ %s\n" % " ".join(str(a) for a in argv))
                log.flush()
                procs.append(subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                              env=env, start_new_session=True))
            deadline = time.monotonic() + self.timeout
            try:
                codes = [p.wait(timeout=max(0.1, deadline - time.monotonic())) for p in procs]
            except subprocess.TimeoutExpired:
                self._kill(procs)
                return "timed out after %d s (log %s)" % (self.timeout, log_path)
        if any(codes):
            self._kill(procs)
            return "exit status %s (log %s)" % (",".join(str(c) for c in codes), log_path)
        return None

    @staticmethod
    def _kill(procs):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
            if sig == signal.SIGTERM:
                time.sleep(2)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def fresh(path):
    """The JSON path a run is to write, with any file of an earlier run removed first."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return path


def read_rows(path, nominal):
    """{nominal size: (data_size, aveg_time_us)} from a perf tool's or a peer's --json file."""
    with open(path) as f:
        doc = json.load(f)
    rows = doc["rows"]
    if len(rows) != len(nominal):
        raise ValueError("%s: %d rows, expected %d" % (path, len(rows), len(nominal)))
    return {s: (r["data_size"], r["aveg_time_us"]) for s, r in zip(nominal, rows)}, doc


class Impl:
    """One column of the tables: a name and how to run one sweep of a collective on n ranks."""

    def __init__(self, name, sweep, applies=lambda coll, n: True):
        self.name = name
        self.sweep = sweep  # (ctx, coll, n, bands, tag) -> ({size: (data_size, us)}, info) or error str
        self.applies = applies


def sweep_hostccl(dtype, mem, max_bytes=None, build=None):
    def sweep(ctx, coll, n, bands, tag):
        bands = capped(bands, max_bytes) if max_bytes else bands
        tool = os.path.join(build or ctx.build, "tools", "perf", coll + "_test")
        # One process for the whole sweep, as the MPI peers: a band per process made the first size
        # of every band pay a new communicator's start-up (page faults of fresh memory).
        out = fresh(os.path.join(ctx.tmp, "%s.json" % tag))
        # Unbound, as the MPI peers run (Open MPI --bind-to none, MPICH's default): the comparison
        # is of the libraries, not of the launchers' binding (hccl-run binds by default).
        argv = [ctx.hccl_run, "-n", n, "--bind-to", "none", tool, "--plan", plan_text(bands), "-c", 0,
                "-d", DTYPE_FLAG[dtype], "--mem", mem, "--json", out]
        err = ctx.runner.run([argv], "%s.log" % tag)
        if err:
            return err
        rows, _ = read_rows(out, [s for b, e, f, it, w in bands for s in walk(b, e, f)])
        return rows, "hostccl %s, %s buffers" % (ctx.hostccl_version, mem)
    return sweep


MPI_LAUNCH = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"],
    "mpich": ["mpirun.mpich", "-np"],
}


def sweep_mpi(flavour):
    def sweep(ctx, coll, n, bands, tag):
        out = fresh(os.path.join(ctx.tmp, tag + ".json"))
        peer = os.path.join(ctx.peers, "mpi_coll." + flavour)
        argv = MPI_LAUNCH[flavour] + [n, peer, coll, "--plan", plan_text(bands), "--json", out]
        err = ctx.runner.run([argv], tag + ".log")
        if err:
            return err
        rows, doc = read_rows(out, [s for b, e, f, _, _ in bands for s in walk(b, e, f)])
        return rows, doc.get("implementation", flavour)
    return sweep


def sweep_gloo(ctx, coll, n, bands, tag):
    out = fresh(os.path.join(ctx.tmp, tag + ".json"))
    peer = os.path.join(ctx.peers, "gloo_allreduce")
    store = tempfile.mkdtemp(prefix="gloo-store-", dir=ctx.tmp)
    argvs, envs = [], []
    for rank in range(n):
        argvs.append([peer, "--store", store, "--plan", plan_text(bands), "--json", out])
        envs.append(dict(os.environ, RANK=str(rank), WORLD_SIZE=str(n)))
    err = ctx.runner.run(argvs, tag + ".log", envs)
    shutil.rmtree(store, ignore_errors=True)
    if err:
        return err
    rows, _ = read_rows(out, [s for b, e, f, _, _ in bands for s in walk(b, e, f)])
    return rows, "Gloo %s (tcp loopback)" % ctx.gloo_version


def sweep_memcpy(ctx, coll, n, bands, tag):
    out = fresh(os.path.join(ctx.tmp, tag + ".json"))
    argv = [os.path.join(ctx.peers, "memcpy_bench"), "-n", n, coll, "--plan", plan_text(bands), "--json", out]
    err = ctx.runner.run([argv], tag + ".log")
    if err:
        return err
    rows, _ = read_rows(out, [s for b, e, f, _, _ in bands for s in walk(b, e, f)])
    return rows, "memcpy, %d processes at once" % n


def dpkg_version(package):
    try:
        res = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
        return res.stdout.strip() or "?"
    except OSError:
        return "?"


def git_version():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+local changes" if dirty else "") if head else "?"
    except OSError:
        return "?"


def make_impls(ctx):
    """The columns that can run here; a missing peer is reported once and left out."""
    impls = [Impl("hostccl " + mem, sweep_hostccl("fp32", mem)) for mem in ctx.mem]
    if ctx.baseline:
        # Another build of hostccl in the same run, alternating with the others: a before/after
        # comparison whose MPI figures come from the same minutes (its perf tools must know --mem).
        impls += [Impl("baseline " + mem, sweep_hostccl("fp32", mem, build=ctx.baseline)) for mem in ctx.mem]
    peers = [("Open MPI", "mpi_coll.openmpi", "mpirun.openmpi", sweep_mpi("openmpi"), lambda c, n: True),
             ("MPICH", "mpi_coll.mpich", "mpirun.mpich", sweep_mpi("mpich"), lambda c, n: True),
             ("Gloo", "gloo_allreduce", None, sweep_gloo, lambda c, n: c == "all_reduce"),
             ("memcpy", "memcpy_bench", None, sweep_memcpy, lambda c, n: True)]
    for name, binary, launcher, sweep, applies in peers:
        if not os.access(os.path.join(ctx.peers, binary), os.X_OK):
            ctx.skipped.append("%s: %s was not built (see the `make -C bench peers` output)" % (name, binary))
        elif launcher and shutil.which(launcher) is None:
            ctx.skipped.append("%s: %s not found" % (name, launcher))
        else:
            impls.append(Impl(name, sweep, applies))
    # fp16 and bf16 AllReduce at the same byte counts as fp32, on the first buffer kind: hostccl only
    # (MPI has no 16-bit float).
    for dtype in ("fp16", "bf16"):
        impls.append(Impl("hostccl " + dtype, sweep_hostccl(dtype, ctx.mem[0], CAP_BYTES),
                          lambda c, n: c == "all_reduce" and n <= 4))
    return impls


def run_sweep(ctx, impl, record, bands, line):
    """One more sweep of impl for the record's table, after a line exchange of `line`."""
    coll, n = record["collective"], record["ranks"]
    rnd = len(record["results"][impl.name]) + 1
    tag = "%s-%d-%s-r%d" % (coll, n, impl.name.replace(" ", "_").lower(), rnd)
    record["lines"][impl.name].append(line)
    t0 = time.monotonic()
    try:
        got = impl.sweep(ctx, coll, n, bands, tag)
    except (OSError, ValueError, KeyError) as exc:
        got = "%s: %s" % (type(exc).__name__, exc)
    if isinstance(got, str):
        record["errors"].setdefault(impl.name, []).append("round %d: %s" % (rnd, got))
        record["results"][impl.name].append(None)
        status = "FAILED: " + got
    else:
        record["results"][impl.name].append(got[0])
        record["info"][impl.name] = got[1]
        status = "ok"
    print("  %-15s n=%d round %d  %-13s %5.1f s  %s" % (coll, n, rnd, impl.name, time.monotonic() - t0, status),
          flush=True)


# When the VM changed state during a table and an implementation's sweeps all met the state the
# fewer sweeps met, its best times would be compared with the others' from the other state
# (report.kept_rounds then keeps every round: 2 ranks, Broadcast 32 B, hostccl's slow-state 0.59 us
# against Open MPI's fast-state 0.14). So it is swept again once a line exchange shows the state most
# sweeps met, waiting for that up to STATE_WAIT_S a table and STATE_BUDGET_S a run (the sweeps
# included); the guest moves between its states every few seconds to minutes.
STATE_WAIT_S = 40
STATE_BUDGET_S = 300
STATE_POLL_S = 1.0


def refill_state(ctx, chosen, record, bands):
    deadline = time.monotonic() + min(STATE_WAIT_S, ctx.state_budget)
    start = time.monotonic()
    while time.monotonic() < deadline:
        missing = report.missing_state(record)
        if missing is None:
            break
        split, fast, names = missing
        line = line_exchange(ctx, 40000)
        us = report.line_us(line)
        if us is None or (us < split) != fast:
            time.sleep(STATE_POLL_S)
            continue
        run_sweep(ctx, next(i for i in chosen if i.name == names[0]), record, bands, line)
    ctx.state_budget -= time.monotonic() - start


def run_combo(ctx, impls, coll, n, bands):
    """All rounds of one collective and rank count; returns the combo's record for the reports."""
    chosen = [i for i in impls if i.applies(coll, n)]
    record = {"collective": coll, "ranks": n, "load_before": uptime(), "rounds": ctx.rounds,
              "bands": bands, "impls": [i.name for i in chosen], "results": {i.name: [] for i in chosen},
              "info": {}, "errors": {}, "dtype_mem": "hostccl " + ctx.mem[0],
              "lines": {i.name: [] for i in chosen}}
    start = time.monotonic()
    for _ in range(ctx.rounds):
        for impl in chosen:
            run_sweep(ctx, impl, record, bands, line_exchange(ctx, 40000))
    refill_state(ctx, chosen, record, bands)
    record["load_after"] = uptime()
    record["seconds"] = time.monotonic() - start
    return record


def plan_bands(args, n):
    """The bands of one rank count: --plan as given, --quick, or the default plan for n ranks."""
    if args.plan:
        steps = [step.split(":") for step in args.plan.split(",") if step]
        return [(parse_size(b), parse_size(b), 2, int(it), int(w)) for b, it, w in steps]
    if args.quick:
        return scaled_bands(QUICK_BANDS, n, 1 << 40)
    if n > 4:
        return scaled_bands(BANDS_8, n, CAP_BYTES)
    return scaled_bands(BANDS, n, CAP_BYTES if n > 2 else 1 << 40)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)


# ---- the side-by-side client and the overlap section ---------------------------------------------

SIDE_PLAN = "8:1000:100,1K:1000:100,8K:500:50,64K:300:30,1M:50:5,16M:5:2"
SIDE_COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "alltoallv",
                    "scatter", "send_recv"]


def run_side_by_side(ctx, args, colls):
    """bench/peers/side_by_side.<mpi> on 2 ranks, per --side-mem buffer kind: the tables' file."""
    plan = "8:200:20,64K:100:10,1M:20:2" if args.quick else args.side_plan or SIDE_PLAN
    results = {}
    line_before = line_exchange(ctx)
    for mem in [m for m in args.side_mem.split(",") if m]:
        for coll in [c for c in SIDE_COLLECTIVES if c in colls]:
            for flavour in ("openmpi", "mpich"):
                binary = os.path.join(ctx.peers, "side_by_side." + flavour)
                if not os.access(binary, os.X_OK) or shutil.which(MPI_LAUNCH[flavour][0]) is None:
                    continue
                out = fresh(os.path.join(ctx.tmp, "side-%s-%s-%s.json" % (mem, coll, flavour)))
                kind, touch = (mem[:-len("-touch")], ["--touch"]) if mem.endswith("-touch") else (mem, [])
                argv = MPI_LAUNCH[flavour] + [2, binary, coll, "--plan", plan, "--mem", kind, "--rounds",
                                              3 if args.quick else 5, "--json", out] + touch
                t0 = time.monotonic()
                err = ctx.runner.run([argv], "side-%s-%s-%s.log" % (mem, coll, flavour))
                print("  side-by-side %-6s %-15s %-8s %5.1f s  %s" % (mem, coll, flavour, time.monotonic() - t0,
                                                                     err or "ok"), flush=True)
                if not err:
                    with open(out) as f:
                        results[(mem, coll, flavour)] = json.load(f)
    text = report.side_markdown(results, plan, uptime(), (line_before, line_exchange(ctx)))
    path = os.path.join(args.out, "%s-side.md" % args.date)
    with open(path, "w") as f:
        f.write(text)
    print("\n" + text, flush=True)
    return path


def run_overlap(ctx, args):
    """bench/overlap.py, when it is there (the progress and overlap figures): its output, as is."""
    script = os.path.join(HERE, "overlap.py")
    if not os.path.exists(script):
        print("bench: no bench/overlap.py here: the overlap section is left out", flush=True)
        return None
    path = os.path.join(args.out, "%s-overlap.md" % args.date)
    argv = ["/usr/bin/python3", script, "--build", ctx.build] + (["--quick"] if args.quick else [])
    print("bench: overlap section: %s" % " ".join(argv), flush=True)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=ctx.runner.timeout * 4)
    except subprocess.TimeoutExpired:
        print("bench: overlap.py timed out", flush=True)
        return None
    with open(path, "w") as f:
        f.write("# Overlap — %s\n\n`%s`\n\n%s\n" % (args.date, " ".join(argv), done.stdout))
    print(done.stdout, flush=True)
    if done.returncode != 0:
        print("bench: overlap.py failed (exit %d): %s" % (done.returncode, done.stderr[-2000:]), flush=True)
    return path


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="hostccl build folder")
    ap.add_argument("--peers", help="folder of the built peers (default BUILD/bench)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="where the reports go")
    ap.add_argument("--rounds", type=int, default=2, help="A B A B rounds (>= 1; default 2)")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--ranks", default="2,4,8", help="rank counts for every collective")
    ap.add_argument("--mem", default=",".join(MEM_KINDS), help="hostccl's buffer kinds: malloc, acl (aclrtMalloc)")
    ap.add_argument("--plan", help="SIZE:ITERS:WARMUP,... instead of the bands (a focused run)")
    ap.add_argument("--baseline", help="another hostccl build folder to run alongside (before/after columns)")
    ap.add_argument("--no-side", action="store_true", help="skip the side-by-side client and the overlap section")
    ap.add_argument("--side-only", action="store_true", help="only the side-by-side client (no tables, no overlap)")
    ap.add_argument("--side-mem", default="malloc,malloc-touch",
                    help="buffer kinds of the side-by-side client: malloc, thp, acl; KIND-touch: the input "
                         "written before and the output read after each call (side_by_side --touch)")
    ap.add_argument("--side-plan", help="SIZE:ITERS:WARMUP,... for the side-by-side client (default %s)" % SIDE_PLAN)
    ap.add_argument("--timeout", type=int, default=300, help="seconds one sweep may take before it is killed")
    ap.add_argument("--quick", action="store_true", help="a few small sizes only (a smoke test)")
    ap.add_argument("--hostccl-version", help="what to call the hostccl build in the reports "
                    "(default: this tree's git commit)")
    ap.add_argument("--date", default=datetime.date.today().isoformat(), help="prefix of the report names")
    args = ap.parse_args()
    args.peers = args.peers or os.path.join(args.build, "bench")
    return args


def main():
    args = parse_args()
    colls = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in colls if c not in COLLECTIVES]
    mems = [m for m in args.mem.split(",") if m]
    if unknown or args.rounds < 1 or not mems or any(m not in MEM_KINDS for m in mems):
        sys.exit("bench.py: unknown collective %s (known: %s)" % (",".join(unknown), ",".join(COLLECTIVES))
                 if unknown else "bench.py: --rounds must be >= 1" if args.rounds < 1
                 else "bench.py: --mem takes malloc and/or acl")
    ctx = argparse.Namespace(build=os.path.abspath(args.build), peers=os.path.abspath(args.peers),
                             rounds=args.rounds, skipped=[], mem=mems,
                             baseline=os.path.abspath(args.baseline) if args.baseline else None,
                             hostccl_version=args.hostccl_version or git_version(),
                             gloo_version=dpkg_version("libgloo0"), state_budget=STATE_BUDGET_S)
    ctx.hccl_run = os.path.join(ctx.build, "tools", "hccl-run", "hccl-run")
    if not os.access(ctx.hccl_run, os.X_OK):
        sys.exit("bench.py: %s not found: run `make build` first" % ctx.hccl_run)
    os.makedirs(args.out, exist_ok=True)
    ctx.tmp = os.path.join(args.out, "tmp", args.date)
    os.makedirs(ctx.tmp, exist_ok=True)
    ctx.runner = Runner(ctx.tmp, args.timeout)
    impls = make_impls(ctx)
    for line in ctx.skipped:
        print("bench: skipping " + line, flush=True)

    combos = [] if args.side_only else [(coll, int(n)) for coll in colls for n in args.ranks.split(",") if n]
    # Every collective on 2 ranks first, then on more: the 2-rank tables come out early.
    combos.sort(key=lambda c: (c[1] > 2, c[1], COLLECTIVES.index(c[0])))

    env = {"date": args.date, "host": platform.node(), "cpu": report.cpu_model(), "cores": os.cpu_count(),
           "load_start": uptime(), "line_start": line_exchange(ctx), "hostccl": ctx.hostccl_version, "rounds": args.rounds, "quick": args.quick,
           "skipped": ctx.skipped, "command": " ".join(sys.argv), "mem": mems}
    print("bench: %d tables, %d round(s) each; %s" % (len(combos), args.rounds, env["load_start"]), flush=True)
    records = []
    for coll, n in combos:
        bands = plan_bands(args, n)
        record = run_combo(ctx, impls, coll, n, bands)
        records.append(record)
        text = report.combo_markdown(record, env)
        path = os.path.join(args.out, "%s-%s-%d" % (args.date, coll, n))
        with open(path + ".md", "w") as f:
            f.write(text)
        report.combo_plot(record, path + ".svg")
        print("\n" + report.console_table(record) + "\n", flush=True)
    if not args.no_side:
        env["side"] = run_side_by_side(ctx, args, colls)
        if args.side_only:
            return 0
        env["overlap"] = run_overlap(ctx, args)
    env["load_end"] = uptime()
    env["line_end"] = line_exchange(ctx)
    summary = os.path.join(args.out, "%s-summary.md" % args.date)
    with open(summary, "w") as f:
        f.write(report.summary_markdown(records, env))
    print(report.summary_markdown(records, env))
    print("bench: reports in %s (%s-*.md, *.svg); raw JSON and logs in %s" % (args.out, args.date, ctx.tmp))
    # A peer that failed or timed out is a gap in its column; no hostccl data at all is a failure.
    missing = ["%s n=%d %s" % (r["collective"], r["ranks"], mem) for r in records for mem in mems
               if not any(r["results"].get("hostccl " + mem, []))]
    if missing:
        print("bench: hostccl produced no rows for " + ", ".join(missing), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
