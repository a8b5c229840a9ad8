"""hostccl's own interface on every rank of an hccl-run job: every operation on numpy arrays, torch
CPU tensors and plain buffers, checked element by element; async handles; groups; sub-communicators;
errors as exceptions. Run: hccl-run -n N /usr/bin/python3 tests/python/ranks_api.py
"""
import array
import ctypes

from _setup import check, require

require("numpy", "torch")
import numpy as np  # noqa: E402
import torch  # noqa: E402

import hostccl  # noqa: E402

comm = hostccl.init()
r, n = comm.rank, comm.size
INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
TYPES = INT_TYPES + [np.float16, np.float32, np.float64]
REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def inputs(rank, count, dtype, salt=0):
    """Small integers (1..5) that depend on the rank, the index and the call: every result is exact."""
    return ((np.arange(count) + 3 * rank + salt) % 5 + 1).astype(dtype)


def equal(got, want, what):
    check(got.dtype == want.dtype and np.array_equal(got, want), f"rank {r}: {what}: got {got[:8]}, want {want[:8]}")


def test_all_reduce():
    for salt, dtype in enumerate(TYPES):
        for op, fn in REDUCE.items():
            count = 1 + 37 * salt
            x = inputs(r, count, dtype, salt)
            want = fn(np.stack([inputs(q, count, dtype, salt) for q in range(n)]), axis=0).astype(dtype)
            out = np.empty_like(x)
            comm.all_reduce(x, out, op)
            equal(out, want, f"all_reduce {op} {np.dtype(dtype)} out of place")
            comm.all_reduce(x, op=op)
            equal(x, want, f"all_reduce {op} {np.dtype(dtype)} in place")


def test_rooted():
    root = n - 1
    x = inputs(r, 100, np.float32) if r == root else np.zeros(100, np.float32)
    comm.broadcast(x, root)
    equal(x, inputs(root, 100, np.float32), "broadcast")
    dst = 1 % n
    x = inputs(r, 50, np.int32)
    out = np.zeros(50, np.int32)
    comm.reduce(x, out, "max", root=dst)
    if r == dst:
        equal(out, np.max([inputs(q, 50, np.int32) for q in range(n)], axis=0), "reduce max")
    comm.reduce(x, op=hostccl.ReduceOp.SUM, root=dst)
    if r == dst:
        equal(x, np.sum([inputs(q, 50, np.int32) for q in range(n)], axis=0).astype(np.int32), "reduce in place")
    send = np.arange(n * 4, dtype=np.float64) if r == 0 else None
    recv = np.zeros(4)
    comm.scatter(send, recv, root=0)
    equal(recv, np.arange(4 * r, 4 * r + 4, dtype=np.float64), "scatter")


def test_gather_scatter_family():
    x = inputs(r, 6, np.int16)
    out = np.zeros(6 * n, np.int16)
    comm.all_gather(x, out)
    equal(out, np.concatenate([inputs(q, 6, np.int16) for q in range(n)]), "all_gather")
    counts = [q + 1 for q in range(n)]
    out = np.zeros(sum(counts), np.int16)
    comm.all_gather_v(inputs(r, r + 1, np.int16), out, counts)
    equal(out, np.concatenate([inputs(q, q + 1, np.int16) for q in range(n)]), "all_gather_v")
    full = [inputs(q, 5 * n, np.float32) for q in range(n)]
    out = np.zeros(5, np.float32)
    comm.reduce_scatter(full[r], out, "sum")
    equal(out, np.sum(full, axis=0)[5 * r:5 * r + 5].astype(np.float32), "reduce_scatter")
    displs = [sum(counts[:q]) for q in range(n)]
    full = [inputs(q, sum(counts), np.float64) for q in range(n)]
    out = np.zeros(counts[r])
    comm.reduce_scatter_v(full[r], counts, displs, out, "min")
    equal(out, np.min(full, axis=0)[displs[r]:displs[r] + counts[r]], "reduce_scatter_v")


def test_all_to_all():
    send = (np.arange(3 * n) + 100 * r).astype(np.int64)
    recv = np.zeros(3 * n, np.int64)
    comm.all_to_all(send, recv)
    equal(recv, np.concatenate([np.arange(3 * r, 3 * r + 3) + 100 * q for q in range(n)]), "all_to_all")
    # Rank q sends q + j + 1 elements to rank j, all valued 1000 q + j.
    sc = [r + j + 1 for j in range(n)]
    rc = [q + r + 1 for q in range(n)]
    send = np.concatenate([np.full(sc[j], 1000 * r + j, np.int32) for j in range(n)])
    recv = np.zeros(sum(rc), np.int32)
    comm.all_to_all_v(send, sc, None, recv, rc, None)
    want = np.concatenate([np.full(rc[q], 1000 * q + r, np.int32) for q in range(n)])
    equal(recv, want, "all_to_all_v")
    matrix = [[q + j + 1 for j in range(n)] for q in range(n)]
    recv = np.zeros(sum(rc), np.int32)
    comm.all_to_all_vc(send, matrix, recv)
    equal(recv, want, "all_to_all_vc")


def test_point_to_point():
    nxt, prv = (r + 1) % n, (r - 1) % n
    send = inputs(r, 1000, np.uint8)
    recv = np.zeros(1000, np.uint8)
    comm.batch_send_recv([("send", send, nxt), ("recv", recv, prv)])
    equal(recv, inputs(prv, 1000, np.uint8), "batch_send_recv ring")
    if n >= 2:
        if r == 0:
            comm.send(send, 1)
        elif r == 1:
            comm.recv(recv, 0)
            equal(recv, inputs(0, 1000, np.uint8), "send/recv")
    recv[:] = 0
    with hostccl.group():
        ws = comm.send(send, nxt, async_op=True)
        wr = comm.recv(recv, prv, async_op=True)
    ws.wait()
    wr.wait()
    equal(recv, inputs(prv, 1000, np.uint8), "group send/recv ring")
    comm.barrier()


def test_kinds_of_buffer():
    t = torch.full((64,), float(r + 1), dtype=torch.bfloat16)
    comm.all_reduce(t)
    check(torch.equal(t, torch.full((64,), float(n * (n + 1) // 2), dtype=torch.bfloat16)), f"torch bf16 {t[:4]}")
    c = torch.full((8,), complex(r, 1), dtype=torch.complex64)
    comm.all_reduce(c)
    check(torch.equal(c, torch.full((8,), complex(n * (n - 1) // 2, n), dtype=torch.complex64)), f"complex {c[:2]}")
    a = array.array("i", [r] * 10)
    comm.all_reduce(a, op="max")
    check(list(a) == [n - 1] * 10, f"array.array: {list(a)}")
    b = bytearray([r] * 16) if r == 0 else bytearray(16)
    comm.broadcast(b, 0)
    check(b == bytearray(16), f"bytearray {bytes(b)}")
    m = memoryview(bytearray(np.full(4, r, np.float32).tobytes())).cast("f")
    comm.all_reduce(m)
    check(list(m) == [n * (n - 1) / 2] * 4, f"memoryview {list(m)}")
    cbuf = (ctypes.c_double * 3)(r, r, r)
    comm.all_reduce(cbuf, op="min")
    check(list(cbuf) == [0.0] * 3, f"ctypes array {list(cbuf)}")
    ro = np.full(5, r, np.int64)
    ro.flags.writeable = False  # a read-only input is fine
    out = np.zeros(5, np.int64)
    comm.all_reduce(ro, out)
    equal(out, np.full(5, n * (n - 1) // 2, np.int64), "read-only input")
    arena = hostccl.empty((4, 256), np.float32)
    arena[:] = r
    comm.all_reduce(arena)
    equal(arena, np.full((4, 256), n * (n - 1) / 2, np.float32), "arena array")
    empty = np.zeros(0, np.float32)
    comm.all_reduce(empty)  # count 0 succeeds and moves nothing


def test_async():
    xs = [np.full(1000, r + k, np.float32) for k in range(4)]
    works = [comm.all_reduce(x, async_op=True) for x in xs]
    for k, (x, w) in enumerate(zip(xs, works)):
        w.wait()
        check(w.is_completed(), "completed after wait")
        equal(x, np.full(1000, n * (n - 1) / 2 + n * k, np.float32), f"async all_reduce {k}")
    # A dropped handle and a dropped buffer: the stream keeps the buffer until it is synchronised.
    comm.all_reduce(np.ones(1 << 16, np.float32), async_op=True)
    stream = hostccl.Stream()
    y = np.full(10, r, np.int32)
    w = comm.broadcast(y, n - 1, stream=stream, async_op=True)
    stream.synchronize()
    equal(y, np.full(10, n - 1, np.int32), "broadcast on another stream")
    check(w.is_completed(), "is_completed after the stream's synchronize")
    comm.stream.synchronize()
    stream.close()


def test_split():
    members = [0, n - 1]
    if r in members:
        with comm.split(members, sub_id=7) as sub:
            check(sub.size == len(set(members)) and sub.rank == members.index(r), f"split: {sub}")
            x = np.full(3, r, np.int32)
            sub.all_reduce(x)
            equal(x, np.full(3, sum(set(members)), np.int32), "split all_reduce")
    comm.barrier()


def test_errors():
    def raises(exc, fn, text):
        try:
            fn()
        except exc as e:
            check(text in str(e), f"{exc.__name__} says {e!s}, not {text!r}")
            return e
        raise AssertionError(f"no {exc.__name__} ({text})")

    raises(ValueError, lambda: comm.all_reduce(np.zeros((4, 4), np.float32)[:, 1]), "not contiguous")
    raises(ValueError, lambda: comm.all_reduce(torch.zeros(4, 4).t()), "not contiguous")
    raises(TypeError, lambda: comm.all_reduce(np.zeros(4, np.float32), np.zeros(4, np.int32)), "FP32")
    raises(ValueError, lambda: comm.all_gather(np.zeros(4), np.zeros(4 * n + 1)), "receive buffer holds")
    raises(TypeError, lambda: comm.all_reduce(np.zeros(2, np.complex256)), "no HCCL data type")
    raises(TypeError, lambda: comm.all_reduce(object()), "neither")
    raises(ValueError, lambda: comm.all_reduce(np.zeros(2), op="avg"), "unknown reduction")
    ro = np.zeros(3)
    ro.flags.writeable = False
    raises(ValueError, lambda: comm.broadcast(ro, 0), "read-only")
    e = raises(hostccl.HcclError, lambda: comm.broadcast(np.zeros(2), root=n + 3), "out of range")
    check(e.result == hostccl.Result.E_PARA, f"result {e.result!r}")
    # Ranks that disagree: the operation fails on every rank with HCCL_E_PARA, raised by the
    # synchronisation (the failure happens on the stream, not at the call), with the library's last
    # error line: the flight recorder's diagnosis, naming every rank's call.
    other = hostccl.init()
    e = raises(hostccl.HcclError, lambda: other.all_reduce(np.zeros(8 + r, np.float32)),
               f"allreduce count={8 + r} fp32")
    check(e.result == hostccl.Result.E_PARA, f"mismatch result {e.result!r}")
    check(other.async_error() == hostccl.Result.E_PARA, "async error is sticky")
    other.close()


for test in (test_all_reduce, test_rooted, test_gather_scatter_family, test_all_to_all, test_point_to_point,
             test_kinds_of_buffer, test_async, test_split, test_errors):
    test()
comm.close()
print(f"rank {r} of {n}: ranks_api passed")
