#!/usr/bin/env python3
"""A/B timing of two hostccl builds with one perf tool, alternating A B A B.

The machine is shared and its speed moves from hour to hour (the cache-line exchange between the
two vCPUs went from 0.08 to 0.31 us within a day), so a change is judged by runs of both builds
taken in turns, never against yesterday's numbers. For every size this prints the minimum and the
median time of each build over the rounds and the ratio of the medians (above 1: B is faster).

  python3 bench/ab.py --a /tmp/base/build --b build --tool all_reduce_test --ranks 2 \\
      --rounds 5 -- --plan 8:1000:100,8K:1000:100 [--touch] [-d fp16]

Everything after `--` goes to the perf tool. Both builds run under B's hccl-run with
`--bind-to none` unless --bind is given (the bench's condition). --env-a / --env-b NAME=VALUE
(repeatable) set variables for one side only, so that one build can be compared with itself under
two settings (--a and --b the same folder), e.g. a threshold forced each way. Stdlib only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(build, launcher, tool, ranks, tool_args, bind, out, env):
    argv = [launcher, "-n", str(ranks)]
    if not bind:
        argv += ["--bind-to", "none"]
    argv += [os.path.join(build, "tools", "perf", tool)] + tool_args + ["--json", out]
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600,
                          env=dict(os.environ, **env))
    if done.returncode != 0:
        sys.exit("ab.py: %s failed (exit %d):\n%s" % (" ".join(argv), done.returncode, done.stderr[-2000:]))
    with open(out) as f:
        return [(row["data_size"], row["aveg_time_us"]) for row in json.load(f)["rows"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="build folder A (the baseline)")
    parser.add_argument("--b", required=True, help="build folder B (the change)")
    parser.add_argument("--tool", required=True, help="perf tool, e.g. all_reduce_test")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bind", action="store_true", help="keep hccl-run's default binding")
    parser.add_argument("--env-a", action="append", default=[], metavar="NAME=VALUE", help="environment of A only")
    parser.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE", help="environment of B only")
    parser.add_argument("tool_args", nargs=argparse.REMAINDER, help="-- then the perf tool's arguments")
    args = parser.parse_args()
    tool_args = args.tool_args[1:] if args.tool_args[:1] == ["--"] else args.tool_args
    launcher = os.path.join(args.b, "tools", "hccl-run", "hccl-run")
    envs = {"A": dict(e.split("=", 1) for e in args.env_a), "B": dict(e.split("=", 1) for e in args.env_b)}
    times = {"A": {}, "B": {}}
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, build in (("A", args.a), ("B", args.b)):
                rows = run_once(build, launcher, args.tool, args.ranks, tool_args, args.bind,
                                os.path.join(tmp, "%s%d.json" % (name, r)), envs[name])
                for size, us in rows:
                    if size not in sizes:
                        sizes.append(size)
                    times[name].setdefault(size, []).append(us)
    print("%12s  %10s %10s  %10s %10s  %8s" % ("data_size", "A min", "A median", "B min", "B median", "A/B"))
    for size in sizes:
        a, b = times["A"][size], times["B"][size]
        ratio = statistics.median(a) / statistics.median(b) if statistics.median(b) > 0 else float("nan")
        print("%12d  %10.3f %10.3f  %10.3f %10.3f  %8.2f" % (size, min(a), statistics.median(a), min(b),
                                                            statistics.median(b), ratio))


if __name__ == "__main__":
    main()
