"""The torch.distributed backend "hccl" for CPU tensors.

    import hostccl.torch            # registers "hccl"
    dist.init_process_group("hccl") # under torchrun, or hccl-run (see below)

A Python subclass of torch's ProcessGroup (the mechanism torch 1.13 offers to Python backends)
whose operations call libhccl on the tensors' memory in place. Every operation is enqueued on the
group's stream and returns a Work whose ``wait()`` synchronises that stream; ``async_op=False`` is
torch calling ``wait()`` at once. Checked with torch 1.13 (Debian 12's python3-torch).

Point-to-point calls are issued at the next ``wait()``, collective or barrier of the group, all
pending ones together as one HcclBatchSendRecv: an ``isend`` and an ``irecv`` posted in either order
on both sides never deadlock, as with gloo. Tags are ignored (HCCL matches messages in order).

Under hccl-run, which sets RANK and WORLD_SIZE but no MASTER_ADDR, ``init_method="env://"`` (the
default) gets a torch TCPStore served by rank 0 on loopback, its port handed to the other ranks
through hccl-run's store: importing this module wraps torch's env:// handler for that case only.
"""
import importlib
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup as _ProcessGroup

from . import _lib
from ._buffer import DataType, _torch_buffer
from .comm import Comm, ReduceOp, broadcast_root_info, get_root_info
from .launch import device_count, launch_info
from .memory import raw_buffer
from .stream import ensure_device, sync_error

_RedOpType = dist.ReduceOp.RedOpType
_AVG = _RedOpType.AVG.value
# RedOpType value -> HcclReduceOp (AVG: a sum, divided after completion). Keyed by the plain int:
# looking up pybind enum objects in a dict costs ~0.7 us a call.
_REDUCE = {_RedOpType.SUM.value: ReduceOp.SUM, _RedOpType.PRODUCT.value: ReduceOp.PROD,
           _RedOpType.MIN.value: ReduceOp.MIN, _RedOpType.MAX.value: ReduceOp.MAX, _AVG: ReduceOp.SUM}
_FAST_REDUCE = {k: int(v) for k, v in _REDUCE.items() if k != _AVG}
_RED_NAMES = {v.value: k for k, v in _RedOpType.__members__.items()}


def _op_kind_slow(op):
    return getattr(op, "op", op).value


# torch 1.13's ReduceOp hashes to its RedOpType value: 0.3 us cheaper than .op.value through pybind.
# Used only where that holds for every operation this torch has.
_HASH_IS_KIND = all(hash(getattr(dist.ReduceOp, name)) == member.value
                    for name, member in _RedOpType.__members__.items() if name != "PREMUL_SUM")
_op_kind = hash if _HASH_IS_KIND else _op_kind_slow
_SIMPLE_DTYPES = {torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                  torch.float32, torch.float64}
_SIMPLE = {dt: _torch_buffer(torch.empty(0, dtype=dt))[2] for dt in _SIMPLE_DTYPES}  # torch dtype -> HCCL
# Booleans reduce as bytes: a sum is a logical or, a product a logical and (ProcessGroupNCCL's rule).
_BOOL_REDUCE = {ReduceOp.SUM: int(ReduceOp.MAX), ReduceOp.PROD: int(ReduceOp.MIN),
                ReduceOp.MAX: int(ReduceOp.MAX), ReduceOp.MIN: int(ReduceOp.MIN)}
_SEND, _RECV = 0, 1
_getrefcount = sys.getrefcount


def _seconds(timeout):
    if timeout is None:
        return None
    s = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return None if s <= 0 else s  # torch's "no timeout" is timedelta(0)


class Work(dist.Work):
    """The handle of one operation of a ProcessGroupHCCL (see the module's doc)."""

    def __init__(self, pg, keep, post=None):
        super().__init__()
        self._pg = pg
        self._keep = keep
        self._post = post
        self._error = None
        self._done = False

    def wait(self, timeout=None):
        if self._done:
            if self._error is not None:
                raise self._error
            return True
        pg = self._pg
        if pg._pending:
            pg._flush()
        seconds = None if timeout is None else _seconds(timeout)
        if seconds is None:
            rc = _lib.aclrtSynchronizeStream(pg._sh)
        else:
            rc = _lib.aclrtSynchronizeStreamWithTimeout(pg._sh, int(seconds * 1000))
            if rc == _lib.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                raise RuntimeError(f"hostccl: operation not complete after {seconds} s")
        self._done = True
        self._keep = None
        pg._inflight.clear()
        if rc != 0 or self._post is not None:
            self._finish(rc)
            if self._error is not None:
                raise self._error
        return True

    def _settle(self, rc):
        self._done = True
        self._keep = None
        self._pg._inflight.clear()
        self._finish(rc)

    def _finish(self, rc):
        if rc != 0:
            self._error = sync_error(rc, self._pg._comm, "ProcessGroupHCCL")
        elif self._post is not None:
            post, self._post = self._post, None
            post()

    def is_completed(self):
        """Without blocking: True once this operation (and every one before it) has run."""
        if self._done:
            return True
        if self._pg._pending:
            return False
        rc = _lib.aclrtSynchronizeStreamWithTimeout(self._pg._sh, 0)
        if rc == _lib.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
            return False
        self._settle(rc)
        return True

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def synchronize(self):
        self.wait()

    def result(self):
        return [] if self._keep is None else list(self._keep) if isinstance(self._keep, (list, tuple)) else [self._keep]


def _one(tensors, what):
    if isinstance(tensors, torch.Tensor):
        return tensors
    if len(tensors) != 1:
        raise ValueError(f"hostccl: {what} takes one tensor per process, not {len(tensors)}")
    return tensors[0]


def _packed(tensors):
    """The address of `tensors` if they lie back to back in memory in order, each contiguous, else None."""
    first = tensors[0]
    base = first.data_ptr()
    at = base
    for t in tensors:
        if t.data_ptr() != at or not t.is_contiguous() or t.dtype != first.dtype:
            return None
        at += t.numel() * t.element_size()
    return base


def _flat(tensors, dtype):
    return torch.empty(sum(t.numel() for t in tensors), dtype=dtype)


class ProcessGroupHCCL(_ProcessGroup):
    """A torch ProcessGroup over one hostccl communicator and its stream."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        _select_device(rank)
        if rank == 0:
            root = get_root_info()
            store.set("hostccl/root_info", root)
        else:
            root = bytes(store.get("hostccl/root_info"))
        self._comm = Comm(size, rank, root)
        self._stream = self._comm.stream
        self._h = self._comm.handle
        self._sh = self._stream.handle
        self._pending = []  # deferred (kind, tensor, peer): see the module's doc
        self._inflight = self._stream._pending  # buffers of enqueued operations, until a wait
        self._spare = Work(self, None)
        self._spare._done = True

    def getBackendName(self):
        return "hccl"

    def name(self):
        return "hccl"

    @property
    def comm(self):
        """The hostccl.Comm under this group (its own operations go to the same stream)."""
        return self._comm

    # ---- plumbing ---------------------------------------------------------------------------

    def _issued(self, rc, call, keep, post=None):
        if rc != 0:
            raise _lib.hccl_error(rc, call)
        self._inflight.append(keep)
        # A blocking dist call drops its Work right after wait(): reuse that object rather than
        # build a new one (~0.5 us through pybind). Safe only when nothing else refers to it: the
        # attribute, the local and getrefcount's argument make 3.
        w = self._spare
        if w._done and _getrefcount(w) == 3:
            w._keep, w._post, w._error, w._done = keep, post, None, False
            return w
        w = self._spare = Work(self, keep, post)
        return w

    def _flush(self):
        items, self._pending = self._pending, []
        if len(items) == 1:
            kind, t, peer = items[0]
            ptr, count, dt = _torch_buffer(t, True)
            fn = _lib.HcclSend if kind == _SEND else _lib.HcclRecv
            rc = fn(ptr, count, dt, peer, self._h, self._sh)
        else:
            arr = (_lib.SendRecvItem * len(items))()
            for i, (kind, t, peer) in enumerate(items):
                ptr, count, dt = _torch_buffer(t, True)
                arr[i] = _lib.SendRecvItem(kind, ptr, count, dt, peer)
            rc = _lib.HcclBatchSendRecv(arr, len(items), self._h, self._sh)
        if rc != 0:
            raise _lib.hccl_error(rc, "HcclBatchSendRecv" if len(items) > 1 else "HcclSend/HcclRecv")
        self._inflight.append(items)

    def _reduce_op(self, op, t):
        """(HCCL op, function to run after completion) for torch's ReduceOp on tensor `t`."""
        kind = op if isinstance(op, int) else _op_kind_slow(op)
        if t.dtype in _SIMPLE_DTYPES:
            code = _FAST_REDUCE.get(kind)
            if code is not None:
                return code, None
        code = _REDUCE.get(kind)
        name = _RED_NAMES.get(kind, kind)
        if code is None:
            raise ValueError(f"hostccl: reduction {name} is not supported (SUM, PRODUCT, MIN, MAX, AVG)")
        if t.is_complex() and code != ReduceOp.SUM:
            raise ValueError(f"hostccl: reduction {name} is not defined on complex tensors")
        if t.dtype == torch.bool:
            if kind == _AVG:
                raise ValueError("hostccl: AVG is not defined on bool tensors")
            return _BOOL_REDUCE[code], None
        if kind != _AVG:
            return int(code), None
        code = int(code)
        n = self.size()
        if t.is_floating_point() or t.is_complex():
            return code, lambda: t.div_(n)
        return code, lambda: t.copy_(torch.div(t, n, rounding_mode="trunc"))

    # ---- collectives ------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        # The path of every small dist.all_reduce, kept short: the common case (one plain tensor,
        # SUM/PRODUCT/MIN/MAX) is inlined; everything else goes through the general helpers.
        t = tensors[0] if type(tensors) is list and len(tensors) == 1 else _one(tensors, "allreduce")
        kind = 0 if opts is None else _op_kind(opts.reduceOp)
        dt = _SIMPLE.get(t.dtype)
        code = None if dt is None else _FAST_REDUCE.get(kind)
        if code is not None and t.is_cpu and t.is_contiguous():
            ptr, count, post = t.data_ptr(), t.numel(), None
        else:
            code, post = self._reduce_op(kind, t)
            ptr, count, dt = _torch_buffer(t)
        if self._pending:
            self._flush()
        rc = _lib.HcclAllReduce(ptr, ptr, count, dt, code, self._h, self._sh)
        if rc:
            raise _lib.hccl_error(rc, "HcclAllReduce")
        self._inflight.append(t)
        w = self._spare  # as in _issued, inlined
        if w._done and _getrefcount(w) == 3:
            w._keep, w._post, w._error, w._done = t, post, None, False
            return w
        w = self._spare = Work(self, t, post)
        return w

    def allreduce_coalesced(self, tensors, opts=None):
        op = dist.ReduceOp.SUM if opts is None else opts.reduceOp
        works = [self.allreduce([t], _Opts(reduceOp=op)) for t in tensors]
        return _AllWork(self, works)

    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        root = 0 if opts is None else opts.rootRank
        ptr, count, dt = _torch_buffer(t, True)
        if self._pending:
            self._flush()
        rc = _lib.HcclBroadcast(ptr, count, dt, root, self._h, self._sh)
        return self._issued(rc, "HcclBroadcast", t)

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        root = 0 if opts is None else opts.rootRank
        code, post = self._reduce_op(dist.ReduceOp.SUM if opts is None else opts.reduceOp, t)
        ptr, count, dt = _torch_buffer(t, True)
        if self._pending:
            self._flush()
        rc = _lib.HcclReduce(ptr, ptr, count, dt, code, root, self._h, self._sh)
        return self._issued(rc, "HcclReduce", t, post if self.rank() == root else None)

    def _allgather_base(self, output, input, opts=None):
        ip, icount, idt = _torch_buffer(input, False)
        op_, ocount, odt = _torch_buffer(output, True)
        if odt != idt or output.dtype != input.dtype:
            raise TypeError(f"hostccl: all_gather: output is {output.dtype}, input {input.dtype}")
        if ocount != icount * self.size():
            raise ValueError(f"hostccl: all_gather_into_tensor: output holds {output.numel()} elements, "
                             f"not {self.size()} x {input.numel()}")
        if self._pending:
            self._flush()
        rc = _lib.HcclAllGather(ip, op_, icount, idt, self._h, self._sh)
        return self._issued(rc, "HcclAllGather", (output, input))

    def allgather(self, output_tensors, input_tensors, opts=None):
        outs = _one(output_tensors, "allgather")
        t = _one(input_tensors, "allgather")
        if len(outs) != self.size():
            raise ValueError(f"hostccl: all_gather: output list has {len(outs)} tensors, not {self.size()}")
        for o in outs:
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise ValueError(f"hostccl: all_gather: outputs must all be {t.dtype} with {t.numel()} elements")
        ip, count, dt = _torch_buffer(t, False)
        base = _packed(outs)
        post, keep = None, (outs, t)
        if base is None:
            flat = _flat(outs, t.dtype)
            base = flat.data_ptr()
            post = lambda: [o.copy_(c.view_as(o)) for o, c in zip(outs, flat.split(t.numel()))]  # noqa: E731
            keep = (outs, t, flat)
        if self._pending:
            self._flush()
        rc = _lib.HcclAllGather(ip, base, count, dt, self._h, self._sh)
        return self._issued(rc, "HcclAllGather", keep, post)

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        works = [self.allgather([outs], [t]) for outs, t in zip(output_lists, input_tensors)]
        return _AllWork(self, works)

    def gather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        root = 0 if opts is None else opts.rootRank
        if self.rank() != root:
            self._pending.append((_SEND, t, root))
            return self._p2p_now(t)
        outs = _one(output_tensors, "gather")
        if len(outs) != self.size():
            raise ValueError(f"hostccl: gather: output list has {len(outs)} tensors, not {self.size()}")
        for peer, o in enumerate(outs):
            if peer == root:
                o.copy_(t)
            else:
                self._pending.append((_RECV, o, peer))
        return self._p2p_now(outs)

    def _p2p_now(self, keep):
        if self._pending:
            self._flush()
        return Work(self, keep)

    def scatter(self, output_tensors, input_tensors, opts=None):
        t = _one(output_tensors, "scatter")
        root = 0 if opts is None else opts.rootRank
        op_, count, dt = _torch_buffer(t, True)
        src, keep = 0, t
        if self.rank() == root:
            ins = _one(input_tensors, "scatter")
            if len(ins) != self.size():
                raise ValueError(f"hostccl: scatter: input list has {len(ins)} tensors, not {self.size()}")
            src = _packed(ins)
            if src is None:
                flat = torch.cat([i.reshape(-1) for i in ins])
                src, keep = flat.data_ptr(), (t, flat)
        if self._pending:
            self._flush()
        rc = _lib.HcclScatter(src, op_, count, dt, root, self._h, self._sh)
        return self._issued(rc, "HcclScatter", keep)

    def _reduce_scatter_base(self, output, input, opts=None):
        code, post = self._reduce_op(dist.ReduceOp.SUM if opts is None else opts.reduceOp, output)
        ip, icount, idt = _torch_buffer(input, False)
        op_, ocount, odt = _torch_buffer(output, True)
        if output.dtype != input.dtype:
            raise TypeError(f"hostccl: reduce_scatter: output is {output.dtype}, input {input.dtype}")
        if icount != ocount * self.size():
            raise ValueError(f"hostccl: reduce_scatter_tensor: input holds {input.numel()} elements, "
                             f"not {self.size()} x {output.numel()}")
        if self._pending:
            self._flush()
        rc = _lib.HcclReduceScatter(ip, op_, ocount, idt, code, self._h, self._sh)
        return self._issued(rc, "HcclReduceScatter", (output, input), post)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        ins = _one(input_tensors, "reduce_scatter")
        if len(ins) != self.size():
            raise ValueError(f"hostccl: reduce_scatter: input list has {len(ins)} tensors, not {self.size()}")
        for i in ins:
            if i.numel() != out.numel() or i.dtype != out.dtype:
                raise ValueError(f"hostccl: reduce_scatter: inputs must all be {out.dtype} with {out.numel()} "
                                 "elements")
        base = _packed(ins)
        flat = torch.cat([i.reshape(-1) for i in ins]) if base is None else None
        if flat is not None:
            return self._reduce_scatter_base(out, flat, opts)
        code, post = self._reduce_op(dist.ReduceOp.SUM if opts is None else opts.reduceOp, out)
        op_, count, dt = _torch_buffer(out, True)
        if self._pending:
            self._flush()
        rc = _lib.HcclReduceScatter(base, op_, count, dt, code, self._h, self._sh)
        return self._issued(rc, "HcclReduceScatter", (out, ins), post)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        ip, icount, idt = _torch_buffer(input, False)
        op_, ocount, odt = _torch_buffer(output, True)
        if output.dtype != input.dtype:
            raise TypeError(f"hostccl: all_to_all_single: output is {output.dtype}, input {input.dtype}")
        n = self.size()
        if self._pending:
            self._flush()
        if not output_split_sizes and not input_split_sizes:
            if icount != ocount or icount % n:
                raise ValueError(f"hostccl: all_to_all_single: input and output hold {input.numel()} and "
                                 f"{output.numel()} elements; both must hold the same multiple of {n}")
            rc = _lib.HcclAlltoAll(ip, icount // n, idt, op_, ocount // n, odt, self._h, self._sh)
            return self._issued(rc, "HcclAlltoAll", (output, input))
        sc = _split_counts(input, input_split_sizes, icount, n, "input")
        rc_ = _split_counts(output, output_split_sizes, ocount, n, "output")
        return self._alltoallv(ip, sc, op_, rc_, idt, (output, input))

    def _alltoallv(self, sptr, send_counts, rptr, recv_counts, dt, keep, post=None):
        n = self.size()
        u64 = _lib.c_uint64 * n
        sd, rd, at_s, at_r = [], [], 0, 0
        for s, r in zip(send_counts, recv_counts):
            sd.append(at_s)
            rd.append(at_r)
            at_s += s
            at_r += r
        rc = _lib.HcclAlltoAllV(sptr, u64(*send_counts), u64(*sd), dt, rptr, u64(*recv_counts), u64(*rd), dt,
                                self._h, self._sh)
        return self._issued(rc, "HcclAlltoAllV", keep, post)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError(f"hostccl: all_to_all: lists have {len(output_tensors)} and {len(input_tensors)} "
                             f"tensors, not {n}")
        dtype = input_tensors[0].dtype
        if any(t.dtype != dtype for t in list(output_tensors) + list(input_tensors)):
            raise TypeError("hostccl: all_to_all: every tensor must have the same dtype")
        _, _, dt = _torch_buffer(input_tensors[0], False)
        mult = 2 if input_tensors[0].is_complex() else 1
        send_counts = [t.numel() * mult for t in input_tensors]
        recv_counts = [t.numel() * mult for t in output_tensors]
        sptr = _packed(input_tensors)
        keep = [output_tensors, input_tensors]
        if sptr is None:
            flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
            sptr = flat_in.data_ptr()
            keep.append(flat_in)
        rptr = _packed(output_tensors)
        post = None
        if rptr is None:
            flat_out = _flat(output_tensors, dtype)
            rptr = flat_out.data_ptr()
            keep.append(flat_out)
            sizes = [t.numel() for t in output_tensors]
            post = lambda: [o.copy_(c.view_as(o)) for o, c in zip(output_tensors, flat_out.split(sizes))]  # noqa: E731
        if self._pending:
            self._flush()
        return self._alltoallv(sptr, send_counts, rptr, recv_counts, dt, keep, post)

    def barrier(self, opts=None):
        if self._pending:
            self._flush()
        rc = _lib.HcclBarrier(self._h, self._sh)
        return self._issued(rc, "HcclBarrier", None)

    # ---- point to point ---------------------------------------------------------------------

    def send(self, tensors, dstRank, tag=0):
        t = _one(tensors, "send")
        _torch_buffer(t, False)  # check now: a bad tensor fails at the call, not at wait()
        self._pending.append((_SEND, t, int(dstRank)))
        return Work(self, t)

    def recv(self, tensors, srcRank, tag=0):
        t = _one(tensors, "recv")
        _torch_buffer(t, True)
        self._pending.append((_RECV, t, int(srcRank)))
        return Work(self, t)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("hostccl: recv from any source is not supported: HCCL receives name their source")

    def _start_coalescing(self):
        pass  # point-to-point calls are deferred anyway; _end_coalescing issues them as one batch

    def _end_coalescing(self, reqs):
        if self._pending:
            self._flush()


class _Opts:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _AllWork(Work):
    """The Work of several operations of one group: waiting for the last waits for all of them."""

    def __init__(self, pg, works):
        super().__init__(pg, works)
        self._works = works

    def wait(self, timeout=None):
        for w in self._works:
            w.wait(timeout)
        self._done = True
        return True


def _split_counts(t, splits, count, n, what):
    row = count // t.shape[0] if t.dim() > 0 and t.shape[0] else count
    if not splits:
        if t.dim() == 0 or t.shape[0] % n:
            raise ValueError(f"hostccl: all_to_all_single: {what} dim 0 ({t.shape[0] if t.dim() else 0}) "
                             f"does not split into {n} equal parts")
        return [row * (t.shape[0] // n)] * n
    splits = [int(s) for s in splits]
    if len(splits) != n or sum(splits) != t.shape[0] or any(s < 0 for s in splits):
        raise ValueError(f"hostccl: all_to_all_single: {what} split sizes {splits} do not split dim 0 "
                         f"({t.shape[0]}) into {n} parts")
    return [row * s for s in splits]


def _select_device(rank):
    """A device for the thread that creates the group: the launcher's local rank, else the group rank."""
    info = launch_info()
    local = info.local_rank if info.launcher != "none" else rank
    try:
        ensure_device(local % max(1, device_count()))
    except _lib.HcclError:
        ensure_device()


def _create(store, rank, size, timeout):
    return ProcessGroupHCCL(store, rank, size, timeout)


def empty(*shape, dtype=torch.float32):
    """An uninitialised CPU tensor in hostccl's shared arena: collectives on it are zero copy."""
    shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    numel = 1
    for s in shape:
        numel *= int(s)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    buf = raw_buffer(numel * itemsize)
    return torch.frombuffer(buf, dtype=torch.uint8, count=numel * itemsize).view(dtype).view(shape)


# ---- rendezvous under hccl-run ------------------------------------------------------------------

_rdzv = importlib.import_module("torch.distributed.rendezvous")
_torch_env_handler = _rdzv._rendezvous_handlers["env"]


def _query(url):
    from urllib.parse import urlparse

    return dict(p.split("=", 1) for p in urlparse(url).query.split("&") if "=" in p)


def _hccl_run_env_handler(url, timeout=timedelta(minutes=30), **kwargs):
    """torch's env:// handler; under hccl-run without MASTER_ADDR, a loopback TCPStore of rank 0."""
    if os.environ.get("MASTER_ADDR") or not os.environ.get("HOSTCCL_STORE"):
        return _torch_env_handler(url, timeout=timeout, **kwargs)
    return _hccl_run_rendezvous(url, timeout)


def _hccl_run_rendezvous(url, timeout):
    q = _query(url)
    rank = int(q.get("rank", os.environ.get("RANK", -1)))
    size = int(q.get("world_size", os.environ.get("WORLD_SIZE", -1)))
    info = launch_info()
    if (rank, size) != (info.rank, info.size):
        raise ValueError(f"hostccl: rank {rank} of {size} differs from hccl-run's RANK={info.rank} "
                         f"WORLD_SIZE={info.size}; set MASTER_ADDR and MASTER_PORT to rendezvous elsewhere")
    blob = bytearray(_lib.ROOT_INFO_BYTES)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, size, True, timeout, wait_for_workers=False)
        tag = f"hostccl-torch-store 127.0.0.1 {store.port}".encode()
        blob[:len(tag)] = tag
        broadcast_root_info(bytes(blob))
    else:
        got = broadcast_root_info(None)
        fields = got.rstrip(b"\0").decode(errors="replace").split()
        if len(fields) != 3 or fields[0] != "hostccl-torch-store":
            raise RuntimeError("hostccl: rank 0 sent no torch store address through hccl-run's store "
                               "(did every rank import hostccl.torch before init_process_group?)")
        store = dist.TCPStore(fields[1], int(fields[2]), size, False, timeout)
    yield (store, rank, size)
    raise RuntimeError("hostccl: cannot re-rendezvous under hccl-run")


def _register():
    if int(torch.__version__.split(".")[0]) >= 2:
        import warnings

        warnings.warn(f"hostccl.torch is checked with torch 1.13; torch {torch.__version__}'s backend "
                      "interface differs and may not accept it", RuntimeWarning, stacklevel=3)
    plugins = getattr(dist.Backend, "_plugins", {})
    existing = plugins.get("HCCL")
    if existing is not None and getattr(existing, "creator_fn", existing) is _create:
        return
    if existing is not None or hasattr(dist.Backend, "HCCL"):
        raise ImportError("hostccl.torch: a backend named 'hccl' is already registered (torch_npu?); "
                          "hostccl's cannot be registered in the same process")
    dist.Backend.register_backend("hccl", _create)
    if _rdzv._rendezvous_handlers.get("env") is _torch_env_handler:
        _rdzv._rendezvous_handlers["env"] = _hccl_run_env_handler


_register()

__all__ = ["ProcessGroupHCCL", "Work", "empty", "DataType"]
