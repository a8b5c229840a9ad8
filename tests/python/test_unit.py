"""One process, no launcher: the package's own logic. Library discovery, dtype mapping of every
kind of buffer, the errors for bad buffers, exceptions with the library's message, launch
information, a communicator of one rank with every operation, streams and handles, arena arrays.
Run: /usr/bin/python3 tests/python/test_unit.py
"""
import array
import ctypes
import os
import subprocess
import sys
import unittest

from _setup import ROOT, require

require("numpy", "torch")
import numpy as np  # noqa: E402
import torch  # noqa: E402

import hostccl  # noqa: E402
from hostccl import _buffer  # noqa: E402

DT = hostccl.DataType


def run_python(code, env_update=None, env_drop=()):
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env.update(env_update or {})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


class Library(unittest.TestCase):
    def test_loaded_and_versioned(self):
        self.assertTrue(os.path.basename(hostccl.library_path).startswith("libhccl.so"))
        self.assertEqual(hostccl.version()[0], 0)

    def test_bad_library_path_is_a_clear_import_error(self):
        out = run_python("import hostccl", {"HOSTCCL_LIBRARY_PATH": "/nonexistent/dir"})
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("cannot load libhccl", out.stderr)
        self.assertIn("/nonexistent/dir/libhccl.so (not there)", out.stderr)

    def test_found_in_the_checkout_without_the_variable(self):
        # From <checkout>/python the default build directory <checkout>/build is found by itself.
        if not os.path.exists(os.path.join(ROOT, "build", "libhccl.so")):
            self.skipTest("no <checkout>/build")
        out = run_python("import hostccl; print(hostccl.library_path)", {"PYTHONPATH": os.path.join(ROOT, "python")},
                         env_drop=("HOSTCCL_LIBRARY_PATH",))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), os.path.join(ROOT, "build", "libhccl.so"))


class Buffers(unittest.TestCase):
    def test_numpy_dtypes(self):
        for code, dtype in (("i1", DT.INT8), ("u1", DT.UINT8), ("i2", DT.INT16), ("u2", DT.UINT16),
                            ("i4", DT.INT32), ("u4", DT.UINT32), ("i8", DT.INT64), ("u8", DT.UINT64),
                            ("f2", DT.FP16), ("f4", DT.FP32), ("f8", DT.FP64), ("?", DT.UINT8)):
            a = np.zeros(5, code)
            self.assertEqual(_buffer.buffer_of(a), (a.ctypes.data, 5, dtype), code)
        c = np.zeros(3, np.complex64)
        self.assertEqual(_buffer.buffer_of(c)[1:], (6, DT.FP32))

    def test_torch_dtypes_and_zero_copy(self):
        for dtype, hccl in ((torch.int8, DT.INT8), (torch.uint8, DT.UINT8), (torch.int16, DT.INT16),
                            (torch.int32, DT.INT32), (torch.int64, DT.INT64), (torch.float16, DT.FP16),
                            (torch.bfloat16, DT.BFP16), (torch.float32, DT.FP32), (torch.float64, DT.FP64),
                            (torch.bool, DT.UINT8)):
            t = torch.zeros(7, dtype=dtype)
            self.assertEqual(_buffer.buffer_of(t), (t.data_ptr(), 7, hccl), dtype)
        base = torch.zeros(10)
        view = base[4:]  # an offset view is contiguous: its own address, no copy
        self.assertEqual(_buffer.buffer_of(view)[0], base.data_ptr() + 16)
        self.assertEqual(_buffer.buffer_of(torch.nn.Parameter(torch.zeros(2)))[1:], (2, DT.FP32))

    def test_buffer_protocol(self):
        a = array.array("h", [1, 2, 3])
        self.assertEqual(_buffer.buffer_of(a), (a.buffer_info()[0], 3, DT.INT16))
        b = bytearray(9)
        self.assertEqual(_buffer.buffer_of(b)[1:], (9, DT.UINT8))
        c = (ctypes.c_float * 4)()
        self.assertEqual(_buffer.buffer_of(c), (ctypes.addressof(c), 4, DT.FP32))
        self.assertEqual(_buffer.buffer_of(bytes(4))[1:], (4, DT.UINT8))  # read-only input: fine

    def test_bad_buffers(self):
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            _buffer.buffer_of(torch.zeros(3, 3)[:, 0])
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            _buffer.buffer_of(np.zeros((3, 3))[::2])
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            _buffer.buffer_of(memoryview(bytearray(8))[::2])
        with self.assertRaisesRegex(ValueError, "read-only"):
            _buffer.buffer_of(bytes(4), writable=True)
        with self.assertRaisesRegex(TypeError, "no HCCL data type"):
            _buffer.buffer_of(torch.quantize_per_tensor(torch.zeros(2), 1.0, 0, torch.quint8))
        with self.assertRaisesRegex(TypeError, "no HCCL data type"):
            _buffer.buffer_of(np.zeros(2, "U3"))
        with self.assertRaisesRegex(TypeError, "neither"):
            _buffer.buffer_of(3.0)
        with self.assertRaisesRegex(TypeError, "big-endian"):
            _buffer.buffer_of(np.zeros(2, ">f4"))


class OneRank(unittest.TestCase):
    """A communicator of one rank: every operation is legal and leaves the data where it belongs."""

    @classmethod
    def setUpClass(cls):
        cls.comm = hostccl.Comm(1, 0, hostccl.get_root_info(), name="unit-one")

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_identity(self):
        self.assertEqual((self.comm.rank, self.comm.size, self.comm.name), (0, 1, "unit-one"))
        self.assertEqual(self.comm.async_error(), hostccl.Result.SUCCESS)

    def test_operations(self):
        c = self.comm
        x = np.arange(6, dtype=np.float32)
        out = np.zeros(6, np.float32)
        c.all_reduce(x, out, "max")
        np.testing.assert_array_equal(out, x)
        c.broadcast(x, 0)
        c.reduce(x, out, root=0)
        c.all_gather(x, out)
        c.reduce_scatter(x, out)
        c.all_to_all(x, out)
        c.scatter(x, out, root=0)
        c.all_gather_v(x[:2], out, [2])
        c.all_to_all_v(x, [6], None, out, [6], None)
        c.all_to_all_vc(x, [[6]], out)
        c.barrier()
        np.testing.assert_array_equal(out, x)
        with self.assertRaisesRegex(ValueError, "reach element 8"):
            c.all_gather_v(x[:2], out, [2], [6])

    def test_errors_carry_result_and_message(self):
        with self.assertRaises(hostccl.HcclError) as cm:
            self.comm.send(np.zeros(2), 0)  # a peer equal to this rank
        e = cm.exception
        self.assertEqual(e.result, hostccl.Result.E_PARA)
        self.assertIn("HcclSend", e.call)
        self.assertIn("HCCL_E_PARA", str(e))
        self.assertIn("hostccl[", e.message)  # the library's own line, not just the code's name
        with self.assertRaises(hostccl.HcclError) as cm:
            hostccl.Comm(2, 5, hostccl.get_root_info())
        self.assertEqual(cm.exception.result, hostccl.Result.E_PARA)
        with self.assertRaisesRegex(ValueError, "4108 bytes"):
            hostccl.Comm(1, 0, b"short")

    def test_async_handle_and_streams(self):
        x = np.ones(1 << 16, np.float32)
        w = self.comm.all_reduce(x, async_op=True)
        self.assertIsInstance(w, hostccl.Work)
        self.assertTrue(w.wait())
        self.assertTrue(w.is_completed())
        with hostccl.Stream() as s:
            w = self.comm.all_reduce(x, stream=s, async_op=True)
            s.synchronize()
            self.assertTrue(w.is_completed())

    def test_arena(self):
        a = hostccl.zeros((3, 4), np.int64)
        self.assertEqual((a.shape, a.dtype, int(a.sum())), ((3, 4), np.int64, 0))
        self.comm.all_reduce(a)
        import hostccl.torch as ht

        t = ht.empty(2, 3, dtype=torch.bfloat16)
        self.assertEqual((tuple(t.shape), t.dtype), ((2, 3), torch.bfloat16))
        t.fill_(1)
        self.comm.all_reduce(t)
        self.assertEqual(float(t.sum()), 6.0)


class Launch(unittest.TestCase):
    def env_drop(self):
        return [k for k in os.environ if k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "OMPI_", "PMI_", "PMIX_",
                                                       "SLURM_", "MASTER_", "HOSTCCL_STORE", "HOSTCCL_RUN_OUTER"))]

    def test_no_launcher_is_rank_0_of_1(self):
        out = run_python("import hostccl; print(tuple(hostccl.launch_info())); c = hostccl.init(); print(c.size)",
                         env_drop=self.env_drop())
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split("\n")[:2], ["(0, 1, 0, 1, 'none')", "1"])

    def test_launchers(self):
        for env, want in (({"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
                           "(2, 4, 0, 2, 'hccl-run')"),
                          ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"}, "(1, 3, 1, 3, 'openmpi')"),
                          ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "(0, 2, 0, 2, 'pmi')"),
                          # A Slurm task is one of a step (docs/multihost.md); its local size is the step's.
                          ({"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
                            "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "1"}, "(3, 4, 1, 2, 'slurm')")):
            out = run_python("import hostccl; print(tuple(hostccl.launch_info()))", env, self.env_drop())
            self.assertEqual(out.stdout.strip(), want, out.stderr)

    def test_no_way_to_exchange_says_how(self):
        out = run_python("import hostccl; hostccl.init()", {"PMI_RANK": "1", "PMI_SIZE": "2"},
                         self.env_drop())
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("E_NOT_SUPPORT", out.stderr)
        self.assertIn("run under hccl-run", out.stderr)

    def test_bad_variables_are_hccl_e_para(self):
        out = run_python("import hostccl; hostccl.launch_info()", {"RANK": "x", "WORLD_SIZE": "2"}, self.env_drop())
        self.assertIn("HCCL_E_PARA", out.stderr)
        self.assertIn('RANK="x" is not a non-negative decimal number', out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=1)
