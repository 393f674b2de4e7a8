"""Tests for the vyre_cuda Python bindings (unittest; no extra packages).

Run from bindings/python:  python3 -m unittest discover -s tests -v
The library comes from $VYRE_CUDA_LIBRARY (ctest sets it to the build's).

Without a GPU the GPU cases skip, unless VYRE_CUDA_REQUIRE_GPU=1 turns that
into a failure (the GPU machine's setting).

With VYRE_CUDA_TEST_FAKE_DRIVER=1 and VYRE_CUDA_DRIVER_LIBRARY pointing at
the test suite's fake driver (libfake_cuda.so, which runs the contract's test
kernels on the host), the GPU cases run in CI too, and the run fails if the
engine misused the driver API or leaked driver objects.
"""

import array
import ctypes
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import vyre_cuda as vc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
INCLUDE_DIR = os.environ.get("VYRE_CUDA_INCLUDE_DIR") or os.path.join(REPO, "include")
HEADER = os.path.join(INCLUDE_DIR, "vyre_cuda.h")
FAKE_DRIVER = os.environ.get("VYRE_CUDA_TEST_FAKE_DRIVER") == "1"
REQUIRE_GPU = os.environ.get("VYRE_CUDA_REQUIRE_GPU") == "1" or FAKE_DRIVER
NO_DRIVER_PATH = "/nonexistent/libcuda.so.1"

# vyre_test_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
# out[i] = a[i] + b[i] for i < params[0] (the contract's shared test kernel).
ADD_PTX = """\
.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_add_u32(
  .param .u64 param_a,
  .param .u64 param_b,
  .param .u64 param_out,
  .param .u64 param_words
)
{
  .reg .pred   %p<2>;
  .reg .b32   %r<8>;
  .reg .b64   %rd<16>;

  // n = params[0], widened so the index comparison cannot wrap.
  ld.param.u64   %rd1, [param_words];
  cvta.to.global.u64   %rd2, %rd1;
  ld.global.u32   %r1, [%rd2];
  cvt.u64.u32   %rd3, %r1;

  // i = blockIdx.x * blockDim.x + threadIdx.x, computed in 64 bits.
  mov.u32   %r2, %ctaid.x;
  mov.u32   %r3, %ntid.x;
  mov.u32   %r4, %tid.x;
  mul.wide.u32   %rd4, %r2, %r3;
  cvt.u64.u32   %rd5, %r4;
  add.s64   %rd6, %rd4, %rd5;
  setp.ge.u64   %p1, %rd6, %rd3;
  @%p1 bra   DONE;

  // byte offset = i * 4
  shl.b64   %rd7, %rd6, 2;
  ld.param.u64   %rd8, [param_a];
  cvta.to.global.u64   %rd9, %rd8;
  add.s64   %rd10, %rd9, %rd7;
  ld.global.u32   %r5, [%rd10];
  ld.param.u64   %rd11, [param_b];
  cvta.to.global.u64   %rd12, %rd11;
  add.s64   %rd13, %rd12, %rd7;
  ld.global.u32   %r6, [%rd13];
  add.s32   %r7, %r5, %r6;
  ld.param.u64   %rd14, [param_out];
  cvta.to.global.u64   %rd15, %rd14;
  add.s64   %rd15, %rd15, %rd7;
  st.global.u32   [%rd15], %r7;

DONE:
  ret;
}
"""

ADD_BINDINGS = [vc.Binding(vc.Role.INPUT, name="a"), vc.Binding(vc.Role.INPUT, name="b"),
                vc.Binding(vc.Role.OUTPUT, name="out")]

# The first failure of each kind that means "no usable GPU here".
NO_GPU_STATUSES = (vc.Status.NO_DRIVER, vc.Status.NO_DEVICE, vc.Status.DRIVER_TOO_OLD)


def run_isolated(code, **env):
    """Runs code in a fresh interpreter (the driver is loaded once per process,
    so a test that hides it needs its own). Returns the JSON it prints."""
    full_env = dict(os.environ)
    full_env.update(env)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in [os.path.dirname(os.path.dirname(vc.__file__)),
                    full_env.get("PYTHONPATH", "")] if p)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def random_u32(n, rng):
    # Non-zero values: an all-zero result cannot pass by accident.
    return array.array("I", (rng.randrange(1, 2 ** 32) for _ in range(n)))


def check_sum(test, a, b, out_bytes, label):
    out = array.array("I")
    out.frombytes(bytes(out_bytes))
    test.assertEqual(len(out), len(a), f"{label}: output length")
    bad = [i for i in range(len(a)) if out[i] != (a[i] + b[i]) & 0xFFFFFFFF]
    if bad:
        i = bad[0]
        test.fail(f"{label}: {len(bad)} of {len(a)} elements wrong; first out[{i}] = {out[i]}, "
                  f"expected {(a[i] + b[i]) & 0xFFFFFFFF}")


class FakeStats(ctypes.Structure):
    """fake_cuda_stats from tests/support/fake_cuda_control.h."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "device_allocations_live", "device_bytes_live", "pinned_allocations_live",
        "pinned_bytes_live", "modules_live", "streams_live", "events_live")] + [
        ("primary_context_retains", ctypes.c_int64)] + [
        (name, ctypes.c_uint64) for name in (
            "module_loads", "kernel_launches", "cooperative_launches", "memcpy_htod",
            "memcpy_dtoh", "memsets", "misuse_errors", "hold_timeouts")] + [
        ("last_grid", ctypes.c_uint32 * 3), ("last_block", ctypes.c_uint32 * 3),
        ("last_shared_bytes", ctypes.c_uint32), ("last_kernel", ctypes.c_char * 128)]


def fake_stats():
    """The fake driver's counters (the same instance the library loaded:
    dlopen of the same path returns it)."""
    fake = ctypes.CDLL(os.environ["VYRE_CUDA_DRIVER_LIBRARY"])
    # A roomy buffer: if the fake's struct grows, it cannot write past ours.
    raw = ctypes.create_string_buffer(4096)
    fake.fake_cuda_get_stats(raw)
    return FakeStats.from_buffer_copy(raw.raw[:ctypes.sizeof(FakeStats)])


def tearDownModule():
    if FAKE_DRIVER:
        misuse = fake_stats().misuse_errors
        if misuse:
            raise AssertionError(f"the engine misused the (fake) driver API {misuse} times; "
                                 f"its stderr shows each call")


class LibraryTest(unittest.TestCase):
    """The binding against the library and the header; no driver needed."""

    def test_version_matches_bindings(self):
        major, minor, patch = vc.version()
        self.assertEqual(major, vc.VERSION_MAJOR)
        self.assertEqual(vc.version_string(), f"{major}.{minor}.{patch}")

    def test_status_names(self):
        for status in vc.Status:
            self.assertEqual(vc.status_name(status), "VYRE_STATUS_" + status.name)
        self.assertEqual(vc.status_name(12345), "VYRE_STATUS_UNKNOWN")

    def test_every_header_function_is_declared(self):
        if not os.path.exists(HEADER):
            self.skipTest(f"{HEADER} not found (set VYRE_CUDA_INCLUDE_DIR)")
        with open(HEADER, encoding="utf-8") as f:
            text = f.read()
        declared = set(re.findall(r"VYRE_API\s+[^;(]*?\b(vyre_\w+)\s*\(", text))
        self.assertTrue(declared, "no VYRE_API functions found in the header")
        self.assertEqual(declared, set(vc._PROTOTYPES),
                         "vyre_cuda._PROTOTYPES differs from the header's functions")

    def test_every_function_is_exported(self):
        lib = vc.load()
        for name in vc._PROTOTYPES:
            self.assertTrue(hasattr(lib, name), name)

    def test_enums_cover_the_header(self):
        if not os.path.exists(HEADER):
            self.skipTest(f"{HEADER} not found (set VYRE_CUDA_INCLUDE_DIR)")
        with open(HEADER, encoding="utf-8") as f:
            text = f.read()
        for enum_type, prefix in ENUM_PREFIXES:
            in_header = {m for m in re.findall(prefix + r"(\w+)\s*=", text)
                         if not m.endswith("FORCE32")}
            self.assertEqual(in_header, {m.name for m in enum_type},
                             f"{enum_type.__name__} differs from {prefix}* in the header")

    def test_layouts_and_constants_match_the_c_compiler(self):
        cc = os.environ.get("VYRE_CUDA_TEST_CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc or not os.path.exists(HEADER):
            self.skipTest("needs a C compiler and vyre_cuda.h")
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "vyre_cuda.h"',
                 'int main(void) {']
        expected = []
        for s in vc.C_STRUCTS:
            c = s._c_name_
            lines.append(f'  printf("%zu\\n", sizeof({c}));')
            expected.append((f"sizeof({c})", ctypes.sizeof(s)))
            for field, _ in getattr(s, "_fields_", []):
                lines.append(f'  printf("%zu\\n", offsetof({c}, {field}));')
                expected.append((f"offsetof({c}, {field})", getattr(s, field).offset))
        for enum_type, prefix in ENUM_PREFIXES:
            for member in enum_type:
                lines.append(f'  printf("%lld\\n", (long long){prefix}{member.name});')
                expected.append((prefix + member.name, int(member)))
        for py, c in (("VERSION_MAJOR", "VYRE_CUDA_VERSION_MAJOR"),
                      ("WAIT_FOREVER", "VYRE_WAIT_FOREVER"),
                      ("DISPATCH_FLAG_DEVICE_TIMING", "VYRE_DISPATCH_FLAG_DEVICE_TIMING"),
                      ("DISPATCH_FLAG_COOPERATIVE", "VYRE_DISPATCH_FLAG_COOPERATIVE")):
            lines.append(f'  printf("%llu\\n", (unsigned long long){c});')
            expected.append((c, getattr(vc, py)))
        lines += ["  return 0;", "}"]
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "layout.c")
            exe = os.path.join(tmp, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            subprocess.run([cc, "-std=c99", "-I", INCLUDE_DIR, src, "-o", exe], check=True)
            values = subprocess.run([exe], check=True, capture_output=True,
                                    text=True).stdout.split()
        self.assertEqual(len(values), len(expected))
        for (what, py_value), c_value in zip(expected, values):
            self.assertEqual(py_value, int(c_value), what)


ENUM_PREFIXES = ((vc.Status, "VYRE_STATUS_"), (vc.Role, "VYRE_ROLE_"),
                 (vc.CodeKind, "VYRE_CODE_"), (vc.ParamKind, "VYRE_PARAM_"),
                 (vc.Source, "VYRE_SOURCE_"), (vc.LogLevel, "VYRE_LOG_"))


class NoDriverTest(unittest.TestCase):
    """A process whose driver cannot be loaded: every path reports NO_DRIVER
    with a Fix message, and bad handles are still caught first."""

    def test_no_driver_is_reported_with_a_fix(self):
        got = run_isolated("""
            import json, vyre_cuda as vc
            out = {}
            for name, call in (("context", lambda: vc.Context()),
                               ("device_count", vc.device_count),
                               ("device_info", lambda: vc.device_info(0))):
                try:
                    call()
                    out[name] = None
                except vc.VyreError as e:
                    out[name] = [int(e.status), e.status_name, e.cu_result, e.message, e.call]
            print(json.dumps(out))
            """, VYRE_CUDA_DRIVER_LIBRARY=NO_DRIVER_PATH)
        for name, result in got.items():
            with self.subTest(name):
                self.assertIsNotNone(result, f"{name} succeeded without a driver")
                status, status_name, cu_result, message, _ = result
                self.assertEqual(status, vc.Status.NO_DRIVER)
                self.assertEqual(status_name, "VYRE_STATUS_NO_DRIVER")
                self.assertEqual(cu_result, 0)
                self.assertIn("Fix:", message)

    def test_bad_handles_without_driver(self):
        got = run_isolated("""
            import json, vyre_cuda as vc
            lib = vc.load()
            out = []
            for bits in (0, 0x1234, 0xFFFFFFFFFFFFFFFF):
                for fn, handle_type in (("vyre_context_destroy", vc.ContextHandle),
                                        ("vyre_buffer_free", vc.BufferHandle),
                                        ("vyre_program_destroy", vc.ProgramHandle),
                                        ("vyre_pending_release", vc.PendingHandle),
                                        ("vyre_pending_poll", vc.PendingHandle),
                                        ("vyre_context_trim", vc.ContextHandle)):
                    status = getattr(lib, fn)(handle_type(bits))
                    out.append([fn, bits, status, vc.last_error()[2]])
            print(json.dumps(out))
            """, VYRE_CUDA_DRIVER_LIBRARY=NO_DRIVER_PATH)
        for fn, bits, status, message in got:
            with self.subTest(fn=fn, bits=hex(bits)):
                self.assertEqual(status, vc.Status.INVALID_HANDLE,
                                 f"{fn}(0x{bits:x}) gave {vc.status_name(status)}: {message}")
                self.assertIn("Fix:", message)


class HandleTest(unittest.TestCase):
    """Bad handles through the Python objects (no GPU needed)."""

    def _closed(self, cls):
        obj = cls.__new__(cls)
        vc._Object.__init__(obj, 0, None)
        return obj

    def assertStatus(self, status, fn, *args):
        with self.assertRaises(vc.VyreError) as cm:
            fn(*args)
        e = cm.exception
        self.assertEqual(e.status, status, str(e))
        self.assertEqual(e.status_name, "VYRE_STATUS_" + status.name)
        self.assertIn("Fix:", e.message)
        self.assertIn("Fix:", str(e))
        return e

    def test_closed_objects_give_invalid_handle(self):
        buf = self._closed(vc.Buffer)
        buf.nbytes = 4
        self.assertStatus(vc.Status.INVALID_HANDLE, buf.upload, b"abcd")
        self.assertStatus(vc.Status.INVALID_HANDLE, buf.download, 4)
        self.assertStatus(vc.Status.INVALID_HANDLE, buf.info)
        ctx = self._closed(vc.Context)
        self.assertStatus(vc.Status.INVALID_HANDLE, ctx.telemetry)
        self.assertStatus(vc.Status.INVALID_HANDLE, ctx.selftest)
        self.assertStatus(vc.Status.INVALID_HANDLE, ctx.alloc, 16)
        self.assertStatus(vc.Status.INVALID_HANDLE, ctx.program, ADD_PTX, "vyre_test_add_u32",
                          ADD_BINDINGS)
        pending = self._closed(vc.Pending)
        self.assertStatus(vc.Status.INVALID_HANDLE, pending.wait)
        self.assertStatus(vc.Status.INVALID_HANDLE, pending.poll)

    def test_forged_handle_gives_invalid_handle(self):
        e = self.assertStatus(vc.Status.INVALID_HANDLE, vc._call, "vyre_buffer_free",
                              vc.BufferHandle(0xFFFFFFFFFFFFFFFF))
        self.assertEqual(e.call, "vyre_buffer_free")

    def test_close_is_idempotent_and_finalisers_are_quiet(self):
        obj = self._closed(vc.Buffer)
        obj.close()
        obj.close()
        del obj  # __del__ on a closed object does nothing

    def test_last_error_reads_the_failure(self):
        lib = vc.load()
        status = lib.vyre_buffer_free(vc.BufferHandle(0))
        self.assertEqual(status, vc.Status.INVALID_HANDLE)
        got_status, cu_result, message = vc.last_error()
        self.assertEqual(got_status, vc.Status.INVALID_HANDLE)
        self.assertEqual(cu_result, 0)
        self.assertIn("Fix:", message)
        # Reading twice does not clear it.
        self.assertEqual(vc.last_error()[2], message)


class HostMemoryTest(unittest.TestCase):
    """How Python objects become host pointers."""

    def test_readable_objects(self):
        data = bytes(range(16))
        for obj in (data, bytearray(data), memoryview(data), memoryview(bytearray(data)),
                    array.array("I", range(4))):
            with self.subTest(type(obj).__name__):
                ref = vc._readable(obj, "t")
                self.assertEqual(ref.nbytes, 16)
                self.assertEqual(ctypes.string_at(ref.address, 16), bytes(memoryview(obj)))

    def test_writable_memory_is_used_in_place(self):
        buf = bytearray(8)
        ref = vc._readable(buf, "t")
        ctypes.memset(ref.address, 7, 8)
        self.assertEqual(buf, bytearray([7] * 8))
        out = array.array("I", [0, 0])
        ref = vc._writable(out, "t")
        ctypes.memset(ref.address, 1, 8)
        self.assertEqual(out[0], 0x01010101)

    def test_non_contiguous_input_is_copied_in_order(self):
        view = memoryview(bytes(range(10)))[::2]
        ref = vc._readable(view, "t")
        self.assertEqual(ctypes.string_at(ref.address, ref.nbytes), bytes([0, 2, 4, 6, 8]))

    def test_outputs(self):
        ref = vc._writable(12, "t")
        self.assertIsInstance(ref.owner, bytearray)
        self.assertEqual(ref.nbytes, 12)
        with self.assertRaises(TypeError) as cm:
            vc._writable(b"read only", "t")
        self.assertIn("Fix:", str(cm.exception))
        with self.assertRaises(ValueError):
            vc._writable(memoryview(bytearray(8))[::2], "t")
        with self.assertRaises(TypeError):
            vc._readable(object(), "t")

    def test_zero_length_is_a_null_pointer(self):
        self.assertIsNone(vc._readable(bytearray(), "t").address)
        self.assertIsNone(vc._writable(0, "t").address)

    def test_sizes_are_range_checked(self):
        # ctypes would truncate silently; the bindings refuse instead.
        self.assertEqual(vc._dim3(None, "g"), (0, 0, 0))
        self.assertEqual(vc._dim3(5, "g"), (5, 1, 1))
        self.assertEqual(vc._dim3((2, 3), "g"), (2, 3, 1))
        for bad in (2 ** 32, -1, (1, 2, 3, 4)):
            with self.assertRaises(ValueError):
                vc._dim3(bad, "g")
        with self.assertRaises(ValueError):
            vc._u32_array([2 ** 32], "params")
        words, count = vc._u32_array([-1, 7], "params")
        self.assertEqual((words[0], words[1], count), (2 ** 32 - 1, 7, 2))

    def test_numpy_if_present(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        a = np.arange(8, dtype="<u4")
        ref = vc._writable(a, "t")
        self.assertEqual(ref.nbytes, 32)
        self.assertEqual(ctypes.string_at(ref.address, 32), a.tobytes())


@unittest.skipUnless(FAKE_DRIVER, "needs the fake driver (VYRE_CUDA_TEST_FAKE_DRIVER=1)")
class FakeDriverTest(unittest.TestCase):
    """Every driver object the bindings cause is released again."""

    def test_no_driver_objects_outlive_their_context(self):
        before = fake_stats()
        rng = random.Random(7)
        n = 5000
        a, b = random_u32(n, rng), random_u32(n, rng)
        with vc.Context() as ctx:
            prog = ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
            check_sum(self, a, b, prog.dispatch([a, b, 4 * n], params=[n])[2], "fake host")
            da, db, dout = ctx.upload(a), ctx.upload(b), ctx.alloc(4 * n)
            pending = prog.dispatch_async([da, db, dout], params=[n])
            pending.wait()
            check_sum(self, a, b, dout.download(), "fake resident")
            # Left open on purpose: closing the context must release them.
            self.assertEqual(fake_stats().kernel_launches - before.kernel_launches, 2)
        after = fake_stats()
        for field in ("device_allocations_live", "pinned_allocations_live", "modules_live",
                      "streams_live", "events_live", "primary_context_retains",
                      "misuse_errors"):
            self.assertEqual(getattr(after, field), getattr(before, field), field)


class GpuTest(unittest.TestCase):
    """Real kernels on real data; skipped without a GPU unless
    VYRE_CUDA_REQUIRE_GPU=1."""

    @classmethod
    def setUpClass(cls):
        try:
            cls.ctx = vc.Context()
        except vc.VyreError as e:
            if e.status in NO_GPU_STATUSES and not REQUIRE_GPU:
                raise unittest.SkipTest(f"no usable GPU: {e}")
            raise
        cls.prog = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                   workgroup_size=256)
        cls.rng = random.Random()
        seed = random.randrange(2 ** 32)
        cls.rng.seed(seed)
        print(f"GpuTest data seed {seed}", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()
        cls.ctx.close()

    def data(self, n):
        return random_u32(n, self.rng), random_u32(n, self.rng)

    def test_device_info(self):
        info = self.ctx.device_info()
        self.assertTrue(info["name"])
        self.assertGreaterEqual(info["compute_capability"], (7, 5))
        self.assertGreater(info["multiprocessor_count"], 0)
        self.assertGreater(info["total_memory_bytes"], 0)
        self.assertEqual(vc.device_info(info["ordinal"])["name"], info["name"])
        self.assertGreaterEqual(vc.device_count(), 1)

    def test_vector_add_host_memory(self):
        for n in (1, 255, 257, (1 << 20) + 17):
            with self.subTest(n=n):
                a, b = self.data(n)
                outs = self.prog.dispatch([a, b, 4 * n], params=[n])
                self.assertIsNone(outs[0])
                self.assertIsInstance(outs[2], bytearray)
                check_sum(self, a, b, outs[2], f"host n={n}")
                self.assertGreater(outs.timing["wall_ns"], 0)

    def test_vector_add_resident(self):
        n = (1 << 20) + 3
        a, b = self.data(n)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout:
            self.assertEqual(da.info()["bytes"], 4 * n)
            self.assertNotEqual(da.device_pointer, 0)
            outs = self.prog.dispatch([da, db, dout], params=[n])
            self.assertEqual(list(outs), [None, None, None])
            check_sum(self, a, b, dout.download(), "resident")

    def test_vector_add_resident_ranges(self):
        # Bind the middle of larger buffers: offsets are honoured.
        n, pad = 4099, 64
        a, b = self.data(n)
        with self.ctx.alloc(4 * (n + 2 * pad)) as da, self.ctx.alloc(4 * (n + 2 * pad)) as db, \
                self.ctx.alloc(4 * n) as dout:
            da.upload(a, offset=4 * pad)
            db.upload_ranges([(4 * pad, b)])
            self.prog.dispatch([da.range(4 * pad, 4 * n), (db, 4 * pad, 4 * n), dout],
                               params=[n])
            got, = dout.download_ranges([(0, 4 * n)])
            check_sum(self, a, b, got, "resident ranges")

    def test_async_into_a_given_buffer(self):
        n = 100003
        a, b = self.data(n)
        out = array.array("I", [0xA5A5A5A5]) * n
        pending = self.prog.dispatch_async([a, b, out], params=[n],
                                           flags=vc.DISPATCH_FLAG_DEVICE_TIMING)
        with pending:
            self.assertIn(pending.poll(), (True, False))
            outs = pending.wait()
            self.assertIs(outs[2], out)
            check_sum(self, a, b, out.tobytes(), "async")
            self.assertGreater(pending.timing()["wall_ns"], 0)
            with self.assertRaises(vc.VyreError) as cm:
                pending.wait()
            self.assertEqual(cm.exception.status, vc.Status.INVALID_STATE)
            self.assertIn("Fix:", cm.exception.message)
        self.assertTrue(pending.closed)

    def test_pending_dropped_unwaited_is_safe(self):
        n = 4096
        a, b = self.data(n)
        pending = self.prog.dispatch_async([a, b, 4 * n], params=[n])
        del pending  # released by the finaliser: waits, skips the read-back
        self.assertEqual(self.ctx.telemetry()["live_pendings"], 0)

    def test_stale_and_wrong_type_handles(self):
        buf = self.ctx.alloc(64)
        bits = buf.handle
        buf.close()
        with self.assertRaises(vc.VyreError) as cm:
            vc._call("vyre_buffer_free", vc.BufferHandle(bits))
        self.assertEqual(cm.exception.status, vc.Status.STALE_HANDLE)
        self.assertIn("Fix:", cm.exception.message)
        # A context's handle passed as a buffer.
        with self.assertRaises(vc.VyreError) as cm:
            vc._call("vyre_buffer_free", vc.BufferHandle(self.ctx.handle))
        self.assertEqual(cm.exception.status, vc.Status.INVALID_HANDLE)

    def test_closing_a_context_releases_its_objects(self):
        ctx = vc.Context()
        buf = ctx.alloc(16)
        bits = buf.handle
        ctx.close()
        buf.close()  # a no-op: the context already released it
        with self.assertRaises(vc.VyreError) as cm:
            vc._call("vyre_buffer_free", vc.BufferHandle(bits))
        self.assertEqual(cm.exception.status, vc.Status.STALE_HANDLE)

    def test_errors_carry_the_library_message(self):
        with self.assertRaises(vc.VyreError) as cm:
            self.ctx.alloc(0)
        self.assertEqual(cm.exception.status, vc.Status.INVALID_ARGUMENT)
        with self.assertRaises(vc.VyreError) as cm:
            self.ctx.program(ADD_PTX, "no_such_kernel", ADD_BINDINGS)
        self.assertEqual(cm.exception.status, vc.Status.ENTRY_NOT_FOUND)
        with self.assertRaises(vc.VyreError) as cm:
            self.ctx.program(".version 7.0\n.target sm_75\nthis is not ptx", "k", ADD_BINDINGS)
        self.assertEqual(cm.exception.status, vc.Status.COMPILE_FAILED)
        with self.assertRaises(vc.VyreError) as cm:
            self.prog.dispatch([b"\x01\x00\x00\x00"] * 2)  # 2 bindings for 3
        self.assertEqual(cm.exception.status, vc.Status.INVALID_ARGUMENT)
        with self.ctx.alloc(16) as buf:
            with self.assertRaises(vc.VyreError) as cm:
                buf.upload(bytes(32))
            self.assertEqual(cm.exception.status, vc.Status.OUT_OF_RANGE)
            self.assertIn("Fix:", cm.exception.message)

    def test_builtin_selftest(self):
        self.ctx.selftest()

    def test_telemetry(self):
        t = self.ctx.telemetry()
        for key in ("h2d_bytes", "kernel_launches", "dispatches", "live_buffers"):
            self.assertIn(key, t)


if __name__ == "__main__":
    unittest.main()
