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

# vyre_test_inc_u32(u32* data, const u32* params): data[i] += 1 for i < params[0]
# (the contract's shared test kernel; the fake driver runs it on the host).
INC_PTX = """\
.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_inc_u32(
  .param .u64 param_data,
  .param .u64 param_words
)
{
  .reg .pred   %p<2>;
  .reg .b32   %r<7>;
  .reg .b64   %rd<10>;

  ld.param.u64   %rd1, [param_words];
  cvta.to.global.u64   %rd2, %rd1;
  ld.global.u32   %r1, [%rd2];
  cvt.u64.u32   %rd3, %r1;

  mov.u32   %r2, %ctaid.x;
  mov.u32   %r3, %ntid.x;
  mov.u32   %r4, %tid.x;
  mul.wide.u32   %rd4, %r2, %r3;
  cvt.u64.u32   %rd5, %r4;
  add.s64   %rd6, %rd4, %rd5;
  setp.ge.u64   %p1, %rd6, %rd3;
  @%p1 bra   DONE;

  shl.b64   %rd7, %rd6, 2;
  ld.param.u64   %rd8, [param_data];
  cvta.to.global.u64   %rd9, %rd8;
  add.s64   %rd9, %rd9, %rd7;
  ld.global.u32   %r5, [%rd9];
  add.s32   %r6, %r5, 1;
  st.global.u32   [%rd9], %r6;

DONE:
  ret;
}
"""

INC_BINDINGS = [vc.Binding(vc.Role.INPUT_OUTPUT, name="data")]

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
        ("last_shared_bytes", ctypes.c_uint32), ("last_kernel", ctypes.c_char * 128),
        ("probe_a", ctypes.c_uint64), ("probe_b", ctypes.c_uint64),
        ("probe_c", ctypes.c_uint32), ("probe_d0", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in (
            "probe_launches", "graphs_live", "graph_execs_live", "graph_launches",
            "graph_nodes_run", "captures_begun", "memcpy_dtod")]


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

    def test_every_header_struct_is_mirrored(self):
        if not os.path.exists(HEADER):
            self.skipTest(f"{HEADER} not found (set VYRE_CUDA_INCLUDE_DIR)")
        with open(HEADER, encoding="utf-8") as f:
            text = f.read()
        in_header = set(re.findall(r"typedef\s+struct\s+(vyre_\w+)", text))
        self.assertTrue(in_header, "no structs found in the header")
        self.assertEqual(in_header, {s._c_name_ for s in vc.C_STRUCTS},
                         "vyre_cuda.C_STRUCTS differs from the header's structs")

    def test_every_enumerator_is_bound(self):
        # Named enums map to IntEnums; the anonymous flag enums to constants.
        if not os.path.exists(HEADER):
            self.skipTest(f"{HEADER} not found (set VYRE_CUDA_INCLUDE_DIR)")
        with open(HEADER, encoding="utf-8") as f:
            text = f.read()
        enumerators = {m for m in re.findall(r"^\s*(VYRE_\w+)\s*=", text, re.M)
                       if not m.endswith("FORCE32")}
        bound = {prefix + m.name for enum_type, prefix in ENUM_PREFIXES for m in enum_type}
        bound |= {c for _, c in CONSTANTS}
        self.assertEqual(enumerators - bound, set(), "header enumerators without a binding")
        for py, _ in CONSTANTS:
            self.assertIn(py, vc.__all__)

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
        for py, c in CONSTANTS:
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
                 (vc.Source, "VYRE_SOURCE_"), (vc.LogLevel, "VYRE_LOG_"),
                 (vc.GraphNodeKind, "VYRE_GRAPH_NODE_"), (vc.StepKind, "VYRE_STEP_"))

# (name in vyre_cuda, name in vyre_cuda.h) of the constants outside the enums.
CONSTANTS = (("VERSION_MAJOR", "VYRE_CUDA_VERSION_MAJOR"),
             ("WAIT_FOREVER", "VYRE_WAIT_FOREVER"),
             ("DISPATCH_FLAG_DEVICE_TIMING", "VYRE_DISPATCH_FLAG_DEVICE_TIMING"),
             ("DISPATCH_FLAG_COOPERATIVE", "VYRE_DISPATCH_FLAG_COOPERATIVE"),
             ("KERNEL_NODE_UPDATE_GRID", "VYRE_KERNEL_NODE_UPDATE_GRID"),
             ("KERNEL_NODE_UPDATE_SCALARS", "VYRE_KERNEL_NODE_UPDATE_SCALARS"))


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
                                        ("vyre_graph_destroy", vc.GraphHandle),
                                        ("vyre_sequence_destroy", vc.SequenceHandle),
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
        graph = self._closed(vc.Graph)
        self.assertStatus(vc.Status.INVALID_HANDLE, graph.replay)
        self.assertStatus(vc.Status.INVALID_HANDLE, graph.replay_async)
        self.assertStatus(vc.Status.INVALID_HANDLE, graph.info)
        self.assertStatus(vc.Status.INVALID_HANDLE, graph.node_kind, 0)
        self.assertStatus(vc.Status.INVALID_HANDLE, graph.update_kernel_node, 0, (1,))
        seq = self._closed(vc.Sequence)
        self.assertStatus(vc.Status.INVALID_HANDLE, seq.run)
        self.assertStatus(vc.Status.INVALID_HANDLE, seq.record)
        self.assertStatus(vc.Status.INVALID_HANDLE, ctx.sequence,
                          [vc.FillStep(self._sized_buffer(16))])

    def _sized_buffer(self, nbytes):
        buf = self._closed(vc.Buffer)
        buf.nbytes = nbytes
        return buf

    def test_sequence_steps_are_checked_before_the_library(self):
        buf = self._sized_buffer(16)
        step = vc.FillStep(buf.range(4), 7)
        self.assertEqual((step.offset, step.nbytes, step.value), (4, 12, 7))
        step = vc.CopyStep((buf, 8, 4), buf, nbytes=4, src_offset=2)
        self.assertEqual((step.offset, step.src_offset, step.nbytes), (8, 2, 4))
        self.assertEqual(vc.CopyStep(buf, (buf, 4, 6)).nbytes, 6)
        self.assertEqual(vc.DownloadStep(buf, offset=6).nbytes, 10)
        self.assertEqual(vc.UploadStep(buf, b"abc", offset=1).nbytes, 3)
        with self.assertRaises(TypeError) as cm:
            vc.FillStep(bytearray(4))
        self.assertIn("Fix:", str(cm.exception))
        ctx = self._closed(vc.Context)
        with self.assertRaises(ValueError) as cm:
            vc.Sequence(ctx, [vc.Repeat(2, [vc.FillStep(buf)]), vc.Repeat(2, [vc.FillStep(buf)])])
        self.assertIn("Fix:", str(cm.exception))
        with self.assertRaises(TypeError):
            vc.Sequence(ctx, [vc.Repeat(2, [vc.Repeat(2, [vc.FillStep(buf)])])])
        with self.assertRaises(TypeError):
            vc.Sequence(ctx, ["not a step"])

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


    def test_graphs_and_sequences_release_their_driver_objects(self):
        before = fake_stats()
        rng = random.Random(11)
        n = 300
        a, b = random_u32(n, rng), random_u32(n, rng)
        with vc.Context() as ctx:
            prog = ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
            graph = prog.record([a, b, 4 * n], params=[n])
            self.assertEqual(fake_stats().kernel_launches, before.kernel_launches,
                             "recording launched a kernel")
            check_sum(self, a, b, graph.replay([a, b, 4 * n])[2], "fake graph")
            mid = fake_stats()
            self.assertEqual(mid.graph_launches - before.graph_launches, 1)
            self.assertGreaterEqual(mid.graph_execs_live - before.graph_execs_live, 1)
            # The inputs the device already holds are not copied again.
            check_sum(self, a, b, graph.replay([a, b, 4 * n])[2], "fake graph again")
            self.assertEqual(fake_stats().memcpy_htod, mid.memcpy_htod)
            da, db, dout = ctx.upload(a), ctx.upload(b), ctx.alloc(4 * n)
            seq = ctx.sequence([vc.DispatchStep(prog, [da, db, dout], params=[n]),
                                vc.DownloadStep(dout)])
            check_sum(self, a, b, seq.run()[0], "fake sequence")
            seq_graph = seq.record()
            check_sum(self, a, b, seq_graph.replay()[0], "fake sequence graph")
            self.assertEqual(ctx.telemetry()["live_graphs"], 2)
            self.assertEqual(ctx.telemetry()["live_sequences"], 1)
            # Left open on purpose: closing the context must release them.
        after = fake_stats()
        for field in ("device_allocations_live", "pinned_allocations_live", "modules_live",
                      "streams_live", "events_live", "primary_context_retains",
                      "graphs_live", "graph_execs_live", "misuse_errors"):
            self.assertEqual(getattr(after, field), getattr(before, field), field)
        # Their close() after the context's is a no-op.
        graph.close()
        seq_graph.close()
        seq.close()


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


class GraphTest(unittest.TestCase):
    """Graphs and sequences on real kernels, or on the fake driver (which runs
    vyre_test_add_u32 and vyre_test_inc_u32 on the host); skipped without a
    GPU unless VYRE_CUDA_REQUIRE_GPU=1."""

    @classmethod
    def setUpClass(cls):
        try:
            cls.ctx = vc.Context()
        except vc.VyreError as e:
            if e.status in NO_GPU_STATUSES and not REQUIRE_GPU:
                raise unittest.SkipTest(f"no usable GPU: {e}")
            raise
        cls.add = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                  workgroup_size=256)
        cls.inc = cls.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS,
                                  workgroup_size=256)
        cls.rng = random.Random()
        seed = random.randrange(2 ** 32)
        cls.rng.seed(seed)
        print(f"GraphTest data seed {seed}", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.inc.close()
        cls.add.close()
        cls.ctx.close()

    def data(self, n):
        return random_u32(n, self.rng), random_u32(n, self.rng)

    def expect_status(self, status, fn, *args, **kwargs):
        with self.assertRaises(vc.VyreError) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertEqual(e.status, status, str(e))
        self.assertEqual(e.status_name, "VYRE_STATUS_" + status.name)
        self.assertIn("Fix:", e.message)
        return e

    @staticmethod
    def u32(data):
        out = array.array("I")
        out.frombytes(bytes(data))
        return out

    def test_host_graph_replay(self):
        n = 1000
        a, b = self.data(n)
        before = self.ctx.telemetry()
        with self.add.record([a, b, 4 * n], params=[n]) as graph:
            info = graph.info()
            self.assertFalse(info["from_sequence"])
            self.assertFalse(graph.from_sequence)
            self.assertIs(graph.program, self.add)
            self.assertEqual(info["context"], self.ctx.handle)
            self.assertEqual(info["element_count"], n)
            self.assertEqual(info["capacity_elements"], 1024)
            self.assertEqual(info["host_input_bytes"], 8 * n)
            self.assertEqual(info["host_output_bytes"], 4 * n)
            self.assertEqual(info["replays"], 0)
            kinds = graph.node_kinds()
            self.assertEqual(len(kinds), info["node_count"])
            self.assertEqual(info["kernel_node_count"], 1)
            self.assertEqual(kinds.count(vc.GraphNodeKind.KERNEL), 1)
            self.assertEqual(kinds.count(vc.GraphNodeKind.MEMCPY), 3)  # a and b in, out back
            self.assertEqual(graph.kernel_nodes(), [kinds.index(vc.GraphNodeKind.KERNEL)])
            # Recording runs nothing.
            self.assertEqual(self.ctx.telemetry()["graph_replays"], before["graph_replays"])

            a2, b2 = self.data(n)
            outs = graph.replay([a2, b2, 4 * n])
            self.assertIsNone(outs[0])
            self.assertIsInstance(outs[2], bytearray)
            check_sum(self, a2, b2, outs[2], "graph replay")
            self.assertGreater(outs.timing["wall_ns"], 0)
            # The same inputs again, into a given buffer: the graph without
            # the input copies runs.
            skipped = self.ctx.telemetry()["graph_uploads_skipped"]
            out = array.array("I", [0xA5A5A5A5]) * n
            outs = graph.replay([a2, b2, out])
            self.assertIs(outs[2], out)
            check_sum(self, a2, b2, out.tobytes(), "unchanged inputs")
            self.assertEqual(self.ctx.telemetry()["graph_uploads_skipped"], skipped + 1)
            # Asynchronously, with new inputs.
            a3, b3 = self.data(n)
            pending = graph.replay_async([a3, b3, 4 * n], flags=vc.DISPATCH_FLAG_DEVICE_TIMING)
            self.assertIsInstance(pending, vc.Pending)
            with pending:
                self.assertIn(pending.poll(), (True, False))
                outs = pending.wait()
                self.assertGreater(pending.timing()["wall_ns"], 0)
            check_sum(self, a3, b3, outs[2], "async replay")
            self.assertEqual(graph.info()["replays"], 3)
            after = self.ctx.telemetry()
            self.assertEqual(after["graph_replays"] - before["graph_replays"], 3)
            self.assertEqual(after["graph_records"] - before["graph_records"], 1)
            self.assertEqual(after["live_graphs"], before["live_graphs"] + 1)
        self.assertTrue(graph.closed)
        self.assertEqual(self.ctx.telemetry()["live_graphs"], before["live_graphs"])
        self.expect_status(vc.Status.INVALID_HANDLE, graph.info)

    def test_replay_shape_mismatch(self):
        n = 512
        a, b = self.data(n)
        with self.add.record([a, b, 4 * n], params=[n]) as graph:
            a2, b2 = self.data(n + 1)
            e = self.expect_status(vc.Status.SHAPE_MISMATCH, graph.replay,
                                   [a2, b2, 4 * (n + 1)])
            self.assertEqual(e.call, "vyre_graph_replay")
            self.assertIn("Fix:", str(e))
            self.expect_status(vc.Status.SHAPE_MISMATCH, graph.replay_async,
                               [a2, b2, 4 * (n + 1)])
            self.expect_status(vc.Status.SHAPE_MISMATCH, graph.replay, [a, b])  # binding count
            with self.ctx.upload(a) as da:  # a RESIDENT binding where HOST was recorded
                self.expect_status(vc.Status.SHAPE_MISMATCH, graph.replay, [da, b, 4 * n])
            # A HOST graph needs this replay's host data.
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.replay)
            self.expect_status(vc.Status.LIMIT_EXCEEDED, graph.replay, [a, b, 4 * n],
                               element_count=2 * n + 1)
            # The failures changed nothing.
            check_sum(self, a, b, graph.replay([a, b, 4 * n])[2], "after the mismatches")

    def test_resident_graph_rebind_and_element_count(self):
        n = 1000
        a, b = self.data(n)
        a2, b2 = self.data(n)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout, self.ctx.upload(a2) as da2, \
                self.ctx.upload(b2) as db2, self.ctx.alloc(4 * n) as dout2, \
                self.add.record([da, db, dout], params=[n]) as graph:
            outs = graph.replay()
            self.assertEqual(list(outs), [None, None, None])
            check_sum(self, a, b, dout.download(), "resident replay")
            graph.replay([da2, db2.range(), (dout2, 0, 4 * n)])
            check_sum(self, a2, b2, dout2.download(), "rebound replay")
            # The new ranges stay bound; fewer elements with new words.
            m = 600
            graph.replay(params=[m], element_count=m)
            self.assertEqual(graph.info()["element_count"], m)
            got = self.u32(dout2.download())
            check_sum(self, a2[:m], b2[:m], got[:m].tobytes(), "element_count")
            self.assertEqual(set(got[m:]), {0}, "the graph zeroes its OUTPUT binding")
            self.expect_status(vc.Status.LIMIT_EXCEEDED, graph.replay, element_count=1025)
            # A freed buffer is refused until rebound.
            tmp = self.ctx.alloc(4 * n)
            graph.replay([da, db, tmp], params=[n], element_count=n)
            tmp.close()
            self.expect_status(vc.Status.STALE_HANDLE, graph.replay)
            graph.replay([da, db, dout])
            check_sum(self, a, b, dout.download(), "rebound after a free")

    def test_update_kernel_node(self):
        n = 1000
        a, b = self.data(n)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout, \
                self.add.record([da, db, dout], params=[n]) as graph:
            kernels = graph.kernel_nodes()
            self.assertEqual(len(kernels), 1)
            graph.update_kernel_node(kernels[0], grid=1)  # one block of 256 threads
            graph.replay()
            got = self.u32(dout.download())
            check_sum(self, a[:256], b[:256], got[:256].tobytes(), "one block")
            self.assertEqual(set(got[256:]), {0})
            graph.update_kernel_node(kernels[0], grid=(4, 1, 1))
            graph.replay()
            check_sum(self, a, b, dout.download(), "four blocks")
            memset = graph.node_kinds().index(vc.GraphNodeKind.MEMSET)
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.update_kernel_node, memset,
                               grid=1)
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.update_kernel_node,
                               kernels[0])  # no change asked for
            self.expect_status(vc.Status.OUT_OF_RANGE, graph.node_kind, 10 ** 6)

    def test_sequence_run_matches_its_graph(self):
        n = 1000
        mask = 0xFFFFFFFF
        a, b = self.data(n)
        bufs = [self.ctx.alloc(4 * n) for _ in range(4)]
        da, db, dout, dacc = bufs
        host_out = bytearray(4 * n)
        acc_out = array.array("I", [0]) * n
        try:
            seq = self.ctx.sequence([
                vc.UploadStep(da, a),
                vc.UploadStep(db, b),
                vc.FillStep(dacc, 0),
                vc.Repeat(3, [
                    vc.DispatchStep(self.add, [da, db, dout], params=[n]),  # out = a + b
                    vc.CopyStep(da, dout),                                   # a = out
                    vc.DispatchStep(self.inc, [dacc], params=[n], fixpoint_iterations=2),
                ]),
                vc.DownloadStep(dout, host_out),
                vc.DownloadStep(dacc, acc_out),
            ])
            with seq:
                runs = self.ctx.telemetry()["sequence_runs"]
                outs = seq.run()
                self.assertEqual(self.ctx.telemetry()["sequence_runs"], runs + 1)
                self.assertIs(outs[0], host_out)
                self.assertIs(outs[1], acc_out)
                self.assertGreater(outs.timing["wall_ns"], 0)
                b3 = array.array("I", ((3 * x) & mask for x in b))
                check_sum(self, a, b3, host_out, "sequence run")
                self.assertEqual(set(acc_out), {6})
                eager_host = bytes(host_out) + acc_out.tobytes()
                eager_bufs = [bytes(buf.download()) for buf in bufs]

                def scramble():
                    for buf in bufs:
                        buf.upload(b"\x5a" * (4 * n))
                    host_out[:] = bytes(4 * n)  # same size: allowed while pinned
                    for i in range(n):
                        acc_out[i] = 0

                with seq.record() as graph:
                    info = graph.info()
                    self.assertTrue(info["from_sequence"])
                    self.assertTrue(graph.from_sequence)
                    self.assertIsNone(graph.program)
                    kinds = graph.node_kinds()
                    self.assertEqual(len(kinds), info["node_count"])
                    self.assertEqual(kinds.count(vc.GraphNodeKind.KERNEL), 9)  # 3 x (1 + 2)
                    self.assertEqual(info["kernel_node_count"], 9)
                    scramble()
                    outs = graph.replay()
                    self.assertIs(outs[0], host_out)
                    self.assertIs(outs[1], acc_out)
                    self.assertEqual(bytes(host_out) + acc_out.tobytes(), eager_host)
                    self.assertEqual([bytes(buf.download()) for buf in bufs], eager_bufs)
                    # Asynchronously: the downloads land at the wait.
                    scramble()
                    with graph.replay_async() as pending:
                        outs = pending.wait()
                    self.assertIs(outs[0], host_out)
                    self.assertEqual(bytes(host_out) + acc_out.tobytes(), eager_host)
                    self.assertEqual([bytes(buf.download()) for buf in bufs], eager_bufs)
                    # A sequence graph takes no bindings.
                    self.expect_status(vc.Status.INVALID_ARGUMENT, graph.replay, [da])
                # Writable upload data is read in place at every run.
                a[0] = (a[0] + 1) & mask
                seq.run()
                check_sum(self, a, b3, host_out, "run after changing the upload data")
                graph = seq.record()
            # The graph keeps the sequence's steps and host memory past its close().
            self.assertTrue(seq.closed)
            with graph:
                scramble()
                graph.replay()
                check_sum(self, a, b3, host_out, "graph of a closed sequence")
                self.assertEqual(set(acc_out), {6})
        finally:
            for buf in bufs:
                buf.close()

    def test_sequence_errors(self):
        with self.ctx.alloc(64) as buf:
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.sequence, [])
            self.expect_status(vc.Status.OUT_OF_RANGE, self.ctx.sequence,
                               [vc.FillStep(buf, 1, nbytes=128)])
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.sequence,
                               [vc.FillStep(buf, 256)])
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.sequence,
                               [vc.CopyStep((buf, 8, 16), (buf, 0, 16))])  # overlap
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.sequence,
                               [vc.Repeat(0, [vc.FillStep(buf)])])
            # Dispatch steps bind resident buffers only.
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.sequence,
                               [vc.DispatchStep(self.add, [b"\0" * 16, buf.range(0, 16), 16],
                                                params=[4])])
            with self.ctx.alloc(64) as other:
                seq = self.ctx.sequence([vc.FillStep(other, 3), vc.CopyStep(buf, other)])
            with seq:
                self.expect_status(vc.Status.STALE_HANDLE, seq.run)
                self.expect_status(vc.Status.STALE_HANDLE, seq.record)

    def test_numpy_replay(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        n = 777
        a = np.arange(n, dtype=np.uint32)
        b = np.full(n, 5, dtype=np.uint32)
        out = np.zeros(n, dtype=np.uint32)
        with self.add.record([a, b, out], params=[n]) as graph:
            res = graph.replay([a * 2, b, out])[2]
            self.assertIs(res, out)
            np.testing.assert_array_equal(out, a * 2 + b)
            res = graph.replay([a, b[::-1].copy(), 4 * n])[2]
            np.testing.assert_array_equal(np.frombuffer(res, dtype=np.uint32), a + 5)


if __name__ == "__main__":
    unittest.main()
