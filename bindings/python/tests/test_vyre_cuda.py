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
import inspect
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
# The test kernels' PTX: tests/kernels, the one source the bindings share.
KERNELS_DIR = os.path.join(REPO, "tests", "kernels")


def kernel_ptx(name):
    """The text of tests/kernels/NAME (a test kernel's PTX)."""
    with open(os.path.join(KERNELS_DIR, name), encoding="utf-8", newline="") as f:
        return f.read()


# vyre_test_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
# out[i] = a[i] + b[i] for i < params[0] (the contract's shared test kernel).
ADD_PTX = kernel_ptx("add_u32.ptx")

ADD_BINDINGS = [vc.Binding(vc.Role.INPUT, name="a"), vc.Binding(vc.Role.INPUT, name="b"),
                vc.Binding(vc.Role.OUTPUT, name="out")]

# vyre_test_inc_u32(u32* data, const u32* params): data[i] += 1 for i < params[0]
# (the contract's shared test kernel; the fake driver runs it on the host).
INC_PTX = kernel_ptx("inc_u32.ptx")

INC_BINDINGS = [vc.Binding(vc.Role.INPUT_OUTPUT, name="data")]

# The first failure of each kind that means "no usable GPU here".
NO_GPU_STATUSES = (vc.Status.NO_DRIVER, vc.Status.NO_DEVICE, vc.Status.DRIVER_TOO_OLD)


def gpu_context():
    """A Context on device 0, or SkipTest where this machine cannot run CUDA
    work (a failure instead under VYRE_CUDA_REQUIRE_GPU=1 or the fake driver)."""
    try:
        return vc.Context()
    except vc.VyreError as e:
        if e.status in NO_GPU_STATUSES and not REQUIRE_GPU:
            raise unittest.SkipTest(f"no usable GPU: {e}")
        raise


def seeded_rng(label):
    """A random.Random with a fresh seed, printed so a failure can be rerun."""
    rng = random.Random()
    seed = random.randrange(2 ** 32)
    rng.seed(seed)
    print(f"{label} data seed {seed}", file=sys.stderr)
    return rng


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
        missing_optional = []
        for name in vc._PROTOTYPES:
            if name in vc._OPTIONAL and not hasattr(lib, name):
                missing_optional.append(name)
                continue
            self.assertTrue(hasattr(lib, name), name)
            self.assertTrue(vc.has_function(name), name)
        if missing_optional:
            self.assertFalse(any(vc.has_function(n) for n in missing_optional))
            self.skipTest(f"the library predates {missing_optional}")

    def test_enums_cover_the_header(self):
        if not os.path.exists(HEADER):
            self.skipTest(f"{HEADER} not found (set VYRE_CUDA_INCLUDE_DIR)")
        with open(HEADER, encoding="utf-8") as f:
            text = f.read()
        # A flag of an anonymous enum may share a named enum's prefix
        # (VYRE_GRAPH_NODE_SET_RAW): it is bound as a constant instead.
        constants = {c for _, c in CONSTANTS}
        for enum_type, prefix in ENUM_PREFIXES:
            in_header = {m for m in re.findall(prefix + r"(\w+)\s*=", text)
                         if not m.endswith("FORCE32") and prefix + m not in constants}
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
                 (vc.GraphNodeKind, "VYRE_GRAPH_NODE_"), (vc.StepKind, "VYRE_STEP_"),
                 (vc.EgraphDevice, "VYRE_EGRAPH_DEVICE_"),
                 (vc.EgraphColumn, "VYRE_EGRAPH_COLUMN_"),
                 (vc.CaptureMode, "VYRE_CAPTURE_MODE_"))

# (name in vyre_cuda, name in vyre_cuda.h) of the constants outside the enums.
CONSTANTS = (("VERSION_MAJOR", "VYRE_CUDA_VERSION_MAJOR"),
             ("WAIT_FOREVER", "VYRE_WAIT_FOREVER"),
             ("DISPATCH_FLAG_DEVICE_TIMING", "VYRE_DISPATCH_FLAG_DEVICE_TIMING"),
             ("DISPATCH_FLAG_COOPERATIVE", "VYRE_DISPATCH_FLAG_COOPERATIVE"),
             ("KERNEL_NODE_UPDATE_GRID", "VYRE_KERNEL_NODE_UPDATE_GRID"),
             ("KERNEL_NODE_UPDATE_SCALARS", "VYRE_KERNEL_NODE_UPDATE_SCALARS"),
             ("EGRAPH_REBUILD_RESET", "VYRE_EGRAPH_REBUILD_RESET"),
             ("EGRAPH_REBUILD_DEVICE_TIMING", "VYRE_EGRAPH_REBUILD_DEVICE_TIMING"),
             ("EGRAPH_REBUILD_COLLIDING_HASH", "VYRE_EGRAPH_REBUILD_COLLIDING_HASH"),
             ("EGRAPH_REBUILD_DEVICE_ROUNDS", "VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS"),
             ("BUFFER_INFO_FLAG_BORROWED", "VYRE_BUFFER_INFO_FLAG_BORROWED"),
             ("BUFFER_COPY_FLAG_STAGED", "VYRE_BUFFER_COPY_FLAG_STAGED"),
             ("BUFFER_INFO_FLAG_IMPORTED", "VYRE_BUFFER_INFO_FLAG_IMPORTED"),
             ("IPC_HANDLE_BYTES", "VYRE_IPC_HANDLE_BYTES"),
             ("GRAPH_NODE_MAX_ARGUMENTS", "VYRE_GRAPH_NODE_MAX_ARGUMENTS"),
             ("GRAPH_NODE_SET_RAW", "VYRE_GRAPH_NODE_SET_RAW"))


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
                                        ("vyre_egraph_image_destroy",
                                         vc.EgraphImageHandle),
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
        image = self._closed(vc.EgraphImage)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.info)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.read, "row_ops")
        self.assertStatus(vc.Status.INVALID_HANDLE, image.write, "row_ops", [1])
        self.assertStatus(vc.Status.INVALID_HANDLE, image.pass_pairs)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.rebuild)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.rebuild_async)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.append, [0], [1], [0], [0], [])
        self.assertStatus(vc.Status.INVALID_HANDLE, image.append_nodes, [(0, 1, ())])
        self.assertStatus(vc.Status.INVALID_HANDLE, image.changed_pairs)
        self.assertStatus(vc.Status.INVALID_HANDLE, image.changed_count)
        # A GPU image on a closed context.
        self.assertStatus(vc.Status.INVALID_HANDLE,
                          lambda: vc.EgraphImage.from_nodes([(0, 1, ())], context=ctx))

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

    def test_errors_without_a_log_have_an_empty_one(self):
        e = self.assertStatus(vc.Status.INVALID_HANDLE, self._closed(vc.Buffer).info)
        self.assertEqual(e.log, "")
        self.assertEqual(vc.last_error_log(), "")
        # Reading the log does not clear the last error.
        self.assertEqual(vc.last_error()[0], vc.Status.INVALID_HANDLE)
        first_line = e.message.split("\n")[0]
        self.assertLessEqual(len(first_line.encode()), 1023)
        self.assertIn(". Fix: ", first_line)
        self.assertTrue(first_line.endswith("."), first_line)


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

    def test_inout_marshals_distinct_input_and_output(self):
        """InOut(src, dst): host_input is src's memory, host_output dst's;
        sizes and writability are checked before any call (no driver needed)."""
        src = array.array("I", range(8))
        dst = bytearray(32)
        structs, keep, keep_out, outputs, _, imports = vc._marshal_bindings(
            INC_BINDINGS, [vc.InOut(src, dst)])
        s = structs[0]
        self.assertEqual(s.source, vc.Source.HOST)
        self.assertEqual(s.host_bytes, 32)
        self.assertEqual(s.host_input, src.buffer_info()[0])  # writable src: in place
        self.assertEqual(s.host_output, ctypes.addressof(ctypes.c_char.from_buffer(dst)))
        self.assertNotEqual(s.host_input, s.host_output)
        self.assertIs(outputs[0], dst)
        del structs, keep, keep_out
        imports.release()
        # Read-only src (bytes) is read in place too.
        data = bytes(range(32))
        structs, keep, keep_out, outputs, _, _ = vc._marshal_bindings(
            INC_BINDINGS, [vc.InOut(data, array.array("I", bytes(32)))])
        self.assertEqual(ctypes.string_at(structs[0].host_input, 32), data)
        self.assertIsInstance(outputs[0], array.array)
        bad = [
            (vc.InOut(src, bytearray(28)), ValueError, "32 bytes"),
            (vc.InOut(src, bytearray(36)), ValueError, "32 bytes"),
            (vc.InOut(src, bytes(32)), TypeError, "read-only"),
            (vc.InOut(src, memoryview(bytearray(32)).toreadonly()), TypeError, "read-only"),
            (vc.InOut(src, memoryview(bytearray(64))[::2]), ValueError, "contiguous"),
            (vc.InOut(object(), bytearray(32)), TypeError, "buffer protocol"),
        ]
        for entry, error, words in bad:
            with self.subTest(entry=entry):
                with self.assertRaises(error) as cm:
                    vc._marshal_bindings(INC_BINDINGS, [entry])
                message = str(cm.exception)
                self.assertIn("binding 0", message)
                self.assertIn(words, message)
                self.assertIn("Fix:", message)
        # Only INPUT_OUTPUT bindings take one.
        for role in (vc.Role.INPUT, vc.Role.OUTPUT):
            with self.subTest(role=role):
                with self.assertRaises(TypeError) as cm:
                    vc._marshal_bindings([vc.Binding(role)], [vc.InOut(src, dst)])
                self.assertIn("INPUT_OUTPUT", str(cm.exception))
                self.assertIn("Fix:", str(cm.exception))
        self.assertEqual(list(src), list(range(8)))

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


# ---------------------------------------------------------------------------
# E-graph images
# ---------------------------------------------------------------------------

# A small e-graph whose closure is known: leaves a (class 0) and b (1); f(a)
# in 2 and f(b) in 3; Const(1) in 4 and Const(2) in 5 (the payload is in the
# op id); g(Const(1), a) in 6 and g(Const(2), b) in 7; h(f(a)) in 8 and
# h(f(b)) in 9. Nothing is congruent until a union says a = b.
OP_A, OP_B, OP_F, OP_CONST1, OP_CONST2, OP_G, OP_H = 1, 2, 10, 1001, 1002, 20, 30
SMALL_NODES = [(0, OP_A, ()), (1, OP_B, ()), (2, OP_F, (0,)), (3, OP_F, (1,)),
               (4, OP_CONST1, ()), (5, OP_CONST2, ()), (6, OP_G, (4, 0)), (7, OP_G, (5, 1)),
               (8, OP_H, (2,)), (9, OP_H, (3,))]
SMALL_COLUMNS = {
    "row_classes": list(range(10)),
    "row_ops": [OP_A, OP_B, OP_F, OP_F, OP_CONST1, OP_CONST2, OP_G, OP_G, OP_H, OP_H],
    "child_offsets": [0, 0, 0, 1, 2, 2, 2, 4, 6, 7],
    "child_lengths": [0, 0, 1, 1, 0, 0, 2, 2, 1, 1],
    "children": [0, 1, 4, 0, 5, 1, 2, 3],
}
# After the union a = b: f(a) = f(b) (round 1), so h(f(a)) = h(f(b)) (round
# 2), and round 3 finds nothing. The g rows differ in their Const children.
SMALL_IDENTITY = list(range(10))
SMALL_AFTER_ONE_ROUND = [0, 0, 2, 2, 4, 5, 6, 7, 8, 9]
SMALL_CLOSED = [0, 0, 2, 2, 4, 5, 6, 7, 8, 8]


def small_image(**kwargs):
    return vc.EgraphImage.from_nodes(SMALL_NODES, **kwargs)


def random_egraph(rng, classes, rows):
    """(class, op, children) rows with many congruences: few ops, few
    classes; op 5 takes one or two children, so arity alone separates some."""
    nodes = []
    for _ in range(rows):
        op = rng.randrange(6)
        arity = 1 + rng.randrange(2) if op == 5 else op % 3
        nodes.append((rng.randrange(classes), op,
                      tuple(rng.randrange(classes) for _ in range(arity))))
    return nodes


def naive_closure(nodes, classes, unions=(), canonical=None, max_rounds=0):
    """The congruence closure the library promises, written plainly: unions,
    then snapshot rounds until one merges nothing. Returns (canonical,
    rounds, merges, union_merges)."""
    parent = list(range(classes)) if canonical is None else list(canonical)

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    def union(a, b):
        a, b = find(a), find(b)
        if a == b:
            return 0
        parent[max(a, b)] = min(a, b)
        return 1

    union_merges = sum(union(a, b) for a, b in unions)
    rounds = merges = 0
    while True:
        rounds += 1
        first, congruent = {}, []
        for klass, op, kids in nodes:
            form = (op, len(kids)) + tuple(find(k) for k in kids)
            if form in first:
                congruent.append((first[form], klass))
            else:
                first[form] = klass
        merged = sum(union(a, b) for a, b in congruent)
        merges += merged
        if merged == 0 or (max_rounds and rounds >= max_rounds):
            break
    return [find(x) for x in range(classes)], rounds, merges, union_merges


def naive_pass(nodes, canonical):
    """Per group of congruent rows, (m, c) for its minimum canonical class m
    and every other canonical class c; sorted."""
    groups = {}
    for klass, op, kids in nodes:
        form = (op, len(kids)) + tuple(canonical[k] for k in kids)
        groups.setdefault(form, set()).add(canonical[klass])
    pairs = set()
    for members in groups.values():
        m = min(members)
        pairs.update((m, c) for c in members if c != m)
    return sorted(pairs)


# A leaf op no random row uses: the fresh class it names is alone until a
# union joins it.
FRESH_LEAF = 100


def growth(rng, nodes, old):
    """Rows to append to an image of `nodes` (classes below `old`): returns
    (rows, new, union, twin). new classes are numbered from old; the rows
    are in old and new classes with children naming both, and one row, in
    new class old + 1, is the old row `twin`'s op with a child swapped for
    the fresh leaf class old: `union` (that leaf with the swapped child)
    makes it congruent to the twin."""
    new = 2 + rng.randrange(8)
    total = old + new
    leaf, twin_class = old, old + 1
    twin = next((i for i, node in enumerate(nodes) if node[2]), 0)
    _, op, kids = nodes[twin]
    kids = list(kids)
    if kids:
        union = (leaf, kids[0])
        kids[0] = leaf
    else:  # a leaf twin is congruent at once; the union joins the fresh leaf
        union = (leaf, nodes[twin][0])
    rows = [(leaf, FRESH_LEAF, ()), (twin_class, op, tuple(kids))]
    for _ in range(1 + rng.randrange(12)):
        rows.append((rng.randrange(total), rng.randrange(6),
                     tuple(rng.randrange(total) for _ in range(rng.randrange(3)))))
    return rows, new, union, twin


def node_columns(nodes):
    """(row_classes, row_ops, child_offsets, child_lengths, children) of
    nodes, children in row order from 0."""
    offsets, children = [], []
    for _, _, kids in nodes:
        offsets.append(len(children))
        children.extend(kids)
    return ([n[0] for n in nodes], [n[1] for n in nodes], offsets,
            [len(n[2]) for n in nodes], children)


def changed_diff(before, after):
    """(class, after[class]) wherever the canonical class changed, sorted by
    class: what changed_pairs() lists."""
    return [(c, after[c]) for c in range(len(after)) if before[c] != after[c]]


class EgraphTestMixin:
    def expect_status(self, status, fn, *args, call=None, **kwargs):
        with self.assertRaises(vc.VyreError) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertEqual(e.status, status, str(e))
        self.assertEqual(e.status_name, "VYRE_STATUS_" + status.name)
        self.assertIn("Fix:", e.message)
        self.assertIn("Fix:", str(e))
        if call is not None:
            self.assertEqual(e.call, call)
        return e

    def expect_python_error(self, error, fn, *args, **kwargs):
        with self.assertRaises(error) as cm:
            fn(*args, **kwargs)
        self.assertIn("Fix:", str(cm.exception))
        return cm.exception

    def check_result(self, r, **expected):
        got = {name: getattr(r, name) for name in expected}
        self.assertEqual(got, expected, repr(r))

    def check_small_closure(self, make_image):
        """The known closure of SMALL_NODES, step by step (the same on every
        device)."""
        with make_image() as img:
            self.assertEqual(img.pass_pairs(), [])
            self.assertEqual(img.pass_count(), 0)
            # Nothing is congruent: one round that finds nothing.
            r = img.rebuild()
            self.assertIsInstance(r, vc.EgraphRebuildResult)
            self.check_result(r, rounds=1, merges=0, union_merges=0, classes_before=10,
                              classes_after=10)
            self.assertEqual(r.canonical, SMALL_IDENTITY)
            self.assertIsNone(r.timing)
            self.assertGreater(r.wall_ns, 0)
            self.assertEqual(set(r.as_dict()), set(vc.EgraphRebuildResult._FIELDS))
            # a = b, one round only: f(a) = f(b) merges; h(f(a)) = h(f(b)) is
            # left for the next rebuild, which the pass now reports.
            r = img.rebuild(unions=[(1, 0)], max_rounds=1)
            self.check_result(r, rounds=1, merges=1, union_merges=1, classes_before=10,
                              classes_after=8)
            self.assertEqual(r.canonical, SMALL_AFTER_ONE_ROUND)
            self.assertEqual(img.canonical_classes(), SMALL_AFTER_ONE_ROUND)
            self.assertEqual(img.info()["canonical_class_count"], 8)
            self.assertEqual(img.pass_count(), 1)
            self.assertEqual(img.pass_pairs(), [(8, 9)])
            self.assertEqual(img.pass_pairs(capacity=1), [(8, 9)])
            self.assertEqual(img.pass_pairs(capacity=5), [(8, 9)])
            e = self.expect_status(vc.Status.OUT_OF_RANGE, img.pass_pairs, capacity=0,
                                   call="vyre_egraph_pass")
            self.assertIn("at least 1 pairs", e.message)
            # The pass merged nothing; the rebuild goes on from the state kept.
            self.assertEqual(img.canonical_classes(), SMALL_AFTER_ONE_ROUND)
            r = img.rebuild()
            self.check_result(r, rounds=2, merges=1, union_merges=0, classes_before=8,
                              classes_after=7)
            self.assertEqual(r.canonical, SMALL_CLOSED)
            self.assertEqual(img.pass_pairs(), [])
            self.assertEqual(img.info()["canonical_class_count"], 7)
            # A closed image: one round, nothing merged; unions of merged
            # classes merge nothing.
            r = img.rebuild(unions=[(0, 1), (9, 8), (3, 3)])
            self.check_result(r, rounds=1, merges=0, union_merges=0, classes_before=7,
                              classes_after=7)
            # From scratch in one rebuild: the fixpoint takes 3 rounds.
            r = img.rebuild(unions=[(0, 1)], reset=True)
            self.check_result(r, rounds=3, merges=2, union_merges=1, classes_before=10,
                              classes_after=7)
            self.assertEqual(r.canonical, SMALL_CLOSED)

    def image_state(self, img):
        """info, every column and the changed list: a refused append must
        leave all of it as it was."""
        return (img.info(), {name: img.read(name) for name in
                             ("row_classes", "row_ops", "child_offsets", "child_lengths",
                              "row_signatures", "children", "canonical_classes")},
                img.changed_pairs(), (img.row_count, img.class_count, img.child_count))

    def check_refused_appends(self, img, rows, new):
        """Appends the library (or the binding) refuses, each changing
        nothing."""
        before = self.image_state(img)
        total = img.class_count + new
        classes, ops, offsets, lengths, children = node_columns(rows)
        append = "vyre_egraph_image_append"
        e = self.expect_status(vc.Status.INVALID_ARGUMENT, img.append, classes[:-1] + [total],
                               ops, offsets, lengths, children, class_count=new, call=append)
        self.assertIn("row_classes[", e.message)
        # The same rows without their new classes name classes past the count.
        self.expect_status(vc.Status.INVALID_ARGUMENT, img.append, classes, ops, offsets,
                           lengths, children, class_count=0, call=append)
        longer = lengths[:-1] + [lengths[-1] + 1]
        e = self.expect_status(vc.Status.INVALID_ARGUMENT, img.append, classes, ops, offsets,
                               longer, children + [total], class_count=new, call=append)
        self.assertIn("children[", e.message)
        # A child range past the append's children (offsets index them).
        self.expect_status(vc.Status.OUT_OF_RANGE, img.append, classes, ops, offsets, longer,
                           children, class_count=new, call=append)
        # What the binding checks before the library.
        self.expect_python_error(ValueError, img.append, classes, ops[1:], offsets, lengths,
                                 children, class_count=new)
        self.expect_python_error(ValueError, img.append, classes, ops, offsets, lengths,
                                 children, class_count=new, row_signatures=[1] * (len(rows) + 1))
        self.expect_python_error(ValueError, img.append, classes, ops, offsets, lengths,
                                 children, class_count=-1)
        self.expect_python_error(ValueError, img.append, classes[:-1] + [-1], ops, offsets,
                                 lengths, children, class_count=new)
        self.expect_python_error(TypeError, img.append_nodes, [(0, 1)])
        self.assertEqual(self.image_state(img), before, "a refused append changed the image")

    def check_appends_without_rebuild(self, make_image):
        """Appends and refused appends without a rebuild, what the fake
        driver checks too: it validates appends on the host but runs none of
        the other e-graph kernels, so the appended rows' child offsets
        (rebased on the device), the signatures and the canonical classes are
        not compared. make_image(nodes, classes, **capacities) builds the
        image."""
        rng = random.Random(28)
        nodes = random_egraph(rng, 12, 30)
        reserved = dict(row_capacity=64, class_capacity=32, child_capacity=96)
        with make_image(nodes, 12, **reserved) as img:
            info = img.info()
            for name in ("row", "class", "child"):
                self.assertGreaterEqual(info[f"{name}_capacity"], reserved[f"{name}_capacity"])
            rows, new, _, _ = growth(random.Random(27), nodes, 12)
            self.check_refused_appends(img, rows, new)
            img.append_nodes(rows, class_count=new)
            combined, classes = nodes + rows, 12 + new

            def compare(label):
                got = img.info()
                self.assertEqual((got["row_count"], got["class_count"], got["child_count"],
                                  got["changed_class_count"]),
                                 (len(combined), classes, sum(len(n[2]) for n in combined), 0),
                                 label)
                for name in ("row", "class", "child"):
                    self.assertGreaterEqual(got[f"{name}_capacity"], got[f"{name}_count"], label)
                columns = node_columns(combined)
                for name, index in (("row_classes", 0), ("row_ops", 1), ("child_lengths", 3),
                                    ("children", 4)):
                    self.assertEqual(list(img.read(name)), columns[index], f"{label}: {name}")
                return got

            within = compare("within the reservation")
            for name in ("row", "class", "child"):
                self.assertEqual(within[f"{name}_capacity"], info[f"{name}_capacity"],
                                 "an append within the reservation does not grow the image")
            # Past the reservation: the image grows and keeps every row.
            more = [(i % 12, 1 + i % 4, ((i * 7) % 12,)) for i in range(64 + 7)]
            img.append_nodes(more)
            combined = combined + more
            grown = compare("past the reservation")
            self.assertGreater(grown["row_capacity"], within["row_capacity"])
            self.assertEqual(img.changed_pairs(), [])

    def check_growth(self, make_image, fresh_image, seeds=12):
        """Create, rebuild, append rows naming old and new classes, rebuild
        with a union that makes an appended row congruent to an old one:
        canonical classes against naive_closure of everything and against an
        image of everything at once; changed pairs against the diff of the
        canonical classes; info's counts and capacities; refused appends.
        make_image(nodes, classes, **capacities) and fresh_image(nodes,
        classes) build images."""
        rng = random.Random(2026)
        for seed in range(seeds):
            old = 2 + rng.randrange(30)
            nodes = random_egraph(rng, old, 4 + rng.randrange(40))
            unions1 = [(rng.randrange(old), rng.randrange(old)) for _ in range(rng.randrange(3))]
            rows, new, union, twin = growth(rng, nodes, old)
            total = old + new
            children = sum(len(n[2]) for n in nodes)
            added_children = sum(len(n[2]) for n in rows)
            # No reservation; room for the append; less than the counts
            # (taken as the counts).
            reserved = [{}, dict(row_capacity=len(nodes) + len(rows) + 5,
                                 class_capacity=total + 3,
                                 child_capacity=children + added_children + 7),
                        dict(row_capacity=1, class_capacity=1)][seed % 3]
            with self.subTest(seed=seed, **reserved), \
                    make_image(nodes, old, **reserved) as img:
                info = img.info()
                self.assertEqual((info["row_count"], info["class_count"], info["child_count"],
                                  info["changed_class_count"]), (len(nodes), old, children, 0))
                self.assertGreaterEqual(info["row_capacity"],
                                        max(len(nodes), reserved.get("row_capacity", 0)))
                self.assertGreaterEqual(info["class_capacity"],
                                        max(old, reserved.get("class_capacity", 0)))
                self.assertGreaterEqual(info["child_capacity"],
                                        max(children, reserved.get("child_capacity", 0)))
                self.assertEqual(img.changed_pairs(), [])

                # The first rebuild: every class starts alone.
                r1 = img.rebuild(unions=unions1)
                canonical1 = naive_closure(nodes, old, unions1)[0]
                self.assertEqual(r1.canonical, canonical1)
                changed1 = changed_diff(list(range(old)), canonical1)
                self.assertEqual(img.changed_pairs(), changed1)
                self.assertEqual(img.changed_count(), len(changed1))
                self.assertEqual(img.changed_pairs(capacity=len(changed1) + 3), changed1)
                self.check_result(r1, changed_class_count=len(changed1))
                self.assertEqual(img.info()["changed_class_count"], len(changed1))
                self.assertTrue(1 <= r1.full_rounds <= r1.rounds, repr(r1))
                if changed1:
                    e = self.expect_status(vc.Status.OUT_OF_RANGE, img.changed_pairs,
                                           capacity=len(changed1) - 1,
                                           call="vyre_egraph_changed_read")
                    self.assertIn(f"at least {len(changed1)} pairs", e.message)

                self.check_refused_appends(img, rows, new)

                # The append: new classes start alone, the old ones keep
                # their canonical classes, and nothing is rebuilt yet.
                room = img.info()
                img.append_nodes(rows, class_count=new)
                self.assertEqual((img.row_count, img.class_count, img.child_count),
                                 (len(nodes) + len(rows), total, children + added_children))
                info = img.info()
                self.assertEqual((info["row_count"], info["class_count"], info["child_count"]),
                                 (img.row_count, img.class_count, img.child_count))
                self.assertEqual(info["canonical_class_count"], len(set(canonical1)) + new)
                for name in ("row", "class", "child"):
                    self.assertGreaterEqual(info[f"{name}_capacity"], info[f"{name}_count"])
                    if seed % 3 == 1:  # within the reservation: not grown
                        self.assertEqual(info[f"{name}_capacity"], room[f"{name}_capacity"])
                # "The last rebuild" is still the first.
                self.assertEqual(info["changed_class_count"], len(changed1))
                self.assertEqual(img.changed_pairs(), changed1)
                combined = nodes + rows
                for name, values in zip(("row_classes", "row_ops", "child_offsets",
                                         "child_lengths", "children"),
                                        node_columns(combined)):
                    self.assertEqual(list(img.read(name)), values, name)
                start = list(canonical1) + list(range(old, total))
                self.assertEqual(list(img.canonical_classes()), start)

                # The second rebuild, with the union that makes the twin row
                # congruent to its old row (and sometimes one joining old and
                # new classes).
                unions2 = [union]
                if rng.randrange(2):
                    unions2.append((rng.randrange(old), old + rng.randrange(new)))
                r2 = img.rebuild(unions=unions2)
                everything = unions1 + unions2
                expected = naive_closure(combined, total, everything)[0]
                self.assertEqual(list(r2.canonical), expected)
                self.assertEqual(expected[old + 1], expected[nodes[twin][0]],
                                 "the appended twin row joins its old row's class")
                with fresh_image(combined, total) as at_once:
                    self.assertEqual(list(at_once.rebuild(unions=everything).canonical),
                                     expected, "an image of everything at once")
                changed2 = changed_diff(start, expected)
                self.assertEqual(img.changed_pairs(), changed2)
                self.check_result(r2, changed_class_count=len(changed2),
                                  classes_before=len(set(start)),
                                  classes_after=len(set(expected)))
                self.assertLessEqual(r2.full_rounds, r2.rounds)
                info = img.info()
                self.assertEqual((info["changed_class_count"], info["canonical_class_count"]),
                                 (len(changed2), len(set(expected))))
                self.assertEqual(img.pass_pairs(), [])

                # Classes without rows, then a rebuild that changes nothing.
                img.append([], [], [], [], [], class_count=2)
                self.assertEqual(img.class_count, total + 2)
                r3 = img.rebuild()
                self.check_result(r3, merges=0, changed_class_count=0)
                self.assertEqual(img.changed_pairs(), [])
                after = expected + [total, total + 1]
                self.assertEqual(list(r3.canonical), after)
                # reset: the changes from every class alone.
                r4 = img.rebuild(unions=everything, reset=True)
                changed4 = changed_diff(list(range(total + 2)), after)
                self.assertEqual(img.changed_pairs(), changed4)
                self.assertEqual(r4.changed_class_count, len(changed4))

    def check_random_graphs(self, make_image, seeds=12):
        """Random graphs against naive_closure and naive_pass; make_image(nodes,
        classes, seed) builds the image."""
        rng = random.Random(2024)
        for seed in range(seeds):
            classes = 8 + rng.randrange(30)
            nodes = random_egraph(rng, classes, 10 + rng.randrange(60))
            unions = [(rng.randrange(classes), rng.randrange(classes))
                      for _ in range(rng.randrange(6))]
            for colliding_hash in (False, True):
                with self.subTest(seed=seed, colliding_hash=colliding_hash), \
                        make_image(nodes, classes, seed) as img:
                    self.assertEqual(img.pass_pairs(), naive_pass(nodes, list(range(classes))))
                    r = img.rebuild(unions=unions, colliding_hash=colliding_hash)
                    canonical, rounds, merges, union_merges = naive_closure(nodes, classes,
                                                                            unions)
                    self.assertEqual(r.canonical, canonical)
                    self.check_result(r, rounds=rounds, merges=merges,
                                      union_merges=union_merges, classes_before=classes,
                                      classes_after=len(set(canonical)))
                    self.assertEqual(img.pass_pairs(), [])
                    # One round from scratch: the pass then shows what is left.
                    r = img.rebuild(unions=unions, reset=True, max_rounds=1,
                                    colliding_hash=colliding_hash)
                    one, rounds, merges, _ = naive_closure(nodes, classes, unions,
                                                           max_rounds=1)
                    self.assertEqual(r.canonical, one)
                    self.check_result(r, rounds=rounds, merges=merges)
                    self.assertEqual(img.pass_pairs(), naive_pass(nodes, one))


class EgraphCpuTest(EgraphTestMixin, unittest.TestCase):
    """E-graph images on the library's CPU reference: no driver or GPU needed."""

    def test_columns_info_and_reads(self):
        c = SMALL_COLUMNS
        inputs = {
            "lists": dict(c),
            "tuples and a generator": {k: (tuple(v) if k != "children" else iter(v))
                                       for k, v in c.items()},
            "array('I') and memoryview": {k: (array.array("I", v) if k != "row_ops"
                                              else memoryview(array.array("I", v)))
                                          for k, v in c.items()},
        }
        for label, cols in inputs.items():
            with self.subTest(label), vc.EgraphImage(**cols) as img:
                self.assertEqual(img.device, vc.EgraphDevice.CPU)
                self.assertIsNone(img.context)
                self.assertFalse(img.numpy)
                info = img.info()
                self.assertEqual(info["device"], vc.EgraphDevice.CPU)
                self.assertEqual(info["context"], 0)
                self.assertEqual((info["row_count"], info["class_count"], info["child_count"]),
                                 (10, 10, 8))
                self.assertEqual(info["canonical_class_count"], 10)
                self.assertGreater(info["bytes"], 0)
                for name, values in c.items():
                    self.assertEqual(img.read(name), values, name)
                    self.assertEqual(img.read(getattr(vc.EgraphColumn, name.upper())), values)
                self.assertEqual(img.read("canonical_classes"), SMALL_IDENTITY)
                self.assertEqual(len(img.read("row_signatures")), 10)
        # from_nodes lays the columns out the same way.
        with small_image() as img:
            for name, values in c.items():
                self.assertEqual(img.read(name), values, name)
        # An explicit class_count may exceed the ids used; classes alone stay alone.
        with small_image(class_count=12, cpu_threads=1) as img:
            self.assertEqual(img.class_count, 12)
            self.assertEqual(img.info()["class_count"], 12)
            r = img.rebuild(unions=[(1, 0), (11, 10)])
            self.assertEqual(r.canonical, SMALL_CLOSED + [10, 10])
            self.check_result(r, union_merges=2, merges=2, classes_before=12, classes_after=8)

    def test_union_closes_congruence(self):
        self.check_small_closure(lambda: small_image(cpu_threads=1))
        with small_image() as img:
            self.assertEqual(img.rebuild().rows_visited, 10)  # one round: every row

    def test_random_graphs_match_a_naive_closure(self):
        self.check_random_graphs(lambda nodes, classes, seed: vc.EgraphImage.from_nodes(
            nodes, class_count=classes, cpu_threads=seed % 3))

    def test_different_payloads_never_merge(self):
        with small_image() as img:
            # The weak hash makes the g rows (same op and arity) collide: the
            # library confirms every child and still refuses to merge them.
            for colliding_hash in (False, True):
                with self.subTest(colliding_hash=colliding_hash):
                    r = img.rebuild(unions=[(0, 1)], reset=True, colliding_hash=colliding_hash)
                    self.assertEqual(r.canonical, SMALL_CLOSED)
                    self.check_result(r, rounds=3, merges=2, union_merges=1, classes_after=7)
            # Const(1) = Const(2) by a union: now g(Const(1), a) = g(Const(2), b).
            r = img.rebuild(unions=[(5, 4)])
            self.check_result(r, rounds=2, merges=1, union_merges=1, classes_before=7,
                              classes_after=5)
            self.assertEqual(r.canonical, [0, 0, 2, 2, 4, 4, 6, 6, 8, 8])
            # RESET forgets every union.
            r = img.rebuild(reset=True)
            self.assertEqual(r.canonical, SMALL_IDENTITY)
            self.check_result(r, classes_before=10, classes_after=10, merges=0)

    def test_thread_counts_agree(self):
        for threads in (1, 0, 4):
            with self.subTest(cpu_threads=threads), small_image(cpu_threads=threads) as img:
                r = img.rebuild(unions=[(1, 0)])
                self.assertEqual(r.canonical, SMALL_CLOSED)
                self.check_result(r, rounds=3, merges=2, union_merges=1, classes_before=10,
                                  classes_after=7)

    def test_appended_rows_rebuild_like_an_image_of_everything(self):
        for threads in (1, 0):
            with self.subTest(cpu_threads=threads):
                self.check_growth(
                    lambda nodes, classes, **kw: vc.EgraphImage.from_nodes(
                        nodes, class_count=classes, cpu_threads=threads, **kw),
                    lambda nodes, classes: vc.EgraphImage.from_nodes(
                        nodes, class_count=classes, cpu_threads=threads))

    def test_appends_without_rebuilds(self):
        # The same checks as on the fake driver, on the CPU reference.
        self.check_appends_without_rebuild(
            lambda nodes, classes, **kw: vc.EgraphImage.from_nodes(nodes, class_count=classes,
                                                                   **kw))

    def test_appends_to_empty_and_small_images(self):
        # An empty image grows from nothing; class_count None counts the new
        # classes the rows name.
        with vc.EgraphImage([], [], [], [], []) as img:
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.append_nodes, SMALL_NODES[:4],
                               class_count=0, call="vyre_egraph_image_append")
            img.append_nodes(SMALL_NODES[:4])
            self.assertEqual((img.row_count, img.class_count, img.child_count), (4, 4, 2))
            r = img.rebuild(unions=[(1, 0)])
            self.check_result(r, union_merges=1, merges=1, changed_class_count=2)
            self.assertEqual(img.changed_pairs(), [(1, 0), (3, 2)])
            # Rows naming only old classes add none.
            img.append_nodes([(2, OP_F, (1,))])
            self.assertEqual(img.class_count, 4)
        # A reservation, signatures given with the rows, flat arrays.
        with small_image(row_capacity=64, class_capacity=64, child_capacity=64) as img:
            info = img.info()
            for name in ("row", "class", "child"):
                self.assertGreaterEqual(info[f"{name}_capacity"], 64)
            # h(h(f(a))) and h(h(f(b))) in new classes 10 and 11.
            img.append(array.array("I", [10, 11]), (OP_H, OP_H), [0, 1], [1, 1], [8, 9],
                       row_signatures=[11, 12])
            self.assertEqual(img.class_count, 12)
            self.assertEqual(img.read("row_signatures", first=10), [11, 12])
            self.assertEqual(img.read("child_offsets", first=9), [7, 8, 9])
            r = img.rebuild(unions=[(0, 1)])
            self.assertEqual(r.canonical, SMALL_CLOSED + [10, 10])
            self.assertEqual(img.changed_pairs(), [(1, 0), (3, 2), (9, 8), (11, 10)])
            self.assertEqual(img.info()["row_capacity"], info["row_capacity"])
            # An unwaited asynchronous rebuild refuses appends and the list.
            with img.rebuild_async() as pending:
                self.expect_status(vc.Status.INVALID_STATE, img.append_nodes,
                                   [(0, OP_A, ())])
                self.expect_status(vc.Status.INVALID_STATE, img.changed_pairs)
                self.expect_status(vc.Status.INVALID_STATE, img.changed_count)
                r = pending.wait()
            self.check_result(r, merges=0, changed_class_count=0)
            self.assertEqual(img.row_count, 12)
            self.expect_python_error(ValueError, img.changed_pairs, capacity=-1)
        self.expect_python_error(ValueError, small_image, row_capacity=-1)
        self.expect_python_error(ValueError, small_image, child_capacity=2 ** 64)

    def test_numpy_appends(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        with small_image(numpy=True) as img:
            img.append(np.array([10, 11], dtype=np.uint32), np.array([OP_H, OP_H]),
                       np.array([0, 1], dtype=np.uint32), np.array([1, 1], dtype=np.uint32),
                       np.array([8, 9], dtype=np.int64))
            self.assertEqual(img.class_count, 12)
            r = img.rebuild(unions=np.array([[0, 1]], dtype=np.uint32))
            np.testing.assert_array_equal(r.canonical, SMALL_CLOSED + [10, 10])
            self.assertEqual(img.changed_pairs(), [(1, 0), (3, 2), (9, 8), (11, 10)])
            self.expect_python_error(ValueError, img.append, np.array([-1]), [1], [0], [0], [])

    def test_canonical_outputs(self):
        with small_image() as img:
            r = img.rebuild(unions=[(0, 1)], canonical=False)
            self.assertIsNone(r.canonical)
            self.assertEqual(r.classes_after, 7)
            out = array.array("I", [0xFFFFFFFF]) * 10
            r = img.rebuild(canonical=out)
            self.assertIs(r.canonical, out)
            self.assertEqual(list(out), SMALL_CLOSED)
            # Room for every class, or nothing runs.
            self.expect_python_error(ValueError, img.rebuild, unions=[(4, 5)],
                                     canonical=array.array("I", [0]) * 9)
            self.expect_python_error(TypeError, img.rebuild, canonical=10)
            self.assertEqual(img.canonical_classes(), SMALL_CLOSED)
            # Flat u32 memory holds unions too (2 ids each).
            r = img.rebuild(unions=array.array("I", [5, 4]), reset=True)
            self.assertEqual(r.union_merges, 1)
            self.assertEqual(r.canonical, [0, 1, 2, 3, 4, 4, 6, 7, 8, 9])
            self.expect_python_error(ValueError, img.rebuild, unions=array.array("I", [5]))

    def test_rebuild_async(self):
        with small_image() as img:
            pending = img.rebuild_async(unions=[(1, 0)])
            self.assertIsInstance(pending, vc.Pending)
            # Until the wait, every other call on the image is refused.
            for fn, args in ((img.info, ()), (img.read, ("canonical_classes",)),
                             (img.write, ("row_ops", [OP_A])), (img.pass_pairs, ()),
                             (img.rebuild, ()), (img.rebuild_async, ())):
                with self.subTest(fn.__name__):
                    self.expect_status(vc.Status.INVALID_STATE, fn, *args)
            self.expect_status(vc.Status.INVALID_STATE, pending.timing)
            self.assertTrue(pending.poll())  # a CPU rebuild ran inside the call
            with pending:
                r = pending.wait()
                self.assertIsInstance(r, vc.EgraphRebuildResult)
                self.check_result(r, rounds=3, merges=2, union_merges=1, classes_before=10,
                                  classes_after=7)
                self.assertEqual(r.canonical, SMALL_CLOSED)
                self.assertGreater(r.wall_ns, 0)
                self.assertEqual(r.timing["wall_ns"], r.wall_ns)
                self.expect_status(vc.Status.INVALID_STATE, pending.wait)
            self.assertTrue(pending.closed)
            self.assertEqual(img.canonical_classes(), SMALL_CLOSED)
            # The same as the synchronous rebuild from the same state.
            sync = img.rebuild(unions=[(1, 0)], reset=True)
            self.assertEqual(sync.as_dict() | {"wall_ns": 0}, r.as_dict() | {"wall_ns": 0})
            # Released unwaited: the rebuild is finished, its results unread,
            # and the image free again.
            out = array.array("I", [7]) * 10
            pending = img.rebuild_async(reset=True, canonical=out)
            pending.close()
            self.assertEqual(list(out), [7] * 10)
            self.assertEqual(img.canonical_classes(), SMALL_IDENTITY)
            # Collected unwaited: the same.
            pending = img.rebuild_async(unions=[(0, 1)])
            del pending
            self.assertEqual(img.canonical_classes(), SMALL_CLOSED)

    def test_read_write_round_trips(self):
        with small_image() as img:
            self.assertEqual(img.read("row_ops", first=2, count=3), [OP_F, OP_F, OP_CONST1])
            self.assertEqual(img.read("children", first=6), [2, 3])
            self.assertEqual(img.read("children", first=8), [])
            self.assertEqual(img.read("row_ops", count=0), [])
            out = array.array("I", [0]) * 4
            self.assertIs(img.read("child_lengths", first=6, out=out), out)
            self.assertEqual(list(out), [2, 2, 1, 1])
            out = array.array("I", [9]) * 4
            img.read("row_classes", count=2, out=out)
            self.assertEqual(list(out), [0, 1, 9, 9])
            self.expect_python_error(ValueError, img.read, "row_classes", count=5, out=out)
            # f(b) becomes k(b): the union a = b no longer makes it f(a)'s.
            img.write("row_ops", [11], first=3)
            self.assertEqual(img.read("row_ops", first=3, count=1), [11])
            r = img.rebuild(unions=[(0, 1)])
            self.assertEqual(r.canonical, [0, 0, 2, 3, 4, 5, 6, 7, 8, 9])
            self.assertEqual(r.merges, 0)
            # Back to f(b), and the next rebuild finds the congruences.
            img.write(vc.EgraphColumn.ROW_OPS, array.array("I", [OP_F]), first=3)
            r = img.rebuild()
            self.assertEqual(r.canonical, SMALL_CLOSED)
            # Children in place: h(f(b)) becomes h(Const(2)); an empty write
            # changes nothing.
            img.write("children", (5,), first=7)
            img.write("children", [], first=8)
            self.assertEqual(img.read("children"), [0, 1, 4, 0, 5, 1, 2, 5])
            r = img.rebuild(unions=[(0, 1)], reset=True)
            self.assertEqual(r.canonical, SMALL_AFTER_ONE_ROUND)
            # Child ranges rewritten together, still in row order: g(Const(2),
            # b) becomes a leaf of its op and h(f(a)) takes its children slot.
            img.write("child_lengths", [0], first=7)
            self.assertEqual(img.read("child_lengths"), [0, 0, 1, 1, 0, 0, 2, 0, 1, 1])
        # Signatures given are kept as given.
        cols = dict(SMALL_COLUMNS, row_signatures=[7] * 10)
        with vc.EgraphImage(**cols) as img:
            self.assertEqual(img.read("row_signatures"), [7] * 10)
            img.write("row_signatures", [1, 2], first=8)
            self.assertEqual(img.read("row_signatures", first=7), [7, 1, 2])
            self.assertEqual(img.rebuild(unions=[(0, 1)]).canonical, SMALL_CLOSED)

    def test_empty_images(self):
        with vc.EgraphImage([], [], [], [], [], class_count=3) as img:
            self.assertEqual(img.read("row_ops"), [])
            self.assertEqual(img.pass_pairs(), [])
            r = img.rebuild(unions=[(2, 1)])
            self.check_result(r, rounds=1, merges=0, union_merges=1, classes_before=3,
                              classes_after=2, rows_visited=0)
            self.assertEqual(r.canonical, [0, 1, 1])
        with vc.EgraphImage([], [], [], [], []) as img:  # class_count 0 inferred
            self.assertEqual(img.info()["class_count"], 0)
            self.assertEqual(img.rebuild().canonical, [])

    def test_errors_have_a_fix(self):
        c = SMALL_COLUMNS
        create = "vyre_egraph_image_create"
        # Class ids out of range, in the rows and in the children.
        e = self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage,
                               **dict(c, class_count=9), call=create)
        self.assertIn("row_classes[9]", e.message)
        e = self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage,
                               **dict(c, children=[0, 1, 4, 0, 5, 1, 2, 30], class_count=10),
                               call=create)
        self.assertIn("children[7]", e.message)
        # Overlapping offsets, and children past the end.
        e = self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage,
                               **dict(c, child_offsets=[0, 0, 0, 0, 2, 2, 2, 4, 6, 7]),
                               call=create)
        self.assertIn("overlapping", e.message)
        self.expect_status(vc.Status.OUT_OF_RANGE, vc.EgraphImage,
                           **dict(c, child_lengths=[0, 0, 1, 1, 0, 0, 2, 2, 1, 2]), call=create)
        self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage, [0], [1], [0], [0], [],
                           class_count=0, call=create)
        self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage, **c, device=7,
                           call=create)
        # What the binding checks before the library.
        self.expect_python_error(ValueError, vc.EgraphImage, **dict(c, row_ops=[1] * 9))
        self.expect_python_error(ValueError, vc.EgraphImage, **dict(c, children=[0, -1]))
        self.expect_python_error(ValueError, vc.EgraphImage, **dict(c, row_ops=[2 ** 32] * 10))
        self.expect_python_error(TypeError, vc.EgraphImage, **dict(c, row_ops=["f"] * 10))
        self.expect_python_error(TypeError, vc.EgraphImage, **dict(c, children=5))
        self.expect_python_error(ValueError, vc.EgraphImage, **c, device="tpu")
        self.expect_python_error(ValueError, vc.EgraphImage, **c, device="gpu")
        self.expect_python_error(TypeError, vc.EgraphImage.from_nodes, [(0, 1)])
        self.expect_python_error(ValueError, vc.EgraphImage, **c, class_count=-1)

        with small_image() as img:
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.rebuild, unions=[(0, 10)],
                               call="vyre_egraph_rebuild")
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.rebuild_async, unions=[(10, 0)],
                               call="vyre_egraph_rebuild_async")
            self.expect_python_error(TypeError, img.rebuild, unions=[0, 1])
            self.expect_python_error(TypeError, img.rebuild, unions=[(0, 1, 2)])
            self.expect_status(vc.Status.OUT_OF_RANGE, img.read, "row_ops", first=8, count=3,
                               call="vyre_egraph_image_read")
            self.expect_status(vc.Status.OUT_OF_RANGE, img.read, "children", first=9)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.read, 9)
            self.expect_python_error(ValueError, img.read, "no_such_column")
            write = "vyre_egraph_image_write"
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "canonical_classes", [0],
                               call=write)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "row_classes", [10],
                               call=write)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "children", [1, 10],
                               first=6, call=write)
            self.expect_status(vc.Status.OUT_OF_RANGE, img.write, "row_ops", [1, 2], first=9,
                               call=write)
            # Offsets that would overlap a neighbour's children, or a length
            # reaching into the next row's: refused, nothing changed.
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "child_offsets", [1],
                               first=6, call=write)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "child_lengths", [3],
                               first=6, call=write)
            for name, values in SMALL_COLUMNS.items():
                self.assertEqual(img.read(name), values, name)
            # The failures changed nothing.
            self.assertEqual(img.rebuild(unions=[(0, 1)]).canonical, SMALL_CLOSED)

    def test_closed_and_stale_images(self):
        img = small_image()
        bits = img.handle
        self.assertNotEqual(bits, 0)
        self.assertIn("EgraphImage", repr(img))
        with img:
            pass
        self.assertTrue(img.closed)
        img.close()  # idempotent
        self.expect_status(vc.Status.INVALID_HANDLE, img.info)
        self.expect_status(vc.Status.INVALID_HANDLE, img.pass_count)
        self.expect_status(vc.Status.STALE_HANDLE, vc._call, "vyre_egraph_image_info_get",
                           vc.EgraphImageHandle(bits), ctypes.byref(vc._new(
                               vc.EgraphImageInfoStruct)))
        self.expect_status(vc.Status.STALE_HANDLE, vc._call, "vyre_egraph_image_destroy",
                           vc.EgraphImageHandle(bits))
        # An image closed while its rebuild is unwaited: the wait still works.
        img = small_image()
        pending = img.rebuild_async(unions=[(0, 1)])
        img.close()
        with pending:
            self.assertEqual(pending.wait().canonical, SMALL_CLOSED)

    def test_numpy_columns(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        cols = {k: np.array(v, dtype=np.uint32) for k, v in SMALL_COLUMNS.items()}
        cols["row_ops"] = cols["row_ops"].astype(np.int64)  # converted once
        with vc.EgraphImage(**cols) as img:
            self.assertTrue(img.numpy)
            ops = img.read("row_ops")
            self.assertIsInstance(ops, np.ndarray)
            self.assertEqual(ops.dtype, np.uint32)
            np.testing.assert_array_equal(ops, SMALL_COLUMNS["row_ops"])
            out = np.zeros(3, dtype=np.uint32)
            self.assertIs(img.read("children", first=5, out=out), out)
            np.testing.assert_array_equal(out, [1, 2, 3])
            img.write("row_ops", np.array([11], dtype=np.uint32), first=3)
            img.write("row_ops", np.array([OP_F]), first=3)
            r = img.rebuild(unions=np.array([[1, 0]], dtype=np.uint32))
            self.assertIsInstance(r.canonical, np.ndarray)
            np.testing.assert_array_equal(r.canonical, SMALL_CLOSED)
            self.assertEqual(img.pass_pairs(), [])
            canon = np.zeros(10, dtype=np.uint32)
            self.assertIs(img.rebuild(canonical=canon).canonical, canon)
            np.testing.assert_array_equal(canon, SMALL_CLOSED)
        # Lists in, numpy out when asked; numpy in, lists out when asked.
        with small_image(numpy=True) as img:
            self.assertIsInstance(img.read("row_ops"), np.ndarray)
        with vc.EgraphImage(**cols, numpy=False) as img:
            self.assertEqual(img.read("row_ops"), SMALL_COLUMNS["row_ops"])
        bad = dict(cols, children=np.array([0, -1, 4, 0, 5, 1, 2, 3]))
        self.expect_python_error(ValueError, vc.EgraphImage, **bad)
        bad = dict(cols, children=np.zeros(8, dtype=np.float32))
        self.expect_python_error(TypeError, vc.EgraphImage, **bad)


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


    def test_a_huge_jit_log_rides_on_the_error(self):
        # The fake's cuModuleLoadDataEx fails PTX holding this marker with a
        # JIT log of exactly that many bytes: FAKE_CUDA_JIT_LOG_PATTERN
        # (tests/support/fake_cuda_control.h) repeated and cut.
        pattern = ("fake ptxas: error: \u00e9t\u00e9 \u2713 a line of a long JIT log\n"
                   .encode())
        n = 150000
        expected = (pattern * (n // len(pattern) + 1))[:n].decode("utf-8", "replace")
        with vc.Context() as ctx:
            for entry in ("vyre_test_add_u32", "e" * 10000):
                with self.assertRaises(vc.VyreError) as cm:
                    ctx.program(f".version 7.0\n// fake-jit-log-bytes: {n}\n", entry,
                                ADD_BINDINGS)
                e = cm.exception
                self.assertEqual(e.status, vc.Status.COMPILE_FAILED)
                first_line = e.message.split("\n")[0]
                self.assertLessEqual(len(first_line.encode()), 1023)
                self.assertIn(". Fix: ", first_line)
                self.assertTrue(first_line.endswith("."), first_line)
                self.assertLessEqual(len(e.message.encode()), 8191)
                self.assertIn("[log truncated: ", e.message)
                self.assertEqual(e.log, expected)
                self.assertEqual(vc.last_error_log(), expected)

    def test_cuda_cpp_passed_as_ptx_names_the_code_kind(self):
        """CUDA C++ with the default code kind (PTX): the JIT refuses it, and
        the library's Fix names the code kind in this binding's own words,
        which must stay what Program takes."""
        self.assertIn("code_kind", inspect.signature(vc.Program).parameters)
        self.assertEqual(vc.CodeKind.CUDA_SOURCE.name, "CUDA_SOURCE")
        cpp = textwrap.dedent("""\
            extern "C" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b,
                                                         unsigned* out, const unsigned* params) {
              unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < params[0]) out[i] = a[i] + b[i];
            }
            """)
        with vc.Context() as ctx:
            for label, make in (("Program, str", lambda: vc.Program(ctx, cpp, "vyre_test_add_u32",
                                                                     ADD_BINDINGS)),
                                ("Context.program, bytes",
                                 lambda: ctx.program(cpp.encode(), "vyre_test_add_u32",
                                                     ADD_BINDINGS))):
                with self.subTest(label), self.assertRaises(vc.VyreError) as cm:
                    make()
                e = cm.exception
                self.assertEqual(e.status, vc.Status.COMPILE_FAILED)
                first_line = e.message.split("\n")[0]
                fix = first_line[first_line.index("Fix: "):]
                self.assertIn("code_kind=CodeKind.CUDA_SOURCE", fix)
            # The spelling the Fix names works (the fake driver cannot run
            # NVRTC: without it, the failure is another one).
            try:
                ctx.program(cpp, "vyre_test_add_u32", ADD_BINDINGS,
                            code_kind=vc.CodeKind.CUDA_SOURCE).close()
            except vc.VyreError as e:
                self.assertNotIn("code_kind=CodeKind.CUDA_SOURCE", e.message)

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
        cls.ctx = gpu_context()
        cls.prog = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                   workgroup_size=256)
        cls.rng = seeded_rng("GpuTest")

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

    def test_repeated_dispatch_with_changing_inputs(self):
        """dispatch() reuses its descriptors between calls: nothing of an
        earlier call may leak into a later one. Host contents, the objects
        bound (and their kinds, slot by slot), the sizes, params and the
        launch options change from call to call; every output element is
        checked every time."""
        cap = 700
        sentinel = 0xA5A5A5A5  # what the output held before the call
        da, db = self.ctx.alloc(4 * cap), self.ctx.alloc(4 * cap)
        douts = [self.ctx.alloc(4 * cap), self.ctx.alloc(4 * cap)]
        out_a, out_b = bytearray(4 * cap), array.array("I", bytes(4 * cap))
        for call in range(60):
            n = self.rng.choice((1, 2, 255, 256, 257, 511, cap, cap))
            a, b = self.data(cap)
            kind = call % 6
            # Inputs: a fresh object, the same one refilled, bytes, memoryview, resident.
            inputs = []
            for slot, src in enumerate((a, b)):
                how = (call + slot) % 5
                if how == 0:
                    inputs.append(src)
                elif how == 1:
                    inputs.append(bytearray(src.tobytes()))
                elif how == 2:
                    inputs.append(src.tobytes())
                elif how == 3:
                    inputs.append(memoryview(bytearray(src.tobytes())))
                else:
                    buf = (da, db)[slot]
                    buf.upload(src)
                    inputs.append(buf if call % 2 else buf.range(0, 4 * cap))
            params = [[n], (n,), iter([n]), [float(n)]][call % 4]
            options = {}
            if kind == 4:
                options = dict(grid=(n + 63) // 64, block=64)
            elif kind == 5:
                options = dict(element_count=n)
            with self.subTest(call=call, n=n, kind=kind):
                if kind in (0, 3):  # into a reused bytearray / array, prefilled
                    out = out_a if kind == 0 else out_b
                    array_view = memoryview(out).cast("B").cast("I")
                    for i in range(cap):
                        array_view[i] = sentinel
                    array_view.release()
                    outs = self.prog.dispatch(inputs + [out], params=params, **options)
                    self.assertIs(outs[2], out)
                    got = array.array("I", bytes(out))
                elif kind in (1, 4):  # resident output, alternating buffers
                    dout = douts[call % 2]
                    dout.upload(array.array("I", [sentinel]) * cap)
                    outs = self.prog.dispatch(inputs + [dout], params=params, **options)
                    self.assertIsNone(outs[2])
                    got = array.array("I", bytes(dout.download()))
                else:  # a byte count: a new bytearray each call
                    outs = self.prog.dispatch(inputs + [4 * cap], params=params, **options)
                    got = array.array("I", bytes(outs[2]))
                self.assertEqual(len(got), cap)
                self.assertIsNone(outs[0])
                self.assertIsNone(outs[1])
                # Elements from n on are the kernel's to leave (the fake
                # driver's writes zeros there): every element it computes is
                # checked.
                want = [(x + y) & 0xFFFFFFFF for x, y in zip(a[:n], b[:n])]
                bad = [i for i in range(n) if got[i] != want[i]]
                self.assertEqual(bad, [], f"first wrong element {bad[:1]}")
                self.assertEqual(sorted(outs.timing), ["device_ns", "enqueue_ns", "wait_ns",
                                                       "wall_ns"])
            # The inputs' memory is free again: a bytearray can be resized.
            for entry in inputs:
                if isinstance(entry, bytearray):
                    entry.extend(b"1234")
        # An INPUT_OUTPUT binding in place, repeatedly; then a closed buffer.
        inc = self.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS, workgroup_size=64)
        data = array.array("I", range(100))
        for k in range(1, 6):
            outs = inc.dispatch([data], params=[50 + k])
            self.assertIs(outs[0], data)
            # Call m increments elements [0, 50 + m).
            self.assertEqual(list(data), [i + sum(1 for m in range(1, k + 1) if i < 50 + m)
                                          for i in range(100)])
        closed = self.ctx.alloc(400)
        closed.close()
        with self.assertRaises(vc.VyreError) as cm:
            inc.dispatch([closed], params=[100])
        self.assertEqual(cm.exception.status, vc.Status.INVALID_HANDLE)
        outs = inc.dispatch([data], params=[1])  # and the next call is right again
        self.assertEqual(data[0], 6)
        self.assertEqual(data[1], 1 + 5)
        inc.close()
        for buf in [da, db] + douts:
            buf.close()

    def test_vector_add_host_memory(self):
        for n in (1, 255, 257, (1 << 20) + 17):
            with self.subTest(n=n):
                a, b = self.data(n)
                outs = self.prog.dispatch([a, b, 4 * n], params=[n])
                self.assertIsNone(outs[0])
                self.assertIsInstance(outs[2], bytearray)
                check_sum(self, a, b, outs[2], f"host n={n}")
                self.assertGreater(outs.timing["wall_ns"], 0)

    def test_pinned_and_registered_host_memory(self):
        n = (1 << 18) + 5  # over the 256 KiB staging limit: copied in place
        a, b = self.data(n)
        with self.ctx.pinned(4 * n) as pa, self.ctx.pinned(4 * n) as pout:
            self.assertFalse(pa.closed)
            self.assertEqual(pa.address % 4096, 0)
            pa.view[:] = memoryview(a).cast("B")
            out_memory = bytearray(4 * n)
            with self.ctx.register(out_memory) as reg:
                self.assertFalse(reg.closed)
                before = self.ctx.telemetry()
                self.prog.dispatch([pa, b, out_memory], params=[n])
                after = self.ctx.telemetry()
                check_sum(self, a, b, out_memory, "pinned input, registered output")
                self.assertEqual(after["d2h_operations"] - before["d2h_operations"], 1)
                # And the other way round, async.
                pout.view[:] = b"\xa5" * (4 * n)
                self.prog.dispatch_async([a, b, pout], params=[n]).wait()
                check_sum(self, a, b, pout.view, "pinned output, async")
            self.assertTrue(reg.closed)
            reg.close()  # idempotent
        self.assertTrue(pa.closed)
        with self.assertRaises(ValueError):
            pa.view
        with self.assertRaises(vc.VyreError) as raised:
            self.ctx.pinned(0)
        self.assertEqual(raised.exception.status, vc.Status.INVALID_ARGUMENT)
        self.assertIn("Fix:", str(raised.exception))
        with self.assertRaises(ValueError):
            self.ctx.register(bytearray())

    def test_inout_host_binding_separate_output(self):
        """An INPUT_OUTPUT host binding read from one buffer and written to
        another (InOut): every element of the output right, the input left
        untouched, through dispatch (alone and next to the fast path's
        entries), dispatch_async, and into pinned memory."""
        inc = self.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS, workgroup_size=64)
        add_inc = None
        try:
            for n in (1, 255, 257, (1 << 18) + 5):
                src, _ = self.data(n)
                src = array.array("I", (x & 0x7FFFFFFF for x in src))
                original = src.tobytes()
                want = [x + 1 for x in src]
                with self.subTest(n=n):
                    for how in ("bytearray", "array", "pinned", "async", "bytes src"):
                        pinned = None
                        if how == "pinned":
                            pinned = self.ctx.pinned(4 * n)
                            pinned.view[:] = b"\xa5" * (4 * n)
                            dst = pinned
                        elif how == "array":
                            dst = array.array("I", [0xA5A5A5A5]) * n
                        else:
                            dst = bytearray(b"\xa5" * (4 * n))
                        entry = vc.InOut(original if how == "bytes src" else src, dst)
                        if how == "async":
                            outs = inc.dispatch_async([entry], params=[n]).wait()
                        else:
                            outs = inc.dispatch([entry], params=[n])
                        self.assertIs(outs[0], dst)
                        got = array.array("I", bytes(pinned.view if pinned else dst))
                        bad = [i for i in range(n) if got[i] != want[i]]
                        self.assertEqual(bad[:3], [], f"{how}: {len(bad)} wrong elements")
                        self.assertEqual(src.tobytes(), original, f"{how}: input changed")
                        if pinned is not None:
                            pinned.close()
            # Next to entries the fast path writes (bytearray, bytes, a
            # resident buffer): out = a + b into an INPUT_OUTPUT binding.
            add_inc = self.ctx.program(ADD_PTX, "vyre_test_add_u32",
                                       [vc.Binding("input"), vc.Binding("input"),
                                        vc.Binding("input_output")], workgroup_size=256)
            n = 1000
            for call in range(4):
                a, b = self.data(n)
                prior = array.array("I", [0xA5A5A5A5]) * n
                dst = bytearray(4 * n) if call % 2 else self.ctx.pinned(4 * n)
                first = a if call < 2 else self.ctx.upload(a)
                outs = add_inc.dispatch([first, b.tobytes(), vc.InOut(prior, dst)],
                                        params=[n])
                self.assertIs(outs[2], dst)
                check_sum(self, a, b, dst.view if call % 2 == 0 else dst, f"mixed {call}")
                self.assertEqual(list(prior), [0xA5A5A5A5] * n)
                for obj in (first, dst):
                    if isinstance(obj, (vc.Buffer, vc.PinnedMemory)):
                        obj.close()
            # Elements past the kernel's count come back as the input had them.
            src = array.array("I", range(100))
            dst = bytearray(400)
            inc.dispatch([vc.InOut(src, dst)], params=[60])
            self.assertEqual(list(array.array("I", bytes(dst))),
                             [i + 1 if i < 60 else i for i in range(100)])
            self.assertEqual(list(src), list(range(100)))
            # Mismatched or read-only outputs raise before anything runs,
            # and the next dispatch (the reused descriptors) is right again.
            for dst, error in ((bytearray(396), ValueError), (bytes(400), TypeError),
                               (self.ctx.alloc(400), TypeError)):
                with self.subTest(dst=type(dst).__name__):
                    with self.assertRaises(error) as cm:
                        inc.dispatch([vc.InOut(src, dst)], params=[100])
                    self.assertIn("Fix:", str(cm.exception))
                    with self.assertRaises(error):
                        inc.dispatch_async([vc.InOut(src, dst)], params=[100])
                    if isinstance(dst, vc.Buffer):
                        dst.close()
            self.assertEqual(list(src), list(range(100)))
            out = bytearray(400)
            inc.dispatch([vc.InOut(src, out)], params=[100])
            self.assertEqual(list(array.array("I", bytes(out))), [i + 1 for i in range(100)])
            inc.dispatch([src], params=[100])  # in place still works
            self.assertEqual(list(src), [i + 1 for i in range(100)])
        finally:
            inc.close()
            if add_inc is not None:
                add_inc.close()

    def test_staging_options(self):
        n = (1 << 19) + 7
        a, b = self.data(n)
        with vc.Context(staging_chunk_bytes=64 * 1024, staging_chunk_count=3,
                        staging_threads=2) as ctx:
            with ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS) as prog:
                outs = prog.dispatch([a, b, 4 * n], params=[n])
                check_sum(self, a, b, outs[2], "small staging chunks")
        with self.assertRaises(vc.VyreError) as raised:
            vc.Context(staging_chunk_bytes=1000)
        self.assertEqual(raised.exception.status, vc.Status.INVALID_ARGUMENT)
        self.assertIn("staging_chunk_bytes", str(raised.exception))

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
        cls.ctx = gpu_context()
        cls.add = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                  workgroup_size=256)
        cls.inc = cls.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS,
                                  workgroup_size=256)
        cls.rng = seeded_rng("GraphTest")

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

    def test_graph_launch_on_a_stream_and_node_info(self):
        n = 777
        a, b = self.data(n)
        with self.add.record([a, b, 4 * n], params=[n]) as graph:
            for stream in (vc.STREAM_LEGACY, vc.STREAM_PER_THREAD):
                a2, b2 = self.data(n)
                out = array.array("I", [0xA5A5A5A5]) * n
                pending = graph.launch(stream, [a2, b2, out])
                pending.wait()
                check_sum(self, a2, b2, out.tobytes(), "graph launched on a stream")
            with self.assertRaises(vc.VyreError) as caught:
                graph.launch(0, [a, b, 4 * n])
            self.assertIn("cu_stream is 0", str(caught.exception))
            self.assertIn("Fix:", str(caught.exception))
            kernel = graph.kernel_nodes()[0]
            info = graph.node_info(kernel)
            self.assertEqual(info["kind"], vc.GraphNodeKind.KERNEL)
            self.assertNotEqual(info["cu_function"], 0)
            self.assertNotEqual(info["cu_graph_node"], 0)
            self.assertEqual(len(info["arguments"]), info["argument_count"])
            self.assertGreaterEqual(info["grid"][0] * info["block"][0], n)
            memset = graph.node_kinds().index(vc.GraphNodeKind.MEMSET)
            info = graph.node_info(memset)
            self.assertEqual(info["memset_width"], 4 * n)
            self.assertEqual(info["memset_value"], 0)
            with self.assertRaises(vc.VyreError) as caught:
                graph.node_info(graph.info()["node_count"])
            self.assertEqual(caught.exception.status, vc.Status.OUT_OF_RANGE)

    def test_resident_graph_launch_on_a_stream(self):
        n = 1000
        a, b = self.data(n)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout, \
                self.add.record([da, db, dout], params=[n]) as graph:
            dout.upload(array.array("I", [0xA5A5A5A5]) * n)
            with graph.launch(vc.STREAM_LEGACY) as pending:
                outs = pending.wait()
            self.assertEqual(list(outs), [None, None, None])
            check_sum(self, a, b, dout.download(), "resident graph launched on stream 1")
            # New data through rebound resident buffers, on the same stream.
            a2, b2 = self.data(n)
            with self.ctx.upload(a2) as da2, self.ctx.upload(b2) as db2:
                dout.upload(array.array("I", [0xA5A5A5A5]) * n)
                graph.launch(vc.STREAM_LEGACY, [da2, db2, dout]).wait()
                check_sum(self, a2, b2, dout.download(), "rebound and launched on stream 1")
            e = self.expect_status(vc.Status.INVALID_ARGUMENT, graph.launch, 0)
            self.assertIn("cu_stream is 0", e.message)

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

    def test_host_graph_inout(self):
        """A graph recorded and replayed with InOut: the result goes to the
        output buffer each replay, the input stays as it was."""
        n = 700
        src = array.array("I", (x & 0x7FFFFFFF for x in self.data(n)[0]))
        original = src.tobytes()
        with self.inc.record([vc.InOut(src, bytearray(4 * n))], params=[n]) as graph:
            self.assertEqual(graph.info()["host_input_bytes"], 4 * n)
            self.assertEqual(graph.info()["host_output_bytes"], 4 * n)
            with self.ctx.pinned(4 * n) as pinned:
                for k in range(3):
                    src2 = array.array("I", (x & 0x7FFFFFFF for x in self.data(n)[0]))
                    before = src2.tobytes()
                    if k == 2:
                        dst = pinned
                        outs = graph.replay_async([vc.InOut(src2, dst)]).wait()
                    else:
                        dst = bytearray(4 * n)
                        outs = graph.replay([vc.InOut(src2, dst)])
                    self.assertIs(outs[0], dst)
                    got = self.u32(pinned.view if k == 2 else dst)
                    bad = [i for i in range(n) if got[i] != src2[i] + 1]
                    self.assertEqual(bad[:3], [], f"replay {k}: {len(bad)} wrong elements")
                    self.assertEqual(src2.tobytes(), before)
                with self.assertRaises(ValueError) as cm:
                    graph.replay([vc.InOut(src, bytearray(4 * n - 4))])
                self.assertIn("Fix:", str(cm.exception))
        self.assertEqual(src.tobytes(), original)

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


@unittest.skipUnless(FAKE_DRIVER, "needs the fake driver (VYRE_CUDA_TEST_FAKE_DRIVER=1)")
class EgraphFakeDriverTest(EgraphTestMixin, unittest.TestCase):
    """GPU e-graph images on the fake driver. Its e-graph kernels do nothing,
    so only what needs none is checked: columns, info, validation, and the
    device memory and ownership of images."""

    def test_gpu_image_columns_and_validation(self):
        before = fake_stats()
        with vc.Context() as ctx:
            baseline = fake_stats()
            img = ctx.egraph_image_from_nodes(SMALL_NODES)
            self.assertEqual(img.device, vc.EgraphDevice.GPU)
            self.assertIs(img.context, ctx)
            info = img.info()
            self.assertEqual(info["device"], vc.EgraphDevice.GPU)
            self.assertEqual(info["context"], ctx.handle)
            self.assertEqual((info["row_count"], info["class_count"], info["child_count"],
                              info["canonical_class_count"]), (10, 10, 8, 10))
            self.assertGreater(info["bytes"], 0)
            with_image = fake_stats()
            self.assertGreater(with_image.device_bytes_live, baseline.device_bytes_live)
            for name, values in SMALL_COLUMNS.items():
                self.assertEqual(img.read(name), values, name)
            self.assertEqual(img.read("row_classes", first=4, count=2), [4, 5])
            img.write("row_ops", [77], first=2)
            self.assertEqual(img.read("row_ops", count=4), [OP_A, OP_B, 77, OP_F])
            write = "vyre_egraph_image_write"
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "canonical_classes", [0],
                               call=write)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "row_classes", [10],
                               call=write)
            self.expect_status(vc.Status.INVALID_ARGUMENT, img.write, "child_offsets", [1],
                               first=6, call=write)
            self.expect_status(vc.Status.OUT_OF_RANGE, img.read, "row_ops", first=9, count=2,
                               call="vyre_egraph_image_read")
            self.assertEqual(img.read("child_offsets"), SMALL_COLUMNS["child_offsets"])
            # Bad columns are refused before anything is allocated.
            allocations = fake_stats().device_allocations_live
            self.expect_status(vc.Status.INVALID_ARGUMENT, ctx.egraph_image,
                               **dict(SMALL_COLUMNS, class_count=9))
            self.expect_status(vc.Status.INVALID_ARGUMENT, vc.EgraphImage, **SMALL_COLUMNS,
                               device="cpu", context=ctx)  # a CPU image takes no context
            self.assertEqual(fake_stats().device_allocations_live, allocations)
            # Closing the image frees its device memory.
            img.close()
            self.assertEqual(fake_stats().device_bytes_live, baseline.device_bytes_live)
            # Left open on purpose: closing the context must release it.
            img = vc.EgraphImage(**SMALL_COLUMNS, device="gpu", context=ctx)
            bits = img.handle
        after = fake_stats()
        for field in ("device_allocations_live", "device_bytes_live", "pinned_allocations_live",
                      "modules_live", "misuse_errors"):
            self.assertEqual(getattr(after, field), getattr(before, field), field)
        img.close()  # a no-op: the context released it
        self.expect_status(vc.Status.STALE_HANDLE, vc._call, "vyre_egraph_image_destroy",
                           vc.EgraphImageHandle(bits))

    def test_gpu_image_appends(self):
        # The fake validates appends but runs no rebuild kernel: appends
        # without rebuilds (EgraphGpuTest rebuilds after appends).
        with vc.Context() as ctx:
            self.check_appends_without_rebuild(
                lambda nodes, classes, **kw: ctx.egraph_image_from_nodes(
                    nodes, class_count=classes, **kw))
        self.assertEqual(fake_stats().misuse_errors, 0)


@unittest.skipIf(FAKE_DRIVER, "the fake driver's e-graph kernels do nothing")
class EgraphGpuTest(EgraphTestMixin, unittest.TestCase):
    """GPU e-graph images give the CPU reference's results; skipped without a
    GPU unless VYRE_CUDA_REQUIRE_GPU=1."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = gpu_context()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_small_closure(self):
        self.check_small_closure(lambda: self.ctx.egraph_image_from_nodes(SMALL_NODES))

    def test_random_graphs_match_a_naive_closure(self):
        self.check_random_graphs(lambda nodes, classes, seed: self.ctx.egraph_image_from_nodes(
            nodes, class_count=classes))

    def test_appends_match_cpu_images(self):
        # GPU images against CPU images of everything at once, and the
        # reverse.
        self.check_growth(
            lambda nodes, classes, **kw: self.ctx.egraph_image_from_nodes(
                nodes, class_count=classes, **kw),
            lambda nodes, classes: vc.EgraphImage.from_nodes(nodes, class_count=classes))
        self.check_growth(
            lambda nodes, classes, **kw: vc.EgraphImage.from_nodes(nodes, class_count=classes,
                                                                   **kw),
            lambda nodes, classes: self.ctx.egraph_image_from_nodes(nodes, class_count=classes),
            seeds=6)
        self.check_appends_without_rebuild(
            lambda nodes, classes, **kw: self.ctx.egraph_image_from_nodes(
                nodes, class_count=classes, **kw))

    def test_async_rebuild_and_writes(self):
        with self.ctx.egraph_image_from_nodes(SMALL_NODES) as img:
            self.assertEqual(img.info()["context"], self.ctx.handle)
            pending = img.rebuild_async(unions=[(1, 0)], device_timing=True)
            with pending:
                self.assertIn(pending.poll(), (True, False))
                self.expect_status(vc.Status.INVALID_STATE, img.info)
                r = pending.wait()
            self.assertEqual(r.canonical, SMALL_CLOSED)
            self.check_result(r, rounds=3, merges=2, union_merges=1, classes_before=10,
                              classes_after=7)
            self.assertGreater(r.device_ns, 0)
            self.assertGreater(r.timing["wall_ns"], 0)
            # A write lands in the next rebuild: f(b) becomes k(b).
            img.write("row_ops", [11], first=3)
            r = img.rebuild(unions=[(0, 1)], reset=True)
            self.assertEqual(r.canonical, [0, 0, 2, 3, 4, 5, 6, 7, 8, 9])
            self.assertEqual(img.pass_pairs(), [])


if __name__ == "__main__":
    unittest.main()
