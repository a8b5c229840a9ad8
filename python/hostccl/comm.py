"""Communicators and their operations on any contiguous buffer, zero copy.

Every operation is enqueued on a stream (the communicator's own unless ``stream=`` names another)
and, by default, waited for before the call returns. With ``async_op=True`` it returns a ``Work``
at once; ``Work.wait()`` completes it. Buffers: torch CPU tensors, numpy arrays, or any
C-contiguous buffer-protocol object; ``count`` is what the buffer holds.
"""
import contextlib
import ctypes
from enum import IntEnum

from . import _lib
from ._buffer import DataType, buffer_of
from .stream import Stream, Work, ensure_device, sync_error


class ReduceOp(IntEnum):
    """HcclReduceOp."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3


# Every spelling of a reduction -> its HcclReduceOp value (IntEnum members hash by name, not value).
_OP_CODES = {**{m: int(m) for m in ReduceOp}, **{int(m): int(m) for m in ReduceOp},
             **{name: int(m) for m in ReduceOp for name in (m.name, m.name.lower())},
             "product": 1, "PRODUCT": 1}


def _reduce_op(op):
    code = _OP_CODES.get(op)
    if code is None:
        raise ValueError(f"hostccl: unknown reduction {op!r} (sum, prod, max, min)")
    return code


def get_root_info():
    """A fresh root info (bytes): rank 0 makes it and every rank passes it to ``Comm()``."""
    buf = _lib.RootInfoBuffer()
    _lib.check(_lib.HcclGetRootInfo(buf), "HcclGetRootInfo")
    return buf.raw


def broadcast_root_info(root_info=None):
    """Rank 0's root info to every rank through the launcher's store (HcclHostBroadcastRootInfo).

    Rank 0 passes the root info; the others pass nothing and get it back. Works under hccl-run
    (or with HOSTCCL_STORE set); every rank must call it the same number of times.
    """
    buf = _lib.RootInfoBuffer()
    if root_info is not None:
        if len(root_info) != _lib.ROOT_INFO_BYTES:
            raise ValueError(f"hostccl: a root info is {_lib.ROOT_INFO_BYTES} bytes, not {len(root_info)}")
        ctypes.memmove(buf, bytes(root_info), _lib.ROOT_INFO_BYTES)
    _lib.check(_lib.HcclHostBroadcastRootInfo(buf), "HcclHostBroadcastRootInfo")
    return buf.raw


@contextlib.contextmanager
def group():
    """Issue the operations of the block together (HcclGroupStart / HcclGroupEnd).

    Operations inside the block must be asynchronous or on buffers not read before the block ends:
    nothing is issued before HcclGroupEnd. Sends and receives of the block progress together.
    """
    _lib.check(_lib.HcclGroupStart(), "HcclGroupStart")
    try:
        yield
    finally:
        _lib.check(_lib.HcclGroupEnd(), "HcclGroupEnd")


def _u64_array(values, n, what):
    values = [int(v) for v in values]
    if len(values) != n:
        raise ValueError(f"hostccl: {what} has {len(values)} entries, the communicator {n} ranks")
    if any(v < 0 for v in values):
        raise ValueError(f"hostccl: {what} has a negative entry")
    return (ctypes.c_uint64 * n)(*values)


def _displacements(counts):
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += int(c)
    return out


def _fits(counts, displs, capacity, what):
    """Every block [displ, displ + count) lies inside a buffer of `capacity` elements."""
    end = max((int(d) + int(c) for c, d in zip(counts, displs) if int(c) > 0), default=0)
    if end > capacity:
        raise ValueError(f"hostccl: {what} reach element {end}, the buffer holds {capacity}")


class Comm:
    """An HCCL communicator and the stream its operations go to by default.

    Make one with ``hostccl.init()`` (from the launcher's environment), or with
    ``Comm(size, rank, root_info)`` where ``root_info`` came from ``get_root_info()`` on rank 0.
    ``close()`` (or leaving a ``with`` block) destroys it after its queued operations.
    """

    def __init__(self, size, rank, root_info, *, name=None, buffer_size_mb=None, deterministic=None,
                 device=None, _handle=None):
        ensure_device(device)
        if _handle is None:
            if len(root_info) != _lib.ROOT_INFO_BYTES:
                raise ValueError(f"hostccl: a root info is {_lib.ROOT_INFO_BYTES} bytes, not {len(root_info)}")
            handle = ctypes.c_void_p()
            root = _lib.RootInfoBuffer.from_buffer_copy(bytes(root_info))
            if name is None and buffer_size_mb is None and deterministic is None:
                rc = _lib.HcclCommInitRootInfo(size, root, rank, ctypes.byref(handle))
            else:
                cfg = _lib.comm_config(name, buffer_size_mb, deterministic)
                rc = _lib.HcclCommInitRootInfoConfig(size, root, rank, ctypes.byref(cfg), ctypes.byref(handle))
            _lib.check(rc, "HcclCommInitRootInfo")
            _handle = handle.value
        self._handle = _handle
        try:
            self.stream = Stream()
        except Exception:
            _lib.HcclCommDestroy(_handle)
            self._handle = None
            raise
        self.stream._comm = self
        self._stream_handle = self.stream._handle
        value = ctypes.c_uint32()
        _lib.check(_lib.HcclGetRankId(_handle, ctypes.byref(value)), "HcclGetRankId")
        self.rank = value.value
        _lib.check(_lib.HcclGetRankSize(_handle, ctypes.byref(value)), "HcclGetRankSize")
        self.size = value.value
        name_buf = ctypes.create_string_buffer(_lib.COMM_NAME_MAX_LENGTH)
        _lib.check(_lib.HcclGetCommName(_handle, name_buf), "HcclGetCommName")
        self.name = name_buf.value.decode()

    # ---- lifetime ---------------------------------------------------------------------------

    @property
    def handle(self):
        """The HcclComm as an integer (for other ctypes code)."""
        return self._handle

    def close(self):
        """Destroy the communicator after its queued operations, then its stream."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        rc = _lib.HcclCommDestroy(handle)
        self.stream.close()
        _lib.check(rc, "HcclCommDestroy")

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and _lib is not None:
            _lib.HcclCommDestroy(self._handle)

    def __repr__(self):
        return f"<hostccl.Comm {self.name!r} rank {self.rank} of {self.size}>"

    def async_error(self):
        """The first error an operation of this communicator met (Result.SUCCESS when none)."""
        res = ctypes.c_int(0)
        _lib.check(_lib.HcclGetCommAsyncError(self._handle, ctypes.byref(res)), "HcclGetCommAsyncError")
        return _lib.Result(res.value)

    def split(self, ranks, sub_id, *, name=None):
        """A sub-communicator of the parent ranks `ranks` (called by those ranks only, same arguments)."""
        ranks = [int(r) for r in ranks]
        if self.rank not in ranks:
            raise ValueError(f"hostccl: rank {self.rank} is not in {ranks}; only members call split()")
        ids = (ctypes.c_uint32 * len(ranks))(*ranks)
        parent = ctypes.c_void_p(self._handle)
        sub = ctypes.c_void_p()
        cfg = _lib.comm_config(name) if name else None
        rc = _lib.HcclCreateSubCommConfig(ctypes.byref(parent), len(ranks), ids, int(sub_id), ranks.index(self.rank),
                                          ctypes.byref(cfg) if cfg is not None else None, ctypes.byref(sub))
        _lib.check(rc, "HcclCreateSubCommConfig")
        return Comm(len(ranks), ranks.index(self.rank), None, _handle=sub.value)

    # ---- completion -------------------------------------------------------------------------

    def _complete(self, rc, call, stream, async_op, keep):
        if rc != 0:
            raise _lib.hccl_error(rc, call)
        st = self.stream if stream is None else stream
        if async_op:
            return Work(st, self, keep)
        rc = _lib.aclrtSynchronizeStream(st._handle)
        if rc != 0:
            st._pending.clear()
            raise sync_error(rc, self, call)
        return None

    def _st(self, stream):
        if stream is None:
            return self._stream_handle
        if stream._comm is None:
            stream._comm = self
        return stream._handle

    def _same(self, a, b, call):
        if a[2] != b[2]:
            raise TypeError(f"hostccl: {call}: send buffer is {DataType(a[2]).name}, receive buffer "
                            f"{DataType(b[2]).name}")

    # ---- collectives ------------------------------------------------------------------------

    def all_reduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, *, stream=None, async_op=False):
        """Reduce over ranks; every rank gets the result in `recvbuf` (None: in place in `sendbuf`)."""
        if recvbuf is None:
            s = r = buffer_of(sendbuf, True)
        else:
            s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
            self._same(s, r, "all_reduce")
            if s[1] != r[1]:
                raise ValueError(f"hostccl: all_reduce: send buffer holds {s[1]} elements, receive buffer {r[1]}")
        code = _OP_CODES.get(op)
        rc = _lib.HcclAllReduce(s[0], r[0], s[1], s[2], _reduce_op(op) if code is None else code, self._handle,
                                self._stream_handle if stream is None else self._st(stream))
        if rc or async_op or stream is not None:
            return self._complete(rc, "HcclAllReduce", stream, async_op, (sendbuf, recvbuf))
        # The blocking call on the default stream, inlined: the common case of small collectives.
        rc = _lib.aclrtSynchronizeStream(self._stream_handle)
        if rc:
            self.stream._pending.clear()
            raise sync_error(rc, self, "HcclAllReduce")
        return None

    def broadcast(self, buf, root=0, *, stream=None, async_op=False):
        """Copy root's `buf` into every rank's `buf`."""
        b = buffer_of(buf, True)
        rc = _lib.HcclBroadcast(b[0], b[1], b[2], root, self._handle, self._st(stream))
        return self._complete(rc, "HcclBroadcast", stream, async_op, buf)

    def reduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, root=0, *, stream=None, async_op=False):
        """Reduce over ranks into root's `recvbuf` (None: in place in root's `sendbuf`)."""
        if recvbuf is None:
            s = r = buffer_of(sendbuf, self.rank == root)
        else:
            s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
            self._same(s, r, "reduce")
            if r[1] < s[1]:
                raise ValueError(f"hostccl: reduce: receive buffer holds {r[1]} elements, fewer than {s[1]}")
        rc = _lib.HcclReduce(s[0], r[0], s[1], s[2], _reduce_op(op), root, self._handle, self._st(stream))
        return self._complete(rc, "HcclReduce", stream, async_op, (sendbuf, recvbuf))

    def all_gather(self, sendbuf, recvbuf, *, stream=None, async_op=False):
        """Every rank's `sendbuf` into every rank's `recvbuf`, block i from rank i."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "all_gather")
        if r[1] != s[1] * self.size:
            raise ValueError(f"hostccl: all_gather: receive buffer holds {r[1]} elements, not "
                             f"{self.size} x {s[1]}")
        rc = _lib.HcclAllGather(s[0], r[0], s[1], s[2], self._handle, self._st(stream))
        return self._complete(rc, "HcclAllGather", stream, async_op, (sendbuf, recvbuf))

    def all_gather_v(self, sendbuf, recvbuf, recv_counts, recv_displs=None, *, stream=None, async_op=False):
        """All-gather with per-rank counts; rank i's block lands at recv_displs[i] (default: packed)."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "all_gather_v")
        recv_displs = _displacements(recv_counts) if recv_displs is None else recv_displs
        counts = _u64_array(recv_counts, self.size, "recv_counts")
        displs = _u64_array(recv_displs, self.size, "recv_displs")
        _fits(counts, displs, r[1], "all_gather_v: recv_counts and recv_displs")
        rc = _lib.HcclAllGatherV(s[0], s[1], r[0], counts, displs, s[2], self._handle, self._st(stream))
        return self._complete(rc, "HcclAllGatherV", stream, async_op, (sendbuf, recvbuf))

    def reduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM, *, stream=None, async_op=False):
        """Reduce `sendbuf` (size blocks) over ranks; rank i gets block i in `recvbuf`."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "reduce_scatter")
        if s[1] != r[1] * self.size:
            raise ValueError(f"hostccl: reduce_scatter: send buffer holds {s[1]} elements, not "
                             f"{self.size} x {r[1]}")
        rc = _lib.HcclReduceScatter(s[0], r[0], r[1], s[2], _reduce_op(op), self._handle, self._st(stream))
        return self._complete(rc, "HcclReduceScatter", stream, async_op, (sendbuf, recvbuf))

    def reduce_scatter_v(self, sendbuf, send_counts, send_displs, recvbuf, op=ReduceOp.SUM, *, stream=None,
                         async_op=False):
        """Reduce-scatter with per-rank blocks (send_counts[i] at send_displs[i] go to rank i)."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "reduce_scatter_v")
        send_displs = _displacements(send_counts) if send_displs is None else send_displs
        counts = _u64_array(send_counts, self.size, "send_counts")
        displs = _u64_array(send_displs, self.size, "send_displs")
        _fits(counts, displs, s[1], "reduce_scatter_v: send_counts and send_displs")
        mine = counts[self.rank]
        if r[1] < mine:
            raise ValueError(f"hostccl: reduce_scatter_v: receive buffer holds {r[1]} elements, fewer than {mine}")
        rc = _lib.HcclReduceScatterV(s[0], counts, displs, r[0], mine, s[2], _reduce_op(op), self._handle,
                                     self._st(stream))
        return self._complete(rc, "HcclReduceScatterV", stream, async_op, (sendbuf, recvbuf))

    def scatter(self, sendbuf, recvbuf, root=0, *, stream=None, async_op=False):
        """Root's `sendbuf` (size blocks) scattered: rank i gets block i (non-roots: sendbuf may be None)."""
        r = buffer_of(recvbuf, True)
        s_ptr = 0
        if self.rank == root:
            s = buffer_of(sendbuf)
            self._same(s, r, "scatter")
            if s[1] != r[1] * self.size:
                raise ValueError(f"hostccl: scatter: send buffer holds {s[1]} elements, not {self.size} x {r[1]}")
            s_ptr = s[0]
        rc = _lib.HcclScatter(s_ptr, r[0], r[1], r[2], root, self._handle, self._st(stream))
        return self._complete(rc, "HcclScatter", stream, async_op, (sendbuf, recvbuf))

    def all_to_all(self, sendbuf, recvbuf, *, stream=None, async_op=False):
        """Block j of `sendbuf` to rank j; block i of `recvbuf` from rank i (equal blocks)."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "all_to_all")
        if s[1] != r[1] or s[1] % self.size:
            raise ValueError(f"hostccl: all_to_all: buffers hold {s[1]} and {r[1]} elements; both must hold "
                             f"the same multiple of {self.size}")
        n = s[1] // self.size
        rc = _lib.HcclAlltoAll(s[0], n, s[2], r[0], n, r[2], self._handle, self._st(stream))
        return self._complete(rc, "HcclAlltoAll", stream, async_op, (sendbuf, recvbuf))

    def all_to_all_v(self, sendbuf, send_counts, send_displs, recvbuf, recv_counts, recv_displs, *, stream=None,
                     async_op=False):
        """All-to-all with per-peer counts and displacements (None: packed)."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "all_to_all_v")
        send_displs = _displacements(send_counts) if send_displs is None else send_displs
        recv_displs = _displacements(recv_counts) if recv_displs is None else recv_displs
        sc, sd = _u64_array(send_counts, self.size, "send_counts"), _u64_array(send_displs, self.size, "send_displs")
        rcn, rd = _u64_array(recv_counts, self.size, "recv_counts"), _u64_array(recv_displs, self.size, "recv_displs")
        _fits(sc, sd, s[1], "all_to_all_v: send_counts and send_displs")
        _fits(rcn, rd, r[1], "all_to_all_v: recv_counts and recv_displs")
        rc = _lib.HcclAlltoAllV(s[0], sc, sd, s[2], r[0], rcn, rd, r[2], self._handle, self._st(stream))
        return self._complete(rc, "HcclAlltoAllV", stream, async_op, (sendbuf, recvbuf))

    def all_to_all_vc(self, sendbuf, count_matrix, recvbuf, *, stream=None, async_op=False):
        """All-to-all where every rank passes the whole size x size count matrix (row i: what i sends)."""
        s, r = buffer_of(sendbuf), buffer_of(recvbuf, True)
        self._same(s, r, "all_to_all_vc")
        rows = [list(row) for row in count_matrix]
        if len(rows) != self.size:
            raise ValueError(f"hostccl: all_to_all_vc: count matrix has {len(rows)} rows, not {self.size}")
        flat = _u64_array([c for row in rows for c in row], self.size * self.size, "count matrix")
        sent = sum(rows[self.rank])
        got = sum(row[self.rank] for row in rows)
        if sent > s[1] or got > r[1]:
            raise ValueError(f"hostccl: all_to_all_vc: this rank sends {sent} and receives {got} elements; "
                             f"the buffers hold {s[1]} and {r[1]}")
        rc = _lib.HcclAlltoAllVC(s[0], flat, s[2], r[0], r[2], self._handle, self._st(stream))
        return self._complete(rc, "HcclAlltoAllVC", stream, async_op, (sendbuf, recvbuf))

    def barrier(self, *, stream=None, async_op=False):
        """Return once every rank has reached the barrier (in stream order)."""
        rc = _lib.HcclBarrier(self._handle, self._st(stream))
        return self._complete(rc, "HcclBarrier", stream, async_op, None)

    # ---- point to point ---------------------------------------------------------------------

    def send(self, buf, peer, *, stream=None, async_op=False):
        """Send `buf` to rank `peer` (completes once the receiver holds the data)."""
        b = buffer_of(buf)
        rc = _lib.HcclSend(b[0], b[1], b[2], peer, self._handle, self._st(stream))
        return self._complete(rc, "HcclSend", stream, async_op, buf)

    def recv(self, buf, peer, *, stream=None, async_op=False):
        """Receive into `buf` from rank `peer`."""
        b = buffer_of(buf, True)
        rc = _lib.HcclRecv(b[0], b[1], b[2], peer, self._handle, self._st(stream))
        return self._complete(rc, "HcclRecv", stream, async_op, buf)

    def batch_send_recv(self, items, *, stream=None, async_op=False):
        """Several sends and receives as one operation: items are ("send" | "recv", buf, peer).

        They progress together, so their order never deadlocks; messages between two ranks still
        arrive in the order they were sent.
        """
        items = list(items)
        arr = (_lib.SendRecvItem * max(1, len(items)))()
        for i, (kind, buf, peer) in enumerate(items):
            if kind not in ("send", "recv"):
                raise ValueError(f"hostccl: batch_send_recv: item {i} is {kind!r}, not 'send' or 'recv'")
            b = buffer_of(buf, kind == "recv")
            arr[i] = _lib.SendRecvItem(0 if kind == "send" else 1, b[0], b[1], b[2], int(peer))
        rc = _lib.HcclBatchSendRecv(arr, len(items), self._handle, self._st(stream))
        return self._complete(rc, "HcclBatchSendRecv", stream, async_op, [it[1] for it in items])


__all__ = ["Comm", "ReduceOp", "DataType", "get_root_info", "broadcast_root_info", "group"]
