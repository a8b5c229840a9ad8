"""From a Python object to (address, element count, HcclDataType), without copying.

Accepted: torch CPU tensors, numpy arrays, and any object with the buffer protocol (bytearray,
array.array, memoryview, ctypes arrays, ...). The memory must be C-contiguous; a non-contiguous
tensor or array is a ValueError that says so, never a silent copy. Resolvers are picked by the
object's exact type and cached, so a call costs one dictionary lookup before the type's own path.
"""
import ctypes
import sys
from enum import IntEnum


class DataType(IntEnum):
    """HcclDataType (CANN numbering)."""

    INT8 = 0
    INT16 = 1
    INT32 = 2
    FP16 = 3
    FP32 = 4
    INT64 = 5
    UINT64 = 6
    UINT8 = 7
    UINT16 = 8
    UINT32 = 9
    FP64 = 10
    BFP16 = 11


ITEMSIZE = {DataType.INT8: 1, DataType.UINT8: 1, DataType.INT16: 2, DataType.UINT16: 2, DataType.FP16: 2,
            DataType.BFP16: 2, DataType.INT32: 4, DataType.UINT32: 4, DataType.FP32: 4, DataType.INT64: 8,
            DataType.UINT64: 8, DataType.FP64: 8}

# numpy dtype.str without the byte order ('<f4' -> 'f4') and struct format characters.
_NUMPY_CODES = {"i1": DataType.INT8, "u1": DataType.UINT8, "b1": DataType.UINT8, "i2": DataType.INT16,
                "u2": DataType.UINT16, "f2": DataType.FP16, "i4": DataType.INT32, "u4": DataType.UINT32,
                "f4": DataType.FP32, "i8": DataType.INT64, "u8": DataType.UINT64, "f8": DataType.FP64}
_STRUCT_CODES = {"b": "i1", "B": "u1", "c": "u1", "?": "b1", "h": "i2", "H": "u2", "e": "f2", "i": "i4",
                 "I": "u4", "f": "f4", "l": "i8", "L": "u8", "q": "i8", "Q": "u8", "d": "f8"}
if ctypes.sizeof(ctypes.c_long) == 4:
    _STRUCT_CODES.update(l="i4", L="u4")

# Complex numbers move as pairs of their real type (what torch's own backends do).
_COMPLEX = {"c8": ("f4", 2), "c16": ("f8", 2)}

_TORCH_DTYPES = None  # torch.dtype -> (DataType, elements per item), filled on the first tensor


def _torch_map():
    global _TORCH_DTYPES
    import torch

    # Plain ints, not DataType members: ctypes converts an IntEnum ~0.3 us slower per argument.
    _TORCH_DTYPES = {torch.int8: (DataType.INT8, 1), torch.uint8: (DataType.UINT8, 1),
                     torch.bool: (DataType.UINT8, 1), torch.int16: (DataType.INT16, 1),
                     torch.int32: (DataType.INT32, 1), torch.int64: (DataType.INT64, 1),
                     torch.float16: (DataType.FP16, 1), torch.bfloat16: (DataType.BFP16, 1),
                     torch.float32: (DataType.FP32, 1), torch.float64: (DataType.FP64, 1),
                     torch.complex64: (DataType.FP32, 2), torch.complex128: (DataType.FP64, 2)}
    _TORCH_DTYPES = {k: (int(v[0]), v[1]) for k, v in _TORCH_DTYPES.items()}
    return _TORCH_DTYPES


def _not_contiguous(what, obj, detail):
    return ValueError(f"hostccl: {what} is not contiguous ({detail}); collectives use the memory in place "
                      "and never copy behind your back: pass a contiguous one (e.g. .contiguous() or "
                      "numpy.ascontiguousarray)")


def _torch_buffer(t, writable=True):
    entry = (_TORCH_DTYPES or _torch_map()).get(t.dtype)
    if entry is not None and t.is_cpu and t.is_contiguous():
        return t.data_ptr(), t.numel() * entry[1], entry[0]
    if entry is None:
        raise TypeError(f"hostccl: torch dtype {t.dtype} has no HCCL data type")
    if not t.is_cpu:
        raise ValueError(f"hostccl: tensor is on {t.device}; hostccl moves CPU tensors only")
    raise _not_contiguous("tensor", t, f"shape {tuple(t.shape)}, strides {t.stride()}")


_NUMPY_DTYPES = {}  # numpy.dtype -> (DataType, elements per item)
_c_char = ctypes.c_char


def _numpy_entry(dt):
    code = dt.str[1:]
    n = 1
    if code in _COMPLEX:
        code, n = _COMPLEX[code]
    dtype = _NUMPY_CODES.get(code)
    if dtype is None:
        raise TypeError(f"hostccl: numpy dtype {dt} has no HCCL data type")
    if dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big"):
        raise TypeError("hostccl: big-endian arrays are not supported")
    _NUMPY_DTYPES[dt] = (int(dtype), n)
    return _NUMPY_DTYPES[dt]


def _numpy_buffer(a, writable):
    entry = _NUMPY_DTYPES.get(a.dtype) or _numpy_entry(a.dtype)
    flags = a.flags
    if not flags.c_contiguous:
        raise _not_contiguous("array", a, f"shape {a.shape}, strides {a.strides}")
    if flags.writeable:
        # A ctypes view finds the address 3x faster than numpy's own attributes.
        address = ctypes.addressof(_c_char.from_buffer(a)) if a.size else 0
    elif writable:
        raise ValueError("hostccl: output array is read-only")
    else:
        address = a.ctypes.data
    return address, a.size * entry[1], entry[0]


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyObject_GetBuffer = ctypes.pythonapi.PyObject_GetBuffer
_PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_PyObject_GetBuffer.restype = ctypes.c_int
_PyBuffer_Release = ctypes.pythonapi.PyBuffer_Release
_PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_PyBuffer_Release.restype = None
_PyBUF_FORMAT, _PyBUF_ND, _PyBUF_STRIDES, _PyBUF_WRITABLE, _PyBUF_C_CONTIGUOUS = 0x4, 0x8, 0x18, 0x1, 0x38


def _generic_buffer(obj, writable):
    """Any buffer-protocol object: C-contiguous (checked by the exporter), format-typed."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"hostccl: {type(obj).__name__} is neither a tensor, an array nor a buffer") from None
    if not view.c_contiguous:
        raise _not_contiguous(type(obj).__name__, obj, f"shape {view.shape}, strides {view.strides}")
    if writable and view.readonly:
        raise ValueError(f"hostccl: output {type(obj).__name__} is read-only")
    fmt = view.format.lstrip("@=<")
    code = _STRUCT_CODES.get(fmt) if len(fmt) == 1 else None
    n = 1
    if fmt in ("Zf", "Zd"):
        code, n = ("f4", 2) if fmt == "Zf" else ("f8", 2)
    if code is None:
        raise TypeError(f"hostccl: buffer format {view.format!r} has no HCCL data type")
    pybuf = _PyBuffer()
    flags = _PyBUF_C_CONTIGUOUS | _PyBUF_FORMAT | (_PyBUF_WRITABLE if writable else 0)
    if _PyObject_GetBuffer(obj, ctypes.byref(pybuf), flags) != 0:
        raise ValueError(f"hostccl: cannot get the memory of {type(obj).__name__}")
    address = pybuf.buf or 0
    _PyBuffer_Release(ctypes.byref(pybuf))
    return address, (view.nbytes // view.itemsize) * n, int(_NUMPY_CODES[code])


_resolvers = {}


def _resolver_for(cls):
    for base in cls.__mro__:
        mod = base.__module__
        if mod == "torch" and base.__name__ == "Tensor":
            fn = _torch_buffer
            break
        if mod == "numpy" and base.__name__ == "ndarray":
            fn = _numpy_buffer
            break
    else:
        fn = _generic_buffer
    _resolvers[cls] = fn
    return fn


def buffer_of(obj, writable=False):
    """(address, count, HcclDataType as int) of `obj`'s memory; the caller keeps `obj` alive while it is used."""
    fn = _resolvers.get(type(obj)) or _resolver_for(type(obj))
    return fn(obj, writable)


def nbytes(count, dtype):
    return count * ITEMSIZE[dtype]
