"""The torch.distributed backend "hccl" against gloo in the same processes: every operation of
docs/python.md, every dtype, every reduction, results equal to gloo's (where gloo lacks a dtype or
an operation, to gloo's result of the equivalent call). Run:
hccl-run -n N /usr/bin/python3 tests/python/torch_vs_gloo.py
"""
from _setup import check, require

require("torch")
from datetime import timedelta  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import hostccl.torch  # noqa: E402,F401  (registers "hccl")

dist.init_process_group("hccl", timeout=timedelta(seconds=120))
r, n = dist.get_rank(), dist.get_world_size()
check(dist.get_backend() == "hccl", f"backend {dist.get_backend()}")
GLOO = dist.new_group(backend="gloo")
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
DTYPES = FLOATS + INTS
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX}
# gloo (torch 1.13) has no bfloat16, no int16 and no bool: reduce those in a wider type and cast back.
GLOO_WIDE = {torch.bfloat16: torch.float32, torch.int16: torch.int32, torch.bool: torch.uint8}


def data(rank, count, dtype, salt=0):
    """Values 1..3 (signed types: -3..3, never 0 for products): every result is exact in every type."""
    base = (torch.arange(count) * 7 + rank * 5 + salt) % 3 + 1
    if dtype == torch.bool:
        return (torch.arange(count) + rank) % 3 != 0
    if dtype.is_floating_point or dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
        base = torch.where((torch.arange(count) + rank) % 4 == 0, -base, base)
    return base.to(dtype)


def same(got, want, what):
    if got.dtype == torch.bool and want.dtype == torch.bool:  # a bool byte of 2 equals True: see the bytes
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    check(got.dtype == want.dtype and torch.equal(got, want),
          f"rank {r}: {what}: hccl {got.flatten()[:8].tolist()}, gloo {want.flatten()[:8].tolist()}")


def gloo_all_reduce(t, op):
    wide = GLOO_WIDE.get(t.dtype)
    g = t.to(wide) if wide else t.clone()
    dist.all_reduce(g, op=op, group=GLOO)
    return g.to(t.dtype) if wide else g


def gloo_bytes(fn, *tensors):
    """Run a data-moving gloo call on byte views (any dtype moves as bytes)."""
    views = [t.view(torch.uint8) if t.dtype in GLOO_WIDE else t for t in tensors]
    fn(*views)


def test_all_reduce():
    for salt, dtype in enumerate(DTYPES):
        for name, op in OPS.items():
            for count in (1, 1000 + salt):
                t = data(r, count, dtype, salt)
                want = gloo_all_reduce(t, op)
                dist.all_reduce(t, op=op)
                same(t, want, f"all_reduce {name} {dtype} x{count}")
        if dtype.is_floating_point:
            t = data(r, 100, dtype)
            want = (gloo_all_reduce(t, dist.ReduceOp.SUM).to(torch.float64) / n).to(dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            same(t, want, f"all_reduce AVG {dtype}")
    for name, op in OPS.items():
        t = data(r, 64, torch.bool)
        want = gloo_all_reduce(t, dist.ReduceOp.MAX if name == "SUM" else dist.ReduceOp.MIN
                               if name == "PRODUCT" else op)
        dist.all_reduce(t, op=op)
        same(t, want, f"all_reduce {name} bool")
    c = torch.complex(data(r, 10, torch.float32), data(r, 10, torch.float32, 1))
    want = c.clone()
    dist.all_reduce(want, group=GLOO)
    dist.all_reduce(c)
    same(c, want, "all_reduce complex64")


def test_broadcast_reduce():
    for dtype in DTYPES + [torch.bool]:
        t = data(r, 333, dtype)
        g = t.clone()
        dist.broadcast(t, src=n - 1)
        gloo_bytes(lambda x: dist.broadcast(x, src=n - 1, group=GLOO), g)
        same(t, g, f"broadcast {dtype}")
        for name, op in OPS.items():
            dst = 1 % n
            t = data(r, 77, dtype, 2)
            want = gloo_all_reduce(t, op)  # gloo's reduce leaves non-roots undefined: compare the root
            dist.reduce(t, dst=dst, op=op)
            if r == dst:
                same(t, want, f"reduce {name} {dtype}")


def test_gathers():
    for dtype in DTYPES + [torch.bool]:
        t = data(r, 50, dtype, 3)
        outs = [torch.zeros(50, dtype=dtype) for _ in range(n)]
        gouts = [torch.zeros(50, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, t)
        gloo_bytes(lambda *x: dist.all_gather(list(x[1:]), x[0], group=GLOO), t, *gouts)
        for q in range(n):
            same(outs[q], gouts[q], f"all_gather {dtype} block {q}")
        flat = torch.zeros(50 * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, t)
        same(flat, torch.cat(gouts), f"all_gather_into_tensor {dtype}")
        packed = torch.zeros(n, 50, dtype=dtype)  # outputs that are views of one tensor: zero copy
        dist.all_gather(list(packed.unbind(0)), t)
        same(packed.flatten(), torch.cat(gouts), f"all_gather into views {dtype}")
    t = data(r, 20, torch.float32)
    got = [torch.zeros(20) for _ in range(n)] if r == 0 else None
    want = [torch.zeros(20) for _ in range(n)] if r == 0 else None
    dist.gather(t, got, dst=0)
    dist.gather(t, want, dst=0, group=GLOO)
    if r == 0:
        for q in range(n):
            same(got[q], want[q], f"gather block {q}")
    src = [data(q, 20, torch.int64, 5) for q in range(n)] if r == n - 1 else None
    out, gout = torch.zeros(20, dtype=torch.int64), torch.zeros(20, dtype=torch.int64)
    dist.scatter(out, src, src=n - 1)
    dist.scatter(gout, src, src=n - 1, group=GLOO)
    same(out, gout, "scatter")


def test_reduce_scatter():
    # gloo has no reduce_scatter: compare with gloo's all_reduce of the whole input, block r.
    for dtype in DTYPES:
        for name, op in OPS.items():
            full = data(r, 40 * n, dtype, 4)
            want = gloo_all_reduce(full, op)[40 * r:40 * (r + 1)]
            out = torch.zeros(40, dtype=dtype)
            dist.reduce_scatter_tensor(out, full, op=op)
            same(out, want, f"reduce_scatter_tensor {name} {dtype}")
            out = torch.zeros(40, dtype=dtype)
            dist.reduce_scatter(out, [c.clone() for c in full.split(40)], op=op)
            same(out, want, f"reduce_scatter {name} {dtype}")


def test_all_to_all():
    for dtype in DTYPES + [torch.bool]:
        inp = data(r, 6 * n, dtype, 6)
        out, gout = torch.zeros(6 * n, dtype=dtype), torch.zeros(6 * n, dtype=dtype)
        dist.all_to_all_single(out, inp)
        gloo_bytes(lambda o, i: dist.all_to_all_single(o, i, group=GLOO), gout, inp)
        same(out, gout, f"all_to_all_single {dtype}")
    # Uneven splits: rank q sends q + j + 1 rows of 3 to rank j.
    in_splits = [r + j + 1 for j in range(n)]
    out_splits = [q + r + 1 for q in range(n)]
    inp = data(r, 3 * sum(in_splits), torch.float32).view(-1, 3)
    out = torch.zeros(sum(out_splits), 3)
    gout = torch.zeros(sum(out_splits), 3)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    dist.all_to_all_single(gout, inp, out_splits, in_splits, group=GLOO)
    same(out, gout, "all_to_all_single uneven")
    # all_to_all on lists (gloo lacks it: compare with gloo's all_to_all_single of the same blocks).
    ins = list(inp.split(in_splits))
    outs = [torch.zeros(s, 3) for s in out_splits]
    dist.all_to_all(outs, ins)
    same(torch.cat(outs), gout, "all_to_all lists")


def test_point_to_point():
    nxt, prv = (r + 1) % n, (r - 1) % n
    for dtype in (torch.float32, torch.int16, torch.bfloat16):
        x = data(r, 1000, dtype)
        y = torch.zeros(1000, dtype=dtype)
        # isend then irecv on every rank, in either order: deferred into one batch, no deadlock.
        reqs = [dist.isend(x, nxt), dist.irecv(y, prv)] if r % 2 else [dist.irecv(y, prv), dist.isend(x, nxt)]
        for q in reqs:
            q.wait()
        same(y, data(prv, 1000, dtype), f"isend/irecv ring {dtype}")
    y = torch.zeros(10)
    if r == 0:
        dist.send(torch.full((10,), 5.0), 1 % n)
    if r == 1 % n:
        dist.recv(y, 0)
        same(y, torch.full((10,), 5.0), "send/recv")
    ops = [dist.P2POp(dist.isend, data(r, 64, torch.int32), nxt), dist.P2POp(dist.irecv, y64 := torch.zeros(64,
           dtype=torch.int32), prv)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    same(y64, data(prv, 64, torch.int32), "batch_isend_irecv")
    dist.barrier()


def test_async_and_groups():
    ts = [data(r, 500, torch.float32, k) for k in range(4)]
    want = [gloo_all_reduce(t, dist.ReduceOp.SUM) for t in ts]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k, w in enumerate(works):
        check(w.wait(), "wait returns True")
        check(w.is_completed(), "completed after wait")
        same(ts[k], want[k], f"async all_reduce {k}")
    t = data(r, 100, torch.float64)
    w = dist.broadcast(t, src=0, async_op=True)
    w.wait()
    same(t, data(0, 100, torch.float64), "async broadcast")
    members = [0, n - 1] if n > 1 else [0]
    sub = dist.new_group(ranks=members, backend="hccl")
    gsub = dist.new_group(ranks=members, backend="gloo")
    if r in members:
        t = data(r, 30, torch.int32)
        g = t.clone()
        dist.all_reduce(t, group=sub)
        dist.all_reduce(g, group=gsub)
        same(t, g, "new_group all_reduce")
    dist.barrier()


def test_errors():
    for fn, text in ((lambda: dist.all_reduce(torch.zeros(4, 4).t()), "not contiguous"),
                     (lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND),
                      "not supported"),
                     (lambda: dist.all_reduce(torch.zeros(4, dtype=torch.bool), op=dist.ReduceOp.AVG), "bool")):
        try:
            fn()
        except (ValueError, RuntimeError) as e:
            check(text in str(e), f"error says {e}, not {text!r}")
        else:
            raise AssertionError(f"no error ({text})")
    dist.barrier()


for test in (test_all_reduce, test_broadcast_reduce, test_gathers, test_reduce_scatter, test_all_to_all,
             test_point_to_point, test_async_and_groups, test_errors):
    test()
dist.destroy_process_group()
print(f"rank {r} of {n}: torch_vs_gloo passed")
