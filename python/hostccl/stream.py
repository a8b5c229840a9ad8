"""Streams (aclrtStream) and the handles of asynchronous operations."""
import ctypes
import threading

from . import _lib


_thread = threading.local()


_ACL_ERROR_REPEAT_INITIALIZE = 100002
_acl_ready = False
_acl_lock = threading.Lock()


def _init_acl():
    """aclInit once per process, as a CANN program does before its first device call; a program that
    called it already (through ctypes, or a C extension) is fine."""
    global _acl_ready
    with _acl_lock:
        if not _acl_ready:
            rc = _lib.aclInit(None)
            if rc not in (0, _ACL_ERROR_REPEAT_INITIALIZE):
                _lib.check_acl(rc, "aclInit")
            _acl_ready = True


def ensure_device(device=None):
    """Make sure the calling thread has a current device (streams are created on it).

    With `device` given, select it; otherwise keep the device hostccl selected on this thread, or
    select device 0. (The runtime's aclrtGetDevice logs an error when a thread has none, so the
    choice is remembered here rather than asked.)
    """
    if device is None:
        current = getattr(_thread, "device", None)
        if current is not None:
            return current
        device = 0
    device = int(device)
    _init_acl()
    _lib.check_acl(_lib.aclrtSetDevice(device), "aclrtSetDevice")
    _thread.device = device
    return device


class Stream:
    """An in-order asynchronous queue of operations (aclrtStream) of the current device.

    Operations enqueued on it run in order; ``synchronize()`` returns when all of them have run
    (the calling thread runs them itself rather than wait for the stream's worker). Destroy it with
    ``close()`` or use it as a context manager; garbage collection also destroys it.
    """

    def __init__(self, device=None):
        ensure_device(device)
        handle = ctypes.c_void_p()
        _lib.check_acl(_lib.aclrtCreateStream(ctypes.byref(handle)), "aclrtCreateStream")
        self._handle = handle.value
        self._comm = None  # the communicator whose async error explains a failed operation
        # Buffers of asynchronous operations not yet synchronised: they must outlive the
        # operation even when the caller drops both the buffer and the Work handle.
        self._pending = []

    @property
    def handle(self):
        """The aclrtStream as an integer (for other ctypes code)."""
        return self._handle

    def synchronize(self, timeout_ms=None):
        """Wait for every operation enqueued so far; raise HcclError if one failed."""
        if timeout_ms is None:
            rc = _lib.aclrtSynchronizeStream(self._handle)
        else:
            rc = _lib.aclrtSynchronizeStreamWithTimeout(self._handle, int(timeout_ms))
        if rc != _lib.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
            self._pending.clear()
        if rc != 0:
            raise sync_error(rc, self._comm, "aclrtSynchronizeStream")

    def close(self):
        """Run what is queued, then destroy the stream."""
        handle, self._handle = self._handle, None
        if handle is not None:
            rc = _lib.aclrtDestroyStream(handle)
            self._pending.clear()
            _lib.check_acl(rc, "aclrtDestroyStream")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and _lib is not None:
            _lib.aclrtDestroyStream(self._handle)


def sync_error(rc, comm, call):
    """The exception for a failed synchronisation: the operation's HCCL error when one failed."""
    if rc == _lib.ACL_ERROR_RT_COMM_OP_FAILED and comm is not None:
        res = ctypes.c_int(0)
        if _lib.HcclGetCommAsyncError(comm._handle, ctypes.byref(res)) == 0 and res.value != 0:
            return _lib.hccl_error(res.value, call)
    return _lib.acl_error(rc, call)


class Work:
    """The handle of an operation issued with ``async_op=True``.

    ``wait()`` synchronizes the operation's stream (so it also waits for the operations enqueued
    before it) and raises HcclError if any of them failed; ``is_completed()`` asks without waiting.
    The operation's buffers stay referenced until its stream has been synchronised, even when the
    handle itself is dropped.
    """

    __slots__ = ("_stream", "_comm", "_event", "_done", "_post")

    def __init__(self, stream, comm, keep, post=None):
        self._stream = stream
        self._comm = comm
        self._post = post
        self._done = False
        self._event = None
        stream._pending.append(keep)
        event = ctypes.c_void_p()
        _lib.check_acl(_lib.aclrtCreateEvent(ctypes.byref(event)), "aclrtCreateEvent")
        self._event = event.value
        rc = _lib.aclrtRecordEvent(self._event, stream._handle)
        if rc != 0:
            self._release()
            raise _lib.acl_error(rc, "aclrtRecordEvent")

    def wait(self, timeout=None):
        """Block until the operation has completed; ``timeout`` in seconds (None: no bound)."""
        if self._done:
            return True
        try:
            self._stream.synchronize(None if timeout is None else max(0, int(timeout * 1000)))
        except _lib.HcclError as e:
            if e.acl_error == _lib.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                raise TimeoutError(f"hostccl: operation not complete after {timeout} s") from None
            self._finish()
            raise
        self._finish()
        if self._post is not None:
            post, self._post = self._post, None
            post()
        return True

    def is_completed(self):
        """True once the operation has run (its errors are raised by ``wait()``)."""
        if self._done:
            return True
        status = ctypes.c_int(1)
        _lib.check_acl(_lib.aclrtQueryEvent(self._event, ctypes.byref(status)), "aclrtQueryEvent")
        return status.value == _lib.ACL_EVENT_STATUS_COMPLETE

    def _finish(self):
        self._done = True
        self._release()

    def _release(self):
        event, self._event = self._event, None
        if event is not None:
            _lib.aclrtDestroyEvent(event)

    def __del__(self):
        if getattr(self, "_event", None) is not None and _lib is not None:
            _lib.aclrtDestroyEvent(self._event)
