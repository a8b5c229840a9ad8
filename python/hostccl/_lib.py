"""ctypes bindings of libhccl and libascendcl, found once at import.

Where the libraries are looked for, first match wins:

1. ``HOSTCCL_LIBRARY_PATH``: a directory holding ``libhccl.so`` and ``libascendcl.so`` (or the
   path of ``libhccl.so`` itself). When set it must be right: there is no fallback.
2. The installed tree: ``make install`` writes ``_installed.py`` next to this file with the
   library directory relative to the package.
3. The source tree's default build directory: ``<checkout>/build`` when the package is used from
   ``<checkout>/python`` (``PYTHONPATH=python`` after ``make build``).
4. The dynamic loader's own search (``libhccl.so.0`` through ``LD_LIBRARY_PATH``, ld.so.cache).

libascendcl is loaded first, by the same directory: libhccl needs it, and a library already loaded
satisfies that dependency by its soname even where the loader alone would not find it.
"""
import ctypes
import os
import threading
from enum import IntEnum

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class Result(IntEnum):
    """HcclResult (CANN numbering)."""

    SUCCESS = 0
    E_PARA = 1
    E_PTR = 2
    E_MEMORY = 3
    E_INTERNAL = 4
    E_NOT_SUPPORT = 5
    E_NOT_FOUND = 6
    E_UNAVAIL = 7
    E_SYSCALL = 8
    E_TIMEOUT = 9
    E_OPEN_FILE_FAILURE = 10
    E_TCP_CONNECT = 11
    E_ROCE_CONNECT = 12
    E_TCP_TRANSFER = 13
    E_ROCE_TRANSFER = 14
    E_RUNTIME = 15
    E_DRV = 16
    E_PROFILING = 17
    E_CCE = 18
    E_NETWORK = 19
    E_AGAIN = 20
    E_REMOTE = 21
    E_SUSPENDING = 22


ACL_ERROR_RT_COMM_OP_FAILED = 507100
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_EVENT_STATUS_COMPLETE = 0

# The aclError names a Python user is likely to meet; others print as numbers.
_ACL_NAMES = {
    100000: "ACL_ERROR_INVALID_PARAM",
    200000: "ACL_ERROR_BAD_ALLOC",
    107001: "ACL_ERROR_RT_INVALID_DEVICEID",
    107002: "ACL_ERROR_RT_CONTEXT_NULL",
    107017: "ACL_ERROR_RT_INVALID_HANDLE",
    107019: "ACL_ERROR_RT_WAIT_TIMEOUT",
    507046: "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
    507047: "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
    507100: "ACL_ERROR_RT_COMM_OP_FAILED",
}


class HcclError(RuntimeError):
    """A failed HCCL or ACL call.

    ``result`` is the ``Result`` (HcclResult) of the failure; for a failed runtime call that is not
    an HCCL operation it is ``Result.E_RUNTIME`` and ``acl_error`` holds the aclError. ``message``
    is the library's own error line (``aclGetRecentErrMsg``), or its name for the code when the
    library logged nothing on this thread.
    """

    def __init__(self, result, message, call=None, acl_error=None):
        self.result = Result(result) if result in Result._value2member_map_ else result
        self.message = message
        self.call = call
        self.acl_error = acl_error
        code = getattr(self.result, "name", str(result))
        where = f"{call}: " if call else ""
        acl = f" [{_ACL_NAMES.get(acl_error, acl_error)}]" if acl_error else ""
        super().__init__(f"{where}HCCL_{code}{acl}: {message}")


def _candidate_dirs():
    """Directories to load from, in order; None stands for the dynamic loader's search."""
    env = os.environ.get("HOSTCCL_LIBRARY_PATH")
    if env:
        return [os.path.dirname(env) if os.path.isfile(env) else env]
    dirs = []
    try:
        from . import _installed  # written by `make install`

        dirs.append(os.path.normpath(os.path.join(_PKG_DIR, _installed.LIBDIR)))
    except ImportError:
        pass
    dirs.append(os.path.normpath(os.path.join(_PKG_DIR, "..", "..", "build")))
    return dirs + [None]


def _load():
    tried = []
    env_set = bool(os.environ.get("HOSTCCL_LIBRARY_PATH"))
    for d in _candidate_dirs():
        if d is None:
            names = ("libascendcl.so.0", "libhccl.so.0")
        else:
            names = (os.path.join(d, "libascendcl.so"), os.path.join(d, "libhccl.so"))
            if not os.path.exists(names[1]):
                tried.append(f"{names[1]} (not there)")
                continue
        try:
            acl = ctypes.CDLL(names[0])
            hccl = ctypes.CDLL(names[1])
            return acl, hccl, names[1]
        except OSError as e:
            tried.append(f"{names[1]} ({e})")
    hint = "" if env_set else "; build hostccl (make build) or set HOSTCCL_LIBRARY_PATH to the directory of libhccl.so"
    raise ImportError("hostccl: cannot load libhccl: tried " + ", ".join(tried) + hint)


acl, hccl, library_path = _load()

c_int, c_uint32, c_uint64, c_void_p, c_char_p = (ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64,
                                                  ctypes.c_void_p, ctypes.c_char_p)
P = ctypes.POINTER

ROOT_INFO_BYTES = 4108
COMM_NAME_MAX_LENGTH = 128
RootInfoBuffer = ctypes.c_char * ROOT_INFO_BYTES


class CommConfig(ctypes.Structure):
    """HcclCommConfig; the 24-byte header is filled by ``comm_config()``."""

    _fields_ = [("size", ctypes.c_size_t), ("magicWord", c_uint32), ("version", c_uint32),
                ("reserved", c_uint64), ("hcclBufferSize", c_uint32), ("hcclDeterministic", c_uint32),
                ("hcclCommName", ctypes.c_char * COMM_NAME_MAX_LENGTH),
                ("hcclUdi", ctypes.c_char * 128), ("hcclOpExpansionMode", c_uint32),
                ("hcclRdmaTrafficClass", c_uint32), ("hcclRdmaServiceLevel", c_uint32)]


def comm_config(name=None, buffer_size_mb=None, deterministic=None):
    """An HcclCommConfig as HcclCommConfigInit (a static inline in hccl.h) fills it, plus overrides."""
    cfg = CommConfig()
    cfg.size = ctypes.sizeof(CommConfig)
    cfg.magicWord = 0xF0F0F0F0
    cfg.version = 5
    cfg.hcclBufferSize = 0xFFFFFFFF if buffer_size_mb is None else int(buffer_size_mb)
    cfg.hcclDeterministic = 0xFFFFFFFF if deterministic is None else int(bool(deterministic))
    cfg.hcclOpExpansionMode = 0
    cfg.hcclRdmaTrafficClass = 0xFFFFFFFF
    cfg.hcclRdmaServiceLevel = 0xFFFFFFFF
    if name:
        raw = name.encode()
        if len(raw) >= COMM_NAME_MAX_LENGTH:
            raise ValueError(f"hostccl: communicator name longer than {COMM_NAME_MAX_LENGTH - 1} bytes")
        cfg.hcclCommName = raw
    return cfg


class SendRecvItem(ctypes.Structure):
    """HcclSendRecvItem."""

    _fields_ = [("sendRecvType", c_int), ("buf", c_void_p), ("count", c_uint64), ("dataType", c_int),
                ("remoteRank", c_uint32)]


class LaunchInfo(ctypes.Structure):
    """HcclHostLaunchInfo."""

    _fields_ = [("rank", c_uint32), ("size", c_uint32), ("localRank", c_uint32), ("localSize", c_uint32),
                ("launcher", ctypes.c_char * 16)]


def _proto(lib, name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


_H = hccl
HcclGetRootInfo = _proto(_H, "HcclGetRootInfo", c_int, c_void_p)
HcclCommInitRootInfo = _proto(_H, "HcclCommInitRootInfo", c_int, c_uint32, c_void_p, c_uint32, P(c_void_p))
HcclCommInitRootInfoConfig = _proto(_H, "HcclCommInitRootInfoConfig", c_int, c_uint32, c_void_p, c_uint32,
                                    P(CommConfig), P(c_void_p))
HcclCommInitAll = _proto(_H, "HcclCommInitAll", c_int, c_uint32, P(ctypes.c_int32), P(c_void_p))
HcclCreateSubCommConfig = _proto(_H, "HcclCreateSubCommConfig", c_int, P(c_void_p), c_uint32, P(c_uint32),
                                 c_uint64, c_uint32, P(CommConfig), P(c_void_p))
HcclCommDestroy = _proto(_H, "HcclCommDestroy", c_int, c_void_p)
HcclGetRankId = _proto(_H, "HcclGetRankId", c_int, c_void_p, P(c_uint32))
HcclGetRankSize = _proto(_H, "HcclGetRankSize", c_int, c_void_p, P(c_uint32))
HcclGetCommName = _proto(_H, "HcclGetCommName", c_int, c_void_p, c_char_p)
HcclGetCommAsyncError = _proto(_H, "HcclGetCommAsyncError", c_int, c_void_p, P(c_int))
HcclGetErrorString = _proto(_H, "HcclGetErrorString", c_char_p, c_int)
HcclAllReduce = _proto(_H, "HcclAllReduce", c_int, c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p)
HcclBroadcast = _proto(_H, "HcclBroadcast", c_int, c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p)
HcclReduce = _proto(_H, "HcclReduce", c_int, c_void_p, c_void_p, c_uint64, c_int, c_int, c_uint32, c_void_p,
                    c_void_p)
HcclAllGather = _proto(_H, "HcclAllGather", c_int, c_void_p, c_void_p, c_uint64, c_int, c_void_p, c_void_p)
HcclAllGatherV = _proto(_H, "HcclAllGatherV", c_int, c_void_p, c_uint64, c_void_p, c_void_p, c_void_p, c_int,
                        c_void_p, c_void_p)
HcclReduceScatter = _proto(_H, "HcclReduceScatter", c_int, c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p,
                           c_void_p)
HcclReduceScatterV = _proto(_H, "HcclReduceScatterV", c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_uint64,
                            c_int, c_int, c_void_p, c_void_p)
HcclScatter = _proto(_H, "HcclScatter", c_int, c_void_p, c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p)
HcclAlltoAll = _proto(_H, "HcclAlltoAll", c_int, c_void_p, c_uint64, c_int, c_void_p, c_uint64, c_int, c_void_p,
                      c_void_p)
HcclAlltoAllV = _proto(_H, "HcclAlltoAllV", c_int, c_void_p, c_void_p, c_void_p, c_int, c_void_p, c_void_p,
                       c_void_p, c_int, c_void_p, c_void_p)
HcclAlltoAllVC = _proto(_H, "HcclAlltoAllVC", c_int, c_void_p, c_void_p, c_int, c_void_p, c_int, c_void_p,
                        c_void_p)
HcclBarrier = _proto(_H, "HcclBarrier", c_int, c_void_p, c_void_p)
HcclSend = _proto(_H, "HcclSend", c_int, c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p)
HcclRecv = _proto(_H, "HcclRecv", c_int, c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p)
HcclBatchSendRecv = _proto(_H, "HcclBatchSendRecv", c_int, P(SendRecvItem), c_uint32, c_void_p, c_void_p)
HcclGroupStart = _proto(_H, "HcclGroupStart", c_int)
HcclGroupEnd = _proto(_H, "HcclGroupEnd", c_int)
HcclHostGetLaunchInfo = _proto(_H, "HcclHostGetLaunchInfo", c_int, P(LaunchInfo))
HcclHostBroadcastRootInfo = _proto(_H, "HcclHostBroadcastRootInfo", c_int, c_void_p)
HcclHostGetVersion = _proto(_H, "HcclHostGetVersion", c_int, P(c_uint32))
HcclHostGetRecentErrMsg = _proto(_H, "HcclHostGetRecentErrMsg", c_char_p)

_A = acl
aclInit = _proto(_A, "aclInit", c_int, ctypes.c_char_p)
aclrtSetDevice = _proto(_A, "aclrtSetDevice", c_int, ctypes.c_int32)
aclrtGetDevice = _proto(_A, "aclrtGetDevice", c_int, P(ctypes.c_int32))
aclrtGetDeviceCount = _proto(_A, "aclrtGetDeviceCount", c_int, P(c_uint32))
aclrtCreateStream = _proto(_A, "aclrtCreateStream", c_int, P(c_void_p))
aclrtDestroyStream = _proto(_A, "aclrtDestroyStream", c_int, c_void_p)
aclrtSynchronizeStream = _proto(_A, "aclrtSynchronizeStream", c_int, c_void_p)
aclrtSynchronizeStreamWithTimeout = _proto(_A, "aclrtSynchronizeStreamWithTimeout", c_int, c_void_p, ctypes.c_int32)
aclrtCreateEvent = _proto(_A, "aclrtCreateEvent", c_int, P(c_void_p))
aclrtDestroyEvent = _proto(_A, "aclrtDestroyEvent", c_int, c_void_p)
aclrtRecordEvent = _proto(_A, "aclrtRecordEvent", c_int, c_void_p, c_void_p)
aclrtQueryEvent = _proto(_A, "aclrtQueryEvent", c_int, c_void_p, P(c_int))
aclrtMalloc = _proto(_A, "aclrtMalloc", c_int, P(c_void_p), ctypes.c_size_t, c_int)
aclrtFree = _proto(_A, "aclrtFree", c_int, c_void_p)
aclGetRecentErrMsg = _proto(_A, "aclGetRecentErrMsg", c_char_p)

# The last error line reported on each thread, per library: each library keeps its thread's last
# error line until the next error, so a later failure that logged nothing on this thread (an
# operation the stream's worker ran) must not repeat an old line.
_reported = threading.local()


def recent_message(getter, default):
    """The library's last error line on this thread if not reported yet, else `default`."""
    raw = getter()
    msg = raw.decode(errors="replace") if raw else ""
    key = getter.__name__
    if not msg or getattr(_reported, key, None) == msg:
        return default
    setattr(_reported, key, msg)
    return msg


def error_string(result):
    raw = HcclGetErrorString(int(result))
    return raw.decode(errors="replace") if raw else f"HcclResult {int(result)}"


def hccl_error(result, call):
    """The exception for HcclResult `result` returned by `call`."""
    return HcclError(result, recent_message(HcclHostGetRecentErrMsg, error_string(result)), call)


def acl_error(code, call):
    """The exception for aclError `code` returned by `call` (not an HCCL operation's failure)."""
    name = _ACL_NAMES.get(code, f"aclError {code}")
    return HcclError(Result.E_RUNTIME, recent_message(aclGetRecentErrMsg, name), call, acl_error=code)


def check(result, call):
    if result != 0:
        raise hccl_error(result, call)


def check_acl(code, call):
    if code != 0:
        raise acl_error(code, call)
