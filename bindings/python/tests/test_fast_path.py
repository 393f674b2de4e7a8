"""The compiled fast path (vyre_cuda._fast) against the ctypes path.

Each case runs twice in one process on the same objects: through the
compiled module, then with it switched off (vyre_cuda._loader._fast = None,
what VYRE_CUDA_PURE_PYTHON=1 does at load). Results must be the same and
right element by element (outputs poisoned before each call); errors must
be the same exception type with the same text, status and library message.
Nothing may crash the interpreter, leak a reference or keep a buffer export
(a bytearray must be resizable after each call).

Under VYRE_CUDA_REQUIRE_FAST=1 (ctest's compiled runs) the module must be in
use; under VYRE_CUDA_PURE_PYTHON=1 it must not. The GPU cases need the fake
driver or a GPU (they skip without either, as the main suite's do).
"""

import array
import contextlib
import os
import struct
import sys
import unittest

import vyre_cuda as vc
from vyre_cuda import _loader

from test_vyre_cuda import (ADD_BINDINGS, ADD_PTX, INC_BINDINGS, INC_PTX, gpu_context,
                            kernel_ptx, random_u32, seeded_rng)

try:
    import numpy
except ImportError:  # numpy is optional
    numpy = None

POISON = 0xDEADBEEF


@contextlib.contextmanager
def ctypes_path():
    """The ctypes path alone, for the duration."""
    saved = _loader._fast
    _loader._fast = None
    try:
        yield
    finally:
        _loader._fast = saved


def outcome(fn):
    """What fn() did: ("ok", value) or ("raised", type, text, status, message)."""
    try:
        return ("ok", fn())
    except vc.VyreError as e:
        return ("raised", type(e).__name__, str(e), e.status, e.message, e.call)
    except (TypeError, ValueError, OverflowError, BufferError, IndexError) as e:
        return ("raised", type(e).__name__, str(e))


class PathTest(unittest.TestCase):

    def test_the_expected_path_is_in_use(self):
        vc.load()
        if os.environ.get("VYRE_CUDA_PURE_PYTHON") == "1":
            self.assertIsNone(_loader._fast, "VYRE_CUDA_PURE_PYTHON=1 must force ctypes")
            self.assertEqual(_loader._fast_reason, "VYRE_CUDA_PURE_PYTHON=1")
        elif os.environ.get("VYRE_CUDA_REQUIRE_FAST") == "1":
            self.assertIsNotNone(_loader._fast, _loader._fast_reason)
            self.assertTrue(_loader.fast_path())
        if _loader._fast is not None:
            # The module was given the addresses of this very library.
            self.assertIn("_fast", _loader._fast.__name__)

    def test_init_refuses_bad_arguments(self):
        fast = _loader._fast
        if fast is None:
            self.skipTest(f"the compiled path is off: {_loader._fast_reason}")
        with self.assertRaises(TypeError):
            fast.init()
        with self.assertRaises(ValueError):
            fast.init({}, vc.Buffer, vc.BufferRange, array.array, vc.PinnedMemory,
                      vc.Outputs, len)
        with self.assertRaises(TypeError):
            fast.dispatch(1, 2)
        with self.assertRaises(TypeError):
            fast.graph_replay()


class FastPathGpuTest(unittest.TestCase):
    """The two paths side by side on the fake driver (or a GPU)."""

    def setUp(self):
        vc.load()
        if _loader._fast is None:
            self.skipTest(f"the compiled path is off: {_loader._fast_reason}")
        self.ctx = gpu_context()
        self.addCleanup(self.ctx.close)
        self.add = self.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                    workgroup_size=64)
        self.inc = self.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS,
                                    workgroup_size=64)
        self.rng = seeded_rng(self.id())
        self.n = 1000  # not a multiple of the block size
        self.a = random_u32(self.n, self.rng)
        self.b = random_u32(self.n, self.rng)
        self.want = array.array("I", ((x + y) & 0xFFFFFFFF for x, y in zip(self.a, self.b)))

    # -- helpers ------------------------------------------------------------

    def both(self, fn, check=None):
        """fn() through each path; equal outcomes; check(value) on each result."""
        fast_calls = []
        real = _loader._fast

        class Counting:
            """Counts calls the module handled (not NotImplemented)."""

            def __getattr__(self, name):
                target = getattr(real, name)

                def call(*args):
                    try:
                        result = target(*args)
                    except BaseException:
                        fast_calls.append(name)  # the library's error, raised by the module
                        raise
                    if result is not NotImplemented:
                        fast_calls.append(name)
                    return result
                return call

        _loader._fast = Counting()
        try:
            got_fast = outcome(fn)
        finally:
            _loader._fast = real
        with ctypes_path():
            got_ctypes = outcome(fn)
        if got_fast[0] == "ok" and check is not None:
            check(got_fast[1])
            check(got_ctypes[1])
        if got_fast[0] == "ok" and got_ctypes[0] == "ok":
            self.assertEqual(self.comparable(got_fast[1]), self.comparable(got_ctypes[1]))
        else:
            self.assertEqual(got_fast, got_ctypes)
        return got_fast, fast_calls

    @staticmethod
    def comparable(value):
        if isinstance(value, (list, tuple)):
            return [type(v).__name__ if v is not None else None for v in value]
        if numpy is not None and isinstance(value, numpy.ndarray):
            return value.tobytes()
        if isinstance(value, (bytes, bytearray, memoryview, array.array)):
            return bytes(value)
        return value

    def poisoned(self, kind="array"):
        if kind == "array":
            return array.array("I", [POISON]) * self.n
        if kind == "bytearray":
            return bytearray(struct.pack("<I", POISON) * self.n)
        if kind == "numpy":
            return numpy.full(self.n, POISON, dtype=numpy.uint32)
        raise AssertionError(kind)

    def assert_sum(self, data, label):
        got = array.array("I", bytes(data))
        self.assertEqual(len(got), self.n, f"{label}: element count")
        bad = [i for i in range(self.n) if got[i] != self.want[i]]
        self.assertFalse(bad, f"{label}: {len(bad)} wrong, first {bad[:1]}")

    def assert_handled(self, calls, name):
        self.assertIn(name, calls, f"the compiled path did not take {name}")

    def assert_unexported(self, obj):
        """obj (a bytearray) holds no buffer export: it can be resized."""
        obj.append(0)
        del obj[-1]

    # -- results ------------------------------------------------------------

    def test_resident_dispatch(self):
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        dout = self.ctx.alloc(4 * self.n)
        for bindings in ([da, db, dout], (da, db, dout),
                         [da, vc.BufferRange(db), vc.BufferRange(dout, 0, 4 * self.n)]):
            for grid in (None, (16, 1, 1), 16, [16]):
                def run():
                    dout.upload(self.poisoned())
                    outs = self.add.dispatch(bindings, params=[self.n], grid=grid)
                    self.assertEqual(list(outs), [None, None, None])
                    self.assertEqual(set(outs.timing),
                                     {"wall_ns", "device_ns", "enqueue_ns", "wait_ns"})
                    return dout.download()
                _, calls = self.both(run, lambda out: self.assert_sum(out, "resident"))
                self.assert_handled(calls, "dispatch")

    def test_host_dispatch(self):
        kinds = ["array", "bytearray"] + (["numpy"] if numpy is not None else [])
        for kind in kinds:
            out = self.poisoned(kind)
            for a, b in ((self.a, self.b), (bytes(self.a), bytearray(self.b)),
                         (memoryview(self.a), memoryview(bytes(self.b)))):
                def run():
                    memoryview(out).cast("B")[:] = bytes(self.poisoned("bytearray"))
                    outs = self.add.dispatch([a, b, out], params=(self.n,))
                    self.assertIs(outs[2], out)
                    return bytes(out)
                _, calls = self.both(run, lambda got: self.assert_sum(got, f"host {kind}"))
                self.assert_handled(calls, "dispatch")
            if kind == "bytearray":
                self.assert_unexported(out)
        if numpy is not None:  # the "natural call"
            na = numpy.frombuffer(self.a, dtype=numpy.uint32).copy()
            nb = numpy.frombuffer(self.b, dtype=numpy.uint32).copy()

            def natural():
                nout = self.poisoned("numpy")
                self.add.dispatch([na, nb, nout], params=[self.n], grid=(1, 1, 1),
                                  block=(1024, 1, 1))
                return nout
            self.both(natural, lambda got: self.assert_sum(got.tobytes(), "numpy natural"))

    def test_byte_count_output_and_inout(self):
        def run():
            outs = self.add.dispatch([self.a, self.b, 4 * self.n], params=[self.n])
            self.assertIsInstance(outs[2], bytearray)
            return outs[2]
        _, calls = self.both(run, lambda got: self.assert_sum(got, "byte count"))
        self.assert_handled(calls, "dispatch")

        def inc():
            data = array.array("I", self.a)
            outs = self.inc.dispatch([data], params=[self.n])
            self.assertIs(outs[0], data)
            return data
        want = array.array("I", ((x + 1) & 0xFFFFFFFF for x in self.a))
        _, calls = self.both(inc, lambda got: self.assertEqual(got, want))
        self.assert_handled(calls, "dispatch")

    def test_async_dispatch_and_wait(self):
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        out = bytearray(4 * self.n)

        def run():
            out[:] = bytes(self.poisoned("bytearray"))
            pending = self.add.dispatch_async([da, db, out], params=[self.n])
            with self.assertRaises(BufferError):  # exported until waited
                out.append(0)
            outs = pending.wait()
            self.assertIs(outs[2], out)
            self.assertEqual(set(outs.timing), {"wall_ns", "device_ns", "enqueue_ns", "wait_ns"})
            again = outcome(pending.wait)
            pending.close()
            self.assert_unexported(out)
            return bytes(out), again
        got, calls = self.both(run, lambda r: self.assert_sum(r[0], "async"))
        self.assert_handled(calls, "dispatch")
        self.assert_handled(calls, "pending_wait")
        self.assert_handled(calls, "pending_timing")
        self.assertEqual(got[1][1][0], "raised")  # a second wait: INVALID_STATE

    def test_graph_replay(self):
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        dout = self.ctx.alloc(4 * self.n)
        graph = self.add.record([da, db, dout], params=[self.n])
        self.addCleanup(graph.close)

        def run():
            dout.upload(self.poisoned())
            outs = graph.replay()
            self.assertEqual(list(outs), [None, None, None])
            dout.upload(self.poisoned())
            graph.replay(params=[self.n], element_count=self.n)
            first = dout.download()
            dout.upload(self.poisoned())
            pending = graph.replay_async()
            outs = pending.wait()
            pending.close()
            return first, dout.download()
        _, calls = self.both(run, lambda r: (self.assert_sum(r[0], "replay"),
                                             self.assert_sum(r[1], "replay_async")))
        self.assert_handled(calls, "graph_replay")

    def test_sequence_run(self):
        da, db = self.ctx.alloc(4 * self.n), self.ctx.alloc(4 * self.n)
        dout = self.ctx.alloc(4 * self.n)
        into = self.poisoned()
        seq = self.ctx.sequence([vc.UploadStep(da, self.a), vc.UploadStep(db, self.b),
                                 vc.FillStep(dout, 0xEE),
                                 vc.Repeat(2, [vc.DispatchStep(self.add, [da, db, dout],
                                                               params=[self.n])]),
                                 vc.DownloadStep(dout), vc.DownloadStep(dout, out=into),
                                 vc.DownloadStep(dout, out=8, offset=4)])
        self.addCleanup(seq.close)
        silent = self.ctx.sequence([vc.FillStep(dout, 0x11)])  # no DOWNLOAD steps
        self.addCleanup(silent.close)
        first, second, part = (step.out for step in seq.steps[-3:])

        def run():
            for out in (first, into, part):
                memoryview(out).cast("B")[:] = b"\xa5" * len(memoryview(out).cast("B"))
            outs = seq.run()
            self.assertIsInstance(outs, vc.Outputs)
            self.assertEqual(len(outs), 3)
            self.assertIs(outs[0], first)
            self.assertIs(outs[1], into)
            self.assertIs(outs[2], part)
            self.assertEqual(set(outs.timing), {"wall_ns", "device_ns", "enqueue_ns", "wait_ns"})
            empty = silent.run()
            self.assertIsInstance(empty, vc.Outputs)
            self.assertEqual(list(empty), [])
            self.assertEqual(set(empty.timing), set(outs.timing))
            return bytes(first), bytes(into), bytes(part), bytes(dout.download(4))

        def check(r):
            self.assert_sum(r[0], "sequence download")
            self.assert_sum(r[1], "sequence download into")
            self.assertEqual(r[2], bytes(self.want)[4:12])
            self.assertEqual(r[3], bytes(b"\x11" * 4))
        _, calls = self.both(run, check)
        self.assert_handled(calls, "sequence_run")

    def test_upload_download(self):
        buf = self.ctx.alloc(4 * self.n)
        sources = [self.a, bytes(self.a), bytearray(self.a), memoryview(self.a)]
        if numpy is not None:
            sources.append(numpy.frombuffer(self.a, dtype=numpy.uint32))
        for src in sources:
            def run():
                buf.upload(self.poisoned())
                buf.upload(src)
                into = self.poisoned("bytearray")
                got = buf.download(out=into)
                self.assertIs(got, into)
                part = buf.download(8, offset=4)
                return bytes(buf.download()), bytes(part)

            def check(r):
                self.assertEqual(r[0], bytes(self.a))
                self.assertEqual(r[1], bytes(self.a)[4:12])
            _, calls = self.both(run, check)
            self.assert_handled(calls, "buffer_upload")
            self.assert_handled(calls, "buffer_download")

    def test_pinned_memory(self):
        """PinnedMemory as host input, output and INPUT_OUTPUT memory, upload
        source and download target (read by address: no buffer protocol
        before Python 3.12)."""
        nbytes = 4 * self.n
        pa, pb, pout = (self.ctx.pinned(nbytes) for _ in range(3))
        for p in (pa, pb, pout):
            self.addCleanup(p.close)
        pa.view[:] = memoryview(self.a).cast("B")
        pb.view[:] = memoryview(self.b).cast("B")
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        buf = self.ctx.alloc(nbytes)
        poison = bytes(self.poisoned("bytearray"))

        def run():
            pout.view[:] = poison
            outs = self.add.dispatch([pa, pb, pout], params=[self.n])
            self.assertIs(outs[2], pout)
            first = bytes(pout.view)
            pout.view[:] = poison
            pending = self.add.dispatch_async([da, pb, pout], params=[self.n])
            outs = pending.wait()
            pending.close()
            self.assertIs(outs[2], pout)
            second = bytes(pout.view)
            pout.view[:] = poison
            buf.upload(self.poisoned())
            buf.upload(pa)
            self.add.dispatch([buf, db, pout], params=[self.n])
            third = bytes(pout.view)
            pout.view[:] = poison
            got = buf.download(out=pout)
            self.assertIs(got, pout)
            fourth = bytes(pout.view)
            pout.view[:] = memoryview(self.a).cast("B")
            self.inc.dispatch([pout], params=[self.n])
            return first, second, third, fourth, bytes(pout.view)

        def check(r):
            for label, got in zip(("sync", "async", "upload from pinned"), r[:3]):
                self.assert_sum(got, f"pinned {label}")
            self.assertEqual(r[3], bytes(self.a))
            self.assertEqual(r[4], bytes(array.array(
                "I", ((x + 1) & 0xFFFFFFFF for x in self.a))))
        _, calls = self.both(run, check)
        # Every call above, pinned memory and all, took the compiled path.
        self.assertEqual(calls.count("dispatch"), 4, calls)
        self.assertEqual(calls.count("buffer_upload"), 2, calls)
        self.assertEqual(calls.count("buffer_download"), 1, calls)

        freed = self.ctx.alloc(16)
        freed.close()
        closed = self.ctx.pinned(nbytes)
        closed.close()
        cases = {
            "pinned next to a freed buffer": lambda: self.add.dispatch([pa, freed, pout],
                                                                       params=[self.n]),
            "pinned next to a freed buffer async": lambda: self.add.dispatch_async(
                [pa, freed, pout], params=[self.n]),
            "pinned, too few bindings": lambda: self.add.dispatch([pa, pout], params=[self.n]),
            "download too much into pinned": lambda: db.download(out=pout, offset=4),
            "upload past the end from pinned": lambda: db.upload(pa, offset=4),
            "closed pinned input": lambda: self.add.dispatch([closed, pb, pout],
                                                             params=[self.n]),
            "closed pinned output": lambda: self.add.dispatch([pa, pb, closed],
                                                              params=[self.n]),
            "closed pinned upload": lambda: db.upload(closed),
            "closed pinned download": lambda: db.download(out=closed),
        }
        for label, fn in cases.items():
            with self.subTest(label):
                got, calls = self.both(fn)
                self.assertEqual(got[0], "raised", label)
                if not label.startswith("closed"):
                    self.assertTrue(calls, f"{label}: the compiled path fell back")

    def test_scalars(self):
        saxpy = self.ctx.program(
            kernel_ptx("saxpy_f32.ptx"), "vyre_test_saxpy_f32",
            [vc.Binding("input", element_size=4), vc.Binding("input_output", element_size=4)],
            workgroup_size=128,
            params=[(vc.ParamKind.SCALAR32, 0), (vc.ParamKind.BINDING, 0),
                    (vc.ParamKind.BINDING, 1), (vc.ParamKind.SCALAR64, 1)])
        x = array.array("f", (float(i % 97) for i in range(self.n)))
        y0 = array.array("f", (float(i % 13) for i in range(self.n)))
        want = array.array("f", (2.5 * xi + yi for xi, yi in zip(x, y0)))

        def run():
            y = array.array("f", y0)
            saxpy.dispatch([x, y], scalars=[2.5, self.n])
            return y
        _, calls = self.both(run, lambda got: self.assertEqual(got, want))
        self.assert_handled(calls, "dispatch")

    # -- errors -------------------------------------------------------------

    def test_bad_inputs_fail_alike(self):
        n = self.n
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        dout = self.ctx.alloc(4 * n)
        freed = self.ctx.alloc(16)
        freed.close()
        small = array.array("I", [POISON]) * (n // 2)
        strided = memoryview(bytearray(8 * n))[::2]
        cases = {
            "too few bindings": lambda: self.add.dispatch([da, db], params=[n]),
            "too many bindings": lambda: self.add.dispatch([da, db, dout, dout], params=[n]),
            "no bindings": lambda: self.add.dispatch([], params=[n]),
            "freed buffer": lambda: self.add.dispatch([da, freed, dout], params=[n]),
            "too-small output": lambda: self.add.dispatch([self.a, self.b, small],
                                                          params=[n]),
            "too-small resident range": lambda: self.add.dispatch(
                [da, db, vc.BufferRange(dout, 0, 8)], params=[n], element_count=n),
            "range past the end": lambda: self.add.dispatch(
                [da, db, vc.BufferRange(dout, 4 * n, 4)], params=[n]),
            "wrong dtype input": lambda: self.add.dispatch(
                [array.array("d", [1.0]) * n, self.b, 4 * n], params=[n]),
            "strided input": lambda: self.add.dispatch([strided, self.b, 4 * n],
                                                       params=[n]),
            "strided output": lambda: self.add.dispatch([self.a, self.b, strided],
                                                        params=[n]),
            "read-only output": lambda: self.add.dispatch([self.a, self.b, bytes(4 * n)],
                                                          params=[n]),
            "negative byte count": lambda: self.add.dispatch([self.a, self.b, -4],
                                                             params=[n]),
            "bool as output": lambda: self.add.dispatch([self.a, self.b, True], params=[n]),
            "int as input": lambda: self.add.dispatch([4 * n, self.b, 4 * n], params=[n]),
            "object as binding": lambda: self.add.dispatch([object(), db, dout], params=[n]),
            "str scalar": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                    scalars=["x"]),
            "None scalar": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                     scalars=[None]),
            "float param": lambda: self.add.dispatch([da, db, dout], params=[1.5]),
            "huge param": lambda: self.add.dispatch([da, db, dout], params=[2 ** 40]),
            "very negative param": lambda: self.add.dispatch([da, db, dout],
                                                             params=[-2 ** 32]),
            "huge scalar": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                     scalars=[2 ** 64]),
            "unexpected scalar": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                           scalars=[7]),
            "zero grid": lambda: self.add.dispatch([da, db, dout], params=[n], grid=(0,)),
            "four-dimensional grid": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                               grid=(1, 1, 1, 1)),
            "str grid": lambda: self.add.dispatch([da, db, dout], params=[n], grid="x"),
            "huge block": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                    block=(1 << 20,)),
            "negative flags": lambda: self.add.dispatch([da, db, dout], params=[n], flags=-1),
            "zero iterations": lambda: self.add.dispatch([da, db, dout], params=[n],
                                                         fixpoint_iterations=0),
            "async freed buffer": lambda: self.add.dispatch_async([da, freed, dout],
                                                                  params=[n]),
            "async too few": lambda: self.add.dispatch_async([da, db], params=[n]),
            "upload too large": lambda: db.upload(bytes(4 * n + 4)),
            "upload past the end": lambda: db.upload(self.a, offset=8),
            "upload a str": lambda: db.upload("text"),
            "upload strided": lambda: db.upload(strided),
            "upload to a freed buffer": lambda: freed.upload(self.a),
            "download too much": lambda: db.download(4 * n + 4),
            "download read-only": lambda: db.download(out=bytes(16)),
            "download strided": lambda: db.download(out=strided),
            "download negative": lambda: db.download(-1),
            "download freed": lambda: freed.download(16),
        }
        # Library errors over shapes the module takes come from the module.
        handled = {"too few bindings", "too many bindings", "no bindings", "freed buffer",
                   "too-small output", "range past the end", "zero grid", "huge block",
                   "zero iterations", "async too few", "upload too large",
                   "upload past the end", "download too much", "download freed"}
        for label, fn in cases.items():
            with self.subTest(label):
                got, calls = self.both(fn)
                if label in handled:
                    self.assertTrue(calls, f"{label}: the compiled path fell back")

    def test_closed_objects_fail_alike(self):
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        dout = self.ctx.alloc(4 * self.n)
        graph = self.add.record([da, db, dout], params=[self.n])
        pending = self.add.dispatch_async([da, db, dout], params=[self.n])
        pending.wait()
        prog = self.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
        prog.close()
        graph2 = self.add.record([da, db, dout], params=[self.n])
        graph2.close()
        seq = self.ctx.sequence([vc.DownloadStep(dout)])
        seq.close()
        live_seq = self.ctx.sequence([vc.DispatchStep(self.add, [da, db, dout],
                                                      params=[self.n]), vc.DownloadStep(dout)])
        cases = {
            "closed sequence": seq.run,
            "closed program": lambda: prog.dispatch([da, db, dout], params=[self.n]),
            "closed program async": lambda: prog.dispatch_async([da, db, dout],
                                                                params=[self.n]),
            "closed graph": graph2.replay,
            "closed graph async": graph2.replay_async,
            "waited twice": pending.wait,
            "bad timeout": lambda: pending.wait(-1),
        }
        for label, fn in cases.items():
            with self.subTest(label):
                got, calls = self.both(fn)
                self.assertEqual(got[0], "raised", label)
                if label != "bad timeout":  # -1: ctypes' wrap-around, kept there
                    self.assertTrue(calls, f"{label}: the compiled path fell back")
        pending.close()
        self.ctx.close()  # everything below belongs to a closed context
        cases = {
            "closed context dispatch": lambda: self.add.dispatch([da, db, dout],
                                                                 params=[self.n]),
            "closed context host dispatch": lambda: self.add.dispatch(
                [self.a, self.b, 4 * self.n], params=[self.n]),
            "closed context replay": graph.replay,
            "closed context sequence": live_seq.run,
            "closed context upload": lambda: da.upload(self.a),
            "closed context download": lambda: da.download(),
        }
        for label, fn in cases.items():
            with self.subTest(label):
                got, calls = self.both(fn)
                self.assertEqual(got[0], "raised", label)
                self.assertTrue(calls, f"{label}: the compiled path fell back")

    def test_a_list_changed_during_marshalling(self):
        """A binding declaration whose role runs code that empties the list
        being marshalled: no crash, a result or a clean exception on either
        path (the paths read roles at different moments, so they may differ)."""
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        victims = []

        class Sneaky(vc.Binding):
            __slots__ = ()

            @property
            def role(self):
                for v in victims:
                    v.clear()
                return vc.Role.OUTPUT

            @role.setter
            def role(self, value):
                pass

        prog = self.ctx.program(ADD_PTX, "vyre_test_add_u32",
                                [vc.Binding("input"), vc.Binding("input"), Sneaky("output")])

        def run():
            bindings = [da, db, bytearray(4 * self.n)]
            victims[:] = [bindings]
            try:
                return prog.dispatch(bindings, params=[self.n])
            finally:
                victims.clear()
        self.assertIn(outcome(run)[0], ("ok", "raised"))
        with ctypes_path():
            self.assertIn(outcome(run)[0], ("ok", "raised"))

    def test_no_reference_leaks(self):
        """Repeated calls, good and bad, leave every object's count as it was."""
        da, db = self.ctx.upload(self.a), self.ctx.upload(self.b)
        dout = self.ctx.alloc(4 * self.n)
        freed = self.ctx.alloc(16)
        freed.close()
        out = bytearray(4 * self.n)
        params = [self.n]
        seq = self.ctx.sequence([vc.DispatchStep(self.add, [da, db, dout], params=params),
                                 vc.DownloadStep(dout, out=bytearray(4 * self.n))])
        self.addCleanup(seq.close)
        closed_seq = self.ctx.sequence([vc.DownloadStep(dout)])
        closed_seq.close()
        pinned = self.ctx.pinned(4 * self.n)
        self.addCleanup(pinned.close)
        watched = [da, db, dout, out, self.a, self.b, params, freed, seq, closed_seq, pinned]

        def calls():
            self.add.dispatch([da, db, dout], params=params)
            self.add.dispatch([self.a, self.b, out], params=params)
            self.add.dispatch_async([da, self.b, out], params=params).wait()
            outcome(lambda: self.add.dispatch([da, freed, out], params=params))
            outcome(lambda: self.add.dispatch([self.a, self.b, bytes(4)], params=params))
            db.upload(self.b)
            db.download(out=out)
            outcome(lambda: freed.download(out=out))
            seq.run()
            outcome(closed_seq.run)
            self.add.dispatch([pinned, self.b, pinned], params=params)
            self.add.dispatch_async([da, pinned, pinned], params=params).wait()
            outcome(lambda: self.add.dispatch([self.a, self.b, pinned], params=[2 * self.n]))
            db.upload(pinned)
            db.download(out=pinned)
        calls()
        before = [sys.getrefcount(o) for o in watched]
        for _ in range(50):
            calls()
        self.assertEqual([sys.getrefcount(o) for o in watched], before)
        self.assert_unexported(out)


if __name__ == "__main__":
    unittest.main()
