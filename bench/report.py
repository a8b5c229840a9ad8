"""The bench's reports: per collective and rank count a markdown table (best time of the rounds per
size, ratios, copy efficiency, every round below), the SVG plot, and the summary of the whole run."""

import math
import os

import svg

# hostccl's buffer kinds (bench.py --mem), and the same of a --baseline build
HOSTS = ["hostccl malloc", "hostccl acl", "baseline malloc", "baseline acl"]
PEER_ORDER = HOSTS + ["Open MPI", "MPICH", "Gloo", "memcpy"]
MPIS = ["Open MPI", "MPICH"]
SMALL, LARGE = 32 << 10, 8 << 20  # the summary's bands: <= 32 KiB, 128 KiB .. 2 MiB, >= 8 MiB


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


# Two states are told apart only when the line exchanges before a table's sweeps differ by this
# factor or more (the PVM guest: about 0.07 us fast, 0.3 slow); the split lies between them. A fixed
# split (once 0.15 us) cut through a machine whose one state reads 0.12-0.16 us.
STATE_SPREAD = 2.0


def line_us(value):
    try:
        return float(value.split()[0])
    except (AttributeError, ValueError, IndexError):
        return None


def line_values(record):
    """{implementation: [us of the line exchange before each of its sweeps, None where not measured]}."""
    return {name: [line_us(v) for v in values] for name, values in (record.get("lines") or {}).items()}


def table_states(record):
    """When the line exchanges before a table's sweeps show both of the VM's states: (split us, the
    state most sweeps met (fast?), {implementation: [its sweeps' states, None: not measured]});
    else None."""
    lines = line_values(record)
    measured = [us for values in lines.values() for us in values if us is not None and us > 0]
    if not measured or max(measured) < STATE_SPREAD * min(measured):
        return None
    split = (min(measured) * max(measured)) ** 0.5
    states = {name: [None if us is None else us < split for us in values] for name, values in lines.items()}
    seen = [s for values in states.values() for s in values if s is not None]
    if not seen or all(seen) or not any(seen):
        return None
    return split, sum(seen) * 2 > len(seen), states  # a tie keeps the slow state, the usual one


def missing_state(record):
    """(split us, the majority state (fast?), [implementations with no sweep in it]) when the table
    met both states and some implementation met only the other one; else None."""
    found = table_states(record)
    if found is None:
        return None
    split, majority, states = found
    names = [name for name in record["impls"] if majority not in states.get(name, [])]
    return (split, majority, names) if names else None


def kept_rounds(record):
    """{implementation: [round kept?]} when the line exchanges before the sweeps show both of the VM's
    states: the rounds in the state most sweeps met, provided every implementation has one there
    (else None: every round counts; bench.py sweeps such an implementation again when the state comes
    back, refill_state). Best-of-rounds across states would compare one implementation's fast spell
    with another's slow one."""
    found = table_states(record)
    if found is None:
        return None
    keep = {name: [s == found[1] for s in values] for name, values in found[2].items()}
    return keep if all(any(k) for k in keep.values()) else None


def best(record, name):
    """{nominal size: (data_size, best us)} over the rounds that produced a row (and, when the VM
    changed state during the table, that were measured in the state most sweeps met: kept_rounds)."""
    out = {}
    keep = (kept_rounds(record) or {}).get(name)
    for i, rows in enumerate(record["results"].get(name, [])):
        if keep is not None and i < len(keep) and not keep[i]:
            continue
        for size, (data, us) in (rows or {}).items():
            if us > 0 and (size not in out or us < out[size][1]):
                out[size] = (data, us)
    return out


# A peer whose rounds at one size differ by this factor or more is erratic there: its best round is
# a scheduler lottery win, not its usual speed (when ranks outnumber cores, a busy-polling MPI runs at
# nearly its 2-rank speed in a sweep where the scheduler happens to run each pair's ranks together,
# and waits out a scheduler tick per call in the next: MPICH's 4-rank Send/Recv read 0.73 and 48.5 us
# at 8 B in the two rounds of one run, 8000 us alone minutes later).
ERRATIC_SPREAD = 10.0


def erratic_sizes(record, numerator, host):
    """The sizes at which the faster of `numerator` (by best round), which the ratio against `host`
    compares with, was erratic: its slowest round at least ERRATIC_SPREAD times its best."""
    keep = kept_rounds(record) or {}
    h = best(record, host)
    out = []
    for size in sizes(record):
        if size not in h:
            continue
        faster = None
        for name in numerator:
            row = best(record, name).get(size)
            if row and (faster is None or row[1] < faster[1]):
                faster = (name, row[1])
        if faster is None:
            continue
        kept = keep.get(faster[0])
        runs = [rows[size][1] for i, rows in enumerate(record["results"].get(faster[0], []))
                if rows and size in rows and rows[size][1] > 0 and (kept is None or kept[i])]
        if len(runs) > 1 and max(runs) >= ERRATIC_SPREAD * min(runs):
            out.append(size)
    return out


def sizes(record):
    return sorted({s for runs in record["results"].values() for rows in runs if rows for s in rows})


def fmt_us(us):
    if us is None:
        return "—"
    if us < 0.1:
        return "%.3f" % us  # memcpy of a few bytes
    return "%.2f" % us if us < 10 else "%.1f" % us if us < 1000 else "%.0f" % us


def fmt_ratio(r):
    return "—" if r is None else "%.2f" % r if r >= 0.01 else "%.3g" % r


def ratio(a, b):
    return a / b if a and b else None


def data_size(record, size):
    for name in PEER_ORDER:
        row = best(record, name).get(size)
        if row:
            return row[0]
    return size


def hosts_of(record):
    return [h for h in HOSTS if h in record["results"]]


def main_rows(record):
    """(header, rows) of the main table: times in microseconds, then the ratios, per hostccl buffer
    kind (the MPIs always run on malloc memory)."""
    present = [n for n in PEER_ORDER if n in record["results"]]
    hosts = hosts_of(record)
    bests = {n: best(record, n) for n in present}
    header = ["data_size"] + ["%s (us)" % n for n in present]
    has_mpi = any(n in present for n in MPIS)
    if has_mpi:
        header += ["best MPI / %s" % h for h in hosts]
    if "Gloo" in present:
        header += ["Gloo / %s" % h for h in hosts]
    if "memcpy" in present:
        header += ["copy eff. %s" % h for h in hosts] + (["copy eff. best MPI"] if has_mpi else [])
    rows = []
    for size in sizes(record):
        t = {n: bests[n].get(size, (None, None))[1] for n in present}
        mpi = [t[n] for n in MPIS if t.get(n)]
        best_mpi = min(mpi) if mpi else None
        row = [svg.size_label(data_size(record, size))] + [fmt_us(t[n]) for n in present]
        if has_mpi:
            row += [fmt_ratio(ratio(best_mpi, t[h])) for h in hosts]
        if "Gloo" in present:
            row += [fmt_ratio(ratio(t["Gloo"], t[h])) for h in hosts]
        if "memcpy" in present:
            row += [fmt_ratio(ratio(t["memcpy"], t[h])) for h in hosts]
            if has_mpi:
                row.append(fmt_ratio(ratio(t["memcpy"], best_mpi)))
        rows.append(row)
    return header, rows


def dtype_rows(record):
    """fp16 and bf16 against fp32 of the buffer kind they ran on (bench.py: the first --mem)."""
    base = next((h for h in hosts_of(record) if record.get("dtype_mem", "hostccl malloc") == h), None)
    base = base or (hosts_of(record) or [None])[0]
    names = [base, "hostccl fp16", "hostccl bf16"]
    if base is None or not all(n in record["results"] for n in names):
        return None
    bests = {n: best(record, n) for n in names}
    header = ["data_size", "fp32 (us)", "fp16 (us)", "bf16 (us)", "fp16 / fp32", "bf16 / fp32"]
    rows = []
    for size in sizes(record):
        t = [bests[n].get(size, (None, None))[1] for n in names]
        rows.append([svg.size_label(data_size(record, size))] + [fmt_us(x) for x in t]
                    + [fmt_ratio(ratio(t[1], t[0])), fmt_ratio(ratio(t[2], t[0]))])
    return header, rows


def sweeps(record, name):
    """How many sweeps an implementation ran: the rounds, and any refill_state added."""
    return max(record["rounds"], len(record["results"].get(name, [])))


def rounds_rows(record):
    names = [n for n in record["impls"]]
    header = ["data_size"] + ["%s r%d" % (n, r + 1) for n in names for r in range(sweeps(record, n))]
    rows = []
    for size in sizes(record):
        row = [svg.size_label(data_size(record, size))]
        for n in names:
            done = record["results"][n]
            row += [fmt_us((rows_of_round or {}).get(size, (None, None))[1]) for rows_of_round in done]
            row += ["—"] * (sweeps(record, n) - len(done))
        rows.append(row)
    lines = record.get("lines")
    if lines:
        row = ["line exchange before"]
        for n in names:
            measured = [v.replace(" us", "") for v in lines.get(n, [])]
            row += measured + ["—"] * (sweeps(record, n) - len(measured))
        rows.append(row)
    return header, rows


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def console_table(record):
    header, rows = main_rows(record)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["%s, %d ranks (best of %d rounds, times in us)" % (record["collective"], record["ranks"],
                                                                record["rounds"])]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    dt = dtype_rows(record)
    if dt:
        lines.append("AllReduce by datatype, same bytes (hostccl)")
        lines += ["  ".join(c.rjust(12) for c in r) for r in [dt[0]] + dt[1]]
    return "\n".join(lines)


def describe_bands(bands):
    return "; ".join("%s..%s x%g: %d iterations, %d warm-up" % (svg.size_label(b), svg.size_label(e), f, it, w)
                     for b, e, f, it, w in bands)


def combo_markdown(record, env):
    coll, n = record["collective"], record["ranks"]
    out = ["# %s, %d ranks — %s\n\n" % (coll, n, env["date"]),
           "Machine: %s, %s cores (%s). hostccl %s.\n\n" % (env["host"], env["cores"], env["cpu"], env["hostccl"]),
           "Load before: `%s`  \nLoad after: `%s`\n\n" % (record["load_before"], record["load_after"]),
           "Each implementation ran %d whole sweeps, alternating (%s, then again); the table keeps each "
           "size's **best** (lowest) time. Times are the slowest rank's average per call, in microseconds. "
           "`hostccl malloc` ran on plain malloc buffers, `hostccl acl` on aclrtMalloc buffers; the MPIs "
           "on malloc buffers. `best MPI / hostccl ...` is the faster MPI's time divided by hostccl's "
           "(above 1: hostccl is faster). `copy eff.` is the time of %d processes each doing one memcpy "
           "of data_size at once, divided by the collective's time (1.0 would be as fast as a plain "
           "copy).\n\n"
           % (record["rounds"], ", ".join(record["impls"]), n),
           "Sizes and iterations: %s.\n\n" % describe_bands(record["bands"])]
    keep = kept_rounds(record)
    extra = ["%s r%d" % (name, r + 1) for name in record["impls"]
             for r in range(record["rounds"], len(record["results"].get(name, [])))]
    if keep:
        dropped = ["%s r%d" % (name, i + 1) for name, k in keep.items() for i, kept in enumerate(k) if not kept]
        out.append("The VM changed state during this table (line exchanges before the sweeps, last row of "
                   "every round below): the best times come from the sweeps in the state most of them met; "
                   "left out: %s.%s\n\n" % (", ".join(dropped), " Swept again once that state was back, "
                                            "for implementations that had not met it: %s." % ", ".join(extra)
                                            if extra else ""))
    elif extra:
        out.append("The VM changed state during this table; swept again in the state most sweeps met: %s; "
                   "still not every implementation met one state, so every round counts.\n\n"
                   % ", ".join(extra))
    for name, info in sorted(record["info"].items()):
        if not name.startswith("hostccl"):
            out.append("- %s: %s\n" % (name, info))
    out.append("\n")
    header, rows = main_rows(record)
    out.append(markdown_table(header, rows))
    dt = dtype_rows(record)
    if dt:
        out.append("\n## AllReduce by datatype (hostccl, same byte counts)\n\n"
                   "`fp16 / fp32` is the fp16 time divided by the fp32 time for the same number of bytes "
                   "(twice the elements); above 1: the 16-bit type is slower per byte.\n\n")
        out.append(markdown_table(*dt))
    if record["errors"]:
        out.append("\n## Failures\n\n")
        for name, errs in record["errors"].items():
            out += ["- %s, %s\n" % (name, e) for e in errs]
    for host in hosts_of(record):
        erratic = erratic_sizes(record, MPIS, host)
        if erratic:
            out.append("\nAgainst an erratic MPI (`%s`): %s: the faster MPI's rounds there differ by %gx or "
                       "more (every round below), so its best is a lucky sweep, not its usual speed.\n"
                       % (host, ", ".join(fmt_size(x) for x in erratic), ERRATIC_SPREAD))
            break
    out.append("\n<details><summary>Every round (us; the last row: bench/peers/line_exchange just before "
               "each sweep, the VM's state: about 0.07 us fast, 0.3 slow)</summary>\n\n")
    out.append(markdown_table(*rounds_rows(record)))
    out.append("\n</details>\n\nPlot: [%s-%s-%d.svg](%s-%s-%d.svg)\n" % (env["date"], coll, n, env["date"], coll, n))
    return "".join(out)


def combo_plot(record, path):
    series = []
    for name in record["impls"]:
        pts = [(data, data / us / 1e3) for data, us in best(record, name).values() if us > 0]
        series.append((name, pts))
    svg.plot(path, "%s, %d ranks: algorithm bandwidth (best of %d rounds)"
             % (record["collective"], record["ranks"], record["rounds"]), series)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def band_ratio(record, lo, hi, numerator, host):
    h = best(record, host)
    ratios = []
    for size in sizes(record):
        if lo <= size <= hi and size in h:
            nums = [best(record, n).get(size, (None, None))[1] for n in numerator]
            nums = [x for x in nums if x]
            if nums:
                ratios.append(min(nums) / h[size][1])
    return geomean(ratios)


def worst_ratio(record, numerator, host):
    """The smallest faster-MPI/hostccl ratio over all sizes, and its size: targets hold at every size."""
    h = best(record, host)
    worst = None
    for size in sizes(record):
        nums = [best(record, n).get(size, (None, None))[1] for n in numerator]
        nums = [x for x in nums if x]
        if nums and size in h:
            r = min(nums) / h[size][1]
            if worst is None or r < worst[0]:
                worst = (r, size)
    return worst


def largest_step(record, host):
    """hostccl's largest time ratio between one size and the next (a spin-wait collapse shows as a
    jump far above the size step), and the size it jumps to."""
    h = best(record, host)
    ordered = [s for s in sizes(record) if s in h]
    steps = [(h[b][1] / h[a][1], b) for a, b in zip(ordered, ordered[1:])]
    return max(steps) if steps else None


def fmt_size(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d%s" % (size >> shift, unit)
    return str(size)


def line_note(lines):
    """The machine's state around a run: a cache-line exchange between two CPUs (line_exchange)."""
    if not lines:
        return ""
    return (" A cache-line exchange between the two CPUs (bench/peers/line_exchange, the floor of a "
            "2-rank small collective) took %s before the runs and %s after." % lines)


def line_range(record):
    """The line exchanges before the sweeps of one table, lowest-highest: the VM's state changed
    during the table when they straddle its two states (about 0.07 and 0.3 us)."""
    values = [us for per_round in line_values(record).values() for us in per_round if us is not None]
    if not values:
        return "—"
    return "%.2f-%.2f" % (min(values), max(values)) if max(values) > min(values) else "%.2f" % values[0]


def summary_markdown(records, env):
    out = ["# make bench — %s\n\n" % env["date"],
           "Machine: %s, %s cores (%s). hostccl %s. Command: `%s`.  \n"
           % (env["host"], env["cores"], env["cpu"], env["hostccl"], env["command"]),
           "Load at start: `%s`  \nLoad at end: `%s`\n\n" % (env["load_start"], env.get("load_end", "?")),
           line_note((env.get("line_start", "not measured"), env.get("line_end", "not measured"))).strip() + "\n\n"]
    if env["skipped"]:
        out += ["Skipped: %s\n\n" % "; ".join(env["skipped"])]
    out.append("Geometric means over the sizes of each band of the faster MPI's time divided by hostccl's "
               "(above 1: hostccl faster), and the worst size; copy efficiency of hostccl at the largest size; "
               "hostccl's largest time ratio from one size to the next (sizes grow 2-4x per step: far above "
               "that is a collapse); each table is best of %d alternating rounds. The last column: "
               "bench/peers/line_exchange before each sweep of the table; where it spans both of the VM's "
               "states (about 0.07 and 0.3 us) the implementations' best rounds may come from different "
               "states, and the small sizes' ratios with them. `erratic MPI at`: the sizes where the "
               "faster MPI's rounds differed by %gx or more, so that its best round (which the ratios "
               "use) was a lucky sweep: a busy-polling MPI whose ranks outnumber the cores runs at "
               "nearly its 2-rank speed when the scheduler happens to run each pair together, and "
               "waits out a scheduler tick per call otherwise.\n\n" % (env["rounds"], ERRATIC_SPREAD))
    header = ["collective", "ranks", "buffers", "MPI/hostccl <=32K", "128K..2M", ">=8M", "worst (size)",
              "erratic MPI at", "Gloo/hostccl >=8M", "copy eff. largest", "largest step (to size)", "minutes",
              "load before", "line exchange (us)"]
    rows = []
    for r in records:
        m = best(r, "memcpy")
        load = r["load_before"].split("load average:")[-1].strip()
        for host in hosts_of(r):
            h = best(r, host)
            top = max(h) if h else None
            eff = ratio(m.get(top, (0, None))[1], h[top][1]) if top and top in m else None
            gloo = band_ratio(r, LARGE, 1 << 40, ["Gloo"], host) if "Gloo" in r["results"] else None
            worst, step = worst_ratio(r, MPIS, host), largest_step(r, host)
            rows.append([r["collective"], str(r["ranks"]), host.replace("hostccl ", ""),
                         fmt_ratio(band_ratio(r, 0, SMALL, MPIS, host)),
                         fmt_ratio(band_ratio(r, SMALL + 1, LARGE - 1, MPIS, host)),
                         fmt_ratio(band_ratio(r, LARGE, 1 << 40, MPIS, host)),
                         "%s (%s)" % (fmt_ratio(worst[0]), fmt_size(worst[1])) if worst else "—",
                         ", ".join(fmt_size(x) for x in erratic_sizes(r, MPIS, host)) or "—",
                         fmt_ratio(gloo), fmt_ratio(eff),
                         "%.1fx (%s)" % (step[0], fmt_size(step[1])) if step else "—",
                         "%.1f" % (r["seconds"] / 60), load, line_range(r)])
    out.append(markdown_table(header, rows))
    for key, what in (("side", "Side by side in the same processes"), ("overlap", "Overlap")):
        if env.get(key):
            out.append("\n%s: [%s](%s)\n" % (what, os.path.basename(env[key]), os.path.basename(env[key])))
    return "".join(out)


def side_rows(results, mem, coll):
    """{size: {flavour: row}} of one buffer kind and collective of the side-by-side client."""
    rows_by_size = {}
    for f in ("openmpi", "mpich"):
        for row in (results.get((mem, coll, f)) or {}).get("rows", []):
            rows_by_size.setdefault(row["data_size"], {})[f] = row
    return rows_by_size


def side_vs_better(by_flavour):
    """The ratio against the better MPI: the worse of the two same-process ratios of medians."""
    ratios = [ratio(r["mpi_median_us"], r["hostccl_median_us"]) for r in by_flavour.values()]
    ratios = [r for r in ratios if r]
    return min(ratios) if ratios else None


def side_markdown(results, plan, load="", lines=None):
    """The side-by-side client's tables. results: {(mem, coll, flavour): its JSON}. First one line
    per (collective, buffer kind) with the ratio against the better MPI per size, then per
    collective each MPI's median, hostccl's median in the same processes, and their ratio."""
    mems, colls = [], []
    for mem, coll, _ in results:
        mems += [mem] if mem not in mems else []
        colls += [coll] if coll not in colls else []
    out = ["# hostccl and MPI in the same processes (bench/peers/side_by_side.c)\n\n",
           "2 ranks, buffers shared by both libraries (%s), every hostccl call followed by "
           "aclrtSynchronizeStream (a blocking call, as MPI's); per size each library in turn, the order "
           "alternating by round; medians over the rounds, in us. Plan: `%s`. Before timing each size "
           "both libraries ran it once on the same input and their results agreed bit for bit. "
           "Load at the end: %s.%s\n\n" % (", ".join(mems), plan, load or "not recorded", line_note(lines))]
    if any(m.endswith("-touch") for m in mems):
        out.append("A `-touch` kind: before every call each rank wrote its input and after it read its output "
                   "(every cache line), as a program does with the activations it sends and receives; only the "
                   "calls are timed. The other kinds reuse untouched buffers (the MPI benchmarks' and "
                   "hccl_test's convention), which flatters reading a peer's buffer in place: the lines read "
                   "last time are still in the reader's cache.\n\n")
    sizes = sorted({row["data_size"] for doc in results.values() for row in doc.get("rows", [])})
    summary = []
    for coll in colls:
        for mem in mems:
            by_size = side_rows(results, mem, coll)
            if by_size:
                summary.append([coll, mem] + [fmt_ratio(side_vs_better(by_size[s])) if s in by_size else "—"
                                              for s in sizes])
    out.append("## Ratio against the better MPI (its median / hostccl's; above 1: hostccl is faster)\n\n")
    out.append(markdown_table(["collective", "buffers"] + [svg.size_label(s) for s in sizes], summary) + "\n")
    header = ["data_size", "Open MPI", "hostccl", "ratio", "MPICH", "hostccl", "ratio", "vs better MPI"]
    for coll in colls:
        for mem in mems:
            by_size = side_rows(results, mem, coll)
            if not by_size:
                continue
            rows = []
            for size in sorted(by_size):
                cells = [svg.size_label(size)]
                for f in ("openmpi", "mpich"):
                    row = by_size[size].get(f)
                    cells += (["—"] * 3 if row is None else
                              [fmt_us(row["mpi_median_us"]), fmt_us(row["hostccl_median_us"]),
                               fmt_ratio(ratio(row["mpi_median_us"], row["hostccl_median_us"]))])
                rows.append(cells + [fmt_ratio(side_vs_better(by_size[size]))])
            out.append("## %s, %s buffers\n\n" % (coll, mem))
            out.append(markdown_table(header, rows) + "\n")
    return "".join(out)
