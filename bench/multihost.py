#!/usr/bin/env python3
"""make bench, multi-host section: hostccl across two hosts against the link and the peers.

Two hosts are network namespaces on one machine (tests/netns/cluster.sh: a veth pair each, on a
bridge), so "the link" is the kernel moving bytes between namespaces on the same cores as the
ranks. Measured on that one cluster, alternating, --rounds times, best of the rounds per size:

  link       iperf3 one way (1 stream and HOSTCCL_NSOCKS streams) and both ways at once (--bidir),
             a TCP ping-pong of 8 bytes (bench/peers/tcp_pingpong.c: the round trip)
  2 x 1      AllReduce (fp32 sum) by hostccl, Open MPI (tcp BTL) and Gloo (tcp)
  2 x 2      hostccl's two-level AllReduce against the same over TCP flat (HOSTCCL_HIERARCHY=0)

and the issue's targets as ratios: 64 MiB bus bandwidth against iperf3, against Open MPI and Gloo;
two-level against flat from 1 MiB; the 8-byte AllReduce against the round trip.

Usage: python3 bench/multihost.py [--build build] [--rounds 3] [--out FILE]
Needs root (network namespaces), iproute2 and iperf3; otherwise one SKIP line and exit 0. Stdlib
only.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLUSTER = os.path.join(ROOT, "tests", "netns", "cluster.sh")
NETNS_SSH = os.path.join(ROOT, "tests", "netns", "netns-ssh")

MIB = 1 << 20
# SIZE, ITERS, WARMUP: the 8-byte latency, then the bandwidth sizes.
PLAN_2X1 = [(8, 2000, 200), (MIB, 20, 3), (4 * MIB, 10, 2), (16 * MIB, 5, 2), (64 * MIB, 3, 1)]
PLAN_2X2 = [(MIB, 20, 3), (4 * MIB, 10, 2), (16 * MIB, 5, 2), (64 * MIB, 3, 1)]
STEP_TIMEOUT_S = 300


def plan_text(plan):
    return ",".join("%d:%d:%d" % step for step in plan)


def human(size):
    return "%d MiB" % (size // MIB) if size >= MIB else "%d B" % size


def run(argv, timeout=STEP_TIMEOUT_S, env=None):
    """stdout of argv; raises RuntimeError with its output when it fails."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError("timed out after %d s: %s" % (timeout, " ".join(argv)))
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s%s" % (" ".join(argv), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


class Cluster:
    """The hosts of the cluster.sh run this process is inside."""

    def __init__(self, build):
        self.sh = os.environ["HC_CLUSTER_SH"]
        self.ns = [run([self.sh, "ns", str(i)]).strip() for i in (1, 2)]
        self.addr = [run([self.sh, "addr", str(i)]).strip() for i in (1, 2)]
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="hc-multihost-")
        self.port = 47000

    def exec_on(self, host, argv):
        return ["ip", "netns", "exec", self.ns[host]] + argv

    def next_port(self):
        self.port += 1
        return self.port

    def serve(self, host, argv):
        """A server process inside host; the caller retries its client until the server listens."""
        return subprocess.Popen(self.exec_on(host, argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def json_rows(self, path):
        with open(path) as f:
            return {r["data_size"]: r["aveg_time_us"] for r in json.load(f)["rows"]}


def with_server(cl, server_argv, client_argv, parse, tries=50):
    """Start the server on host 2, run the client on host 1 and parse its output (retrying while the
    server starts)."""
    srv = cl.serve(1, server_argv)
    try:
        for attempt in range(tries):
            try:
                return parse(run(cl.exec_on(0, client_argv), timeout=60))
            except (RuntimeError, KeyError, ValueError, IndexError):
                if attempt == tries - 1 or srv.poll() is not None:
                    raise
                time.sleep(0.1)  # the server is not listening yet
    finally:
        srv.kill()
        srv.wait()


def iperf3(cl, streams=1, bidir=False):
    """Gbit/s received per direction (the slower direction when both run)."""
    port = str(cl.next_port())
    argv = ["iperf3", "-c", cl.addr[1], "-p", port, "-t", "3", "-J", "-P", str(streams)] + (["--bidir"] if bidir else [])

    def parse(text):
        end = json.loads(text)["end"]
        rates = [end["sum_received"]["bits_per_second"]]
        if bidir:
            rates.append(end["sum_received_bidir_reverse"]["bits_per_second"])
        return min(rates) / 1e9
    return with_server(cl, ["iperf3", "-s", "-1", "-p", port], argv, parse)


def pingpong(cl):
    """Median round trip of 8 bytes, us."""
    tool = os.path.join(cl.build, "bench", "tcp_pingpong")
    port = str(cl.next_port())
    return with_server(cl, [tool, "--serve", port, "--timeout", "60"],
                       [tool, "--connect", cl.addr[1], port, "--bytes", "8", "--iters", "20000"],
                       lambda out: float(out.split()[4]))


def hostccl(cl, per_host, plan, env_extra=None):
    out = os.path.join(cl.tmp, "hostccl.json")
    hosts = "%s:%d,%s:%d" % (cl.ns[0], per_host, cl.ns[1], per_host)
    argv = [os.path.join(cl.build, "tools", "hccl-run", "hccl-run"), "--hosts", hosts, "--agent",
            "ip netns exec {host}", "--bind-to", "none", "--timeout", str(STEP_TIMEOUT_S - 10),
            os.path.join(cl.build, "tools", "perf", "all_reduce_test"), "--plan", plan_text(plan), "-c", "0",
            "--json", out]
    run(cl.exec_on(0, argv), env=dict(os.environ, **(env_extra or {})))
    return cl.json_rows(out)


def openmpi(cl, plan):
    out = os.path.join(cl.tmp, "openmpi.json")
    argv = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-H",
            "%s:1,%s:1" % tuple(cl.ns), "-np", "2", "--mca", "plm_rsh_agent", NETNS_SSH, "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
            os.path.join(cl.build, "bench", "mpi_coll.openmpi"), "all_reduce", "--plan", plan_text(plan),
            "--json", out]
    run(cl.exec_on(0, argv))
    return cl.json_rows(out)


def gloo(cl, plan):
    out = os.path.join(cl.tmp, "gloo.json")
    store = tempfile.mkdtemp(prefix="store-", dir=cl.tmp)
    tool = os.path.join(cl.build, "bench", "gloo_allreduce")
    procs = [subprocess.Popen(cl.exec_on(r, [tool, "--store", store, "--plan", plan_text(plan), "--json", out,
                                             "--addr", cl.addr[r]]),
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE="2"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=STEP_TIMEOUT_S)
            if p.returncode != 0:
                raise RuntimeError("gloo_allreduce exited %d: %s" % (p.returncode, err[-2000:]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(store, ignore_errors=True)
    return cl.json_rows(out)


def best(rounds):
    """{size: lowest time} over a list of {size: time}."""
    out = {}
    for r in rounds:
        for size, t in r.items():
            out[size] = min(t, out.get(size, t))
    return out


def busbw(size, us):
    """AllReduce bus bandwidth on 2 ranks (factor 2(n-1)/n = 1), GB/s."""
    return size / us / 1e3


def measure(cl, rounds, log):
    nsocks = os.environ.get("HOSTCCL_NSOCKS", "2")
    m = {"iperf1": [], "iperfN": [], "bidir": [], "rtt": [], "hostccl": [], "openmpi": [], "gloo": [],
         "hier": [], "flat": []}
    have_ompi = shutil.which("mpirun.openmpi") and os.path.exists(os.path.join(cl.build, "bench", "mpi_coll.openmpi"))
    have_gloo = os.path.exists(os.path.join(cl.build, "bench", "gloo_allreduce"))
    for k in range(rounds):
        log("round %d of %d" % (k + 1, rounds))
        m["iperf1"].append(iperf3(cl))
        m["iperfN"].append(iperf3(cl, streams=int(nsocks)))
        m["bidir"].append(iperf3(cl, bidir=True))
        m["rtt"].append(pingpong(cl))
        m["hostccl"].append(hostccl(cl, 1, PLAN_2X1))
        if have_ompi:
            m["openmpi"].append(openmpi(cl, PLAN_2X1))
        if have_gloo:
            m["gloo"].append(gloo(cl, PLAN_2X1))
        m["hier"].append(hostccl(cl, 2, PLAN_2X2))
        m["flat"].append(hostccl(cl, 2, PLAN_2X2, {"HOSTCCL_HIERARCHY": "0"}))
    return m, nsocks


def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "n/a"


def report(m, nsocks, rounds):
    iperf1, iperfN, bidir = max(m["iperf1"]), max(m["iperfN"]), max(m["bidir"])
    rtt = min(m["rtt"])
    h, o, g = best(m["hostccl"]), best(m["openmpi"]), best(m["gloo"])
    hier, flat = best(m["hier"]), best(m["flat"])
    size_of = sorted(h)
    lines = ["# Multi-host (2 network-namespace hosts)", "",
             "%s; %s; best of %d alternating rounds; `python3 bench/multihost.py`." % (
                 datetime.date.today().isoformat(), uptime(), rounds), "",
             "## The link", "",
             "| measure | value |", "|---|---|",
             "| iperf3, 1 stream, one way | %.2f Gbit/s (%.3f GB/s) |" % (iperf1, iperf1 / 8),
             "| iperf3, %s streams, one way | %.2f Gbit/s (%.3f GB/s) |" % (nsocks, iperfN, iperfN / 8),
             "| iperf3, 1 stream each way at once (slower direction) | %.2f Gbit/s (%.3f GB/s) |" % (bidir, bidir / 8),
             "| TCP ping-pong, 8 bytes, median round trip | %.1f us |" % rtt, "",
             "## AllReduce, 2 hosts x 1 rank (fp32 sum; time in us, bus bandwidth in GB/s)", "",
             "| size | hostccl | Open MPI (tcp) | Gloo (tcp) | hostccl busbw | vs Open MPI | vs Gloo |",
             "|---|---|---|---|---|---|---|"]
    for s in size_of:
        lines.append("| %s | %.1f | %s | %s | %.3f | %s | %s |" % (
            human(s), h[s], "%.1f" % o[s] if s in o else "n/a", "%.1f" % g[s] if s in g else "n/a",
            busbw(s, h[s]), ratio(o.get(s), h[s]), ratio(g.get(s), h[s])))
    lines += ["", "## AllReduce, 2 hosts x 2 ranks: two levels against flat TCP (time in us)", "",
              "| size | two-level | flat (HOSTCCL_HIERARCHY=0) | flat / two-level |", "|---|---|---|---|"]
    for s in sorted(hier):
        lines.append("| %s | %.1f | %.1f | %s |" % (human(s), hier[s], flat.get(s, 0), ratio(flat.get(s), hier[s])))
    big, small = max(size_of), min(size_of)
    bw = busbw(big, h[big])
    lines += ["", "## Targets", "",
              "| target | measured | met |", "|---|---|---|",
              "| %s busbw >= 90%% of iperf3 (1 stream, one way) | %.3f GB/s = %.0f%% of %.3f | %s |" % (
                  human(big), bw, 100 * bw / (iperf1 / 8), iperf1 / 8, "yes" if bw >= 0.9 * iperf1 / 8 else "no"),
              "| (context) against iperf3 both ways at once | %.0f%% of %.3f GB/s | |" % (100 * bw / (bidir / 8), bidir / 8),
              "| %s >= 1.5x Open MPI | %s | %s |" % (human(big), ratio(o.get(big), h[big]),
                                                     met(o.get(big), h[big], 1.5)),
              "| %s >= 1.5x Gloo | %s | %s |" % (human(big), ratio(g.get(big), h[big]), met(g.get(big), h[big], 1.5)),
              "| two-level >= 1.3x flat from 1 MiB | %s | %s |" % (
                  ", ".join("%s %s" % (human(s), ratio(flat.get(s), hier[s])) for s in sorted(hier)),
                  "yes" if all(flat.get(s, 0) >= 1.3 * hier[s] for s in hier) else "no"),
              "| 8-byte AllReduce <= 1.3x the round trip | %.1f us / %.1f us = %.2f | %s |" % (
                  h[small], rtt, h[small] / rtt, "yes" if h[small] <= 1.3 * rtt else "no")]
    return "\n".join(lines) + "\n"


def met(theirs, ours, factor):
    if not theirs:
        return "n/a"
    return "yes" if theirs >= factor * ours else "no"


def uptime():
    try:
        return "load " + run(["uptime"], timeout=5).split("load average:")[1].strip()
    except (RuntimeError, IndexError, OSError):
        return "load unknown"


def inside(args):
    cl = Cluster(os.path.abspath(args.build))
    try:
        m, nsocks = measure(cl, args.rounds, lambda s: print("multihost: " + s, flush=True))
        text = report(m, nsocks, args.rounds)
    finally:
        shutil.rmtree(cl.tmp, ignore_errors=True)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
        print("multihost: wrote %s" % args.out)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(
        HERE, "results", "%s-multihost.md" % datetime.date.today().isoformat()))
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return inside(args)
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iperf3"):
        print("SKIP: the multi-host section needs root (network namespaces), iproute2 and iperf3 "
              "(scripts/deps.sh bench installs them)")
        return 0
    argv = [CLUSTER, "run", "--hosts", "2", "--timeout", str(STEP_TIMEOUT_S * 4 * args.rounds), "--",
            sys.executable, os.path.abspath(__file__), "--inside", "--build", args.build, "--rounds",
            str(args.rounds), "--out", args.out or ""]
    return subprocess.call(argv)


if __name__ == "__main__":
    sys.exit(main())
