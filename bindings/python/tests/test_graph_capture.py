"""Graph node changes (Graph.set_node_info) and captures of caller work
(Context.capture) on real kernels, or on the fake driver (which runs the
test kernels and graph nodes on the host); skipped without a GPU unless
VYRE_CUDA_REQUIRE_GPU=1.

Run from bindings/python:  python3 -m unittest discover -s tests -v
Environment as for test_vyre_cuda.py. Every replay is checked element by
element against a reference (numpy's when numpy is installed, else the same
arithmetic in Python) over fresh random non-zero data, with the outputs
poisoned first. "Other CUDA code" on the capture stream is played by raw
driver calls (cuMemcpyHtoDAsync, cuMemsetD8Async) through the driver the
library loaded, when that driver is the fake one.
"""

import array
import ctypes
import os
import threading
import unittest

import vyre_cuda as vc

from test_vyre_cuda import (ADD_BINDINGS, ADD_PTX, FAKE_DRIVER, INC_BINDINGS, INC_PTX,
                            fake_stats, gpu_context, kernel_ptx, seeded_rng)

try:
    import numpy as np
except ImportError:  # the reference is computed in Python then
    np = None

POISON = 0xA5A5A5A5
SAXPY_PTX = kernel_ptx("saxpy_f32.ptx")
SAXPY_BINDINGS = [vc.Binding(vc.Role.INPUT, name="x"),
                  vc.Binding(vc.Role.INPUT_OUTPUT, name="y")]
# vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n)
SAXPY_PARAMS = [(vc.ParamKind.SCALAR32, 0), (vc.ParamKind.BINDING, 0),
                (vc.ParamKind.BINDING, 1), (vc.ParamKind.SCALAR64, 1)]


def u32_list(data):
    out = array.array("I")
    out.frombytes(bytes(data))
    return list(out)


def f32_list(data):
    out = array.array("f")
    out.frombytes(bytes(data))
    return list(out)


def random_u32(n, rng):
    """n random non-zero u32 values: a numpy array when numpy is installed."""
    values = [rng.randrange(1, 2 ** 32) for _ in range(n)]
    return np.array(values, dtype=np.uint32) if np is not None else array.array("I", values)


def add_u32(a, b):
    """The reference of vyre_test_add_u32, as a list."""
    if np is not None:
        return (np.asarray(a, dtype=np.uint32) + np.asarray(b, dtype=np.uint32)).tolist()
    return [(x + y) & 0xFFFFFFFF for x, y in zip(a, b)]


def inc_u32(a):
    if np is not None:
        return np.asarray(a, dtype=np.uint32) + np.uint32(1)
    return array.array("I", ((x + 1) & 0xFFFFFFFF for x in a))


def same_info(info):
    """A node info dict without memset_pitch (which a set ignores)."""
    return {k: v for k, v in info.items() if k != "memset_pitch"}


class CheckMixin:
    def assert_elements(self, got, expected, label):
        """Every element of got (a list) equals expected's."""
        expected = list(expected)
        self.assertEqual(len(got), len(expected), f"{label}: length")
        bad = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
        if bad:
            i = bad[0]
            self.fail(f"{label}: {len(bad)} of {len(got)} elements wrong; first [{i}] = "
                      f"{got[i]!r}, expected {expected[i]!r}")

    def expect_status(self, status, fn, *args, **kwargs):
        with self.assertRaises(vc.VyreError) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertEqual(e.status, status, str(e))
        self.assertEqual(e.status_name, "VYRE_STATUS_" + status.name)
        self.assertIn("Fix:", e.message)
        return e

    def poison(self, buf, n):
        buf.upload(array.array("I", [POISON]) * n)


def _new_library_or_skip():
    for name in ("vyre_graph_node_info_set", "vyre_capture_begin", "vyre_capture_dispatch",
                 "vyre_capture_end"):
        if not vc.has_function(name):
            raise unittest.SkipTest(f"the loaded library has no {name}")


class NodeInfoSetTest(CheckMixin, unittest.TestCase):
    """Graph.set_node_info: read, edit, set; replays run what was set."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = gpu_context()
        _new_library_or_skip()
        cls.add = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                  workgroup_size=256)
        cls.saxpy = cls.ctx.program(SAXPY_PTX, "vyre_test_saxpy_f32", SAXPY_BINDINGS,
                                    workgroup_size=256, params=SAXPY_PARAMS)
        cls.rng = seeded_rng("NodeInfoSetTest")

    @classmethod
    def tearDownClass(cls):
        cls.saxpy.close()
        cls.add.close()
        cls.ctx.close()

    def test_memset_node_round_trip(self):
        n = 96
        with self.ctx.alloc(4 * n) as buf, \
                self.ctx.sequence([vc.FillStep(buf, 0x11)]) as seq, seq.record() as graph:
            m = graph.node_kinds().index(vc.GraphNodeKind.MEMSET)
            info = graph.node_info(m)
            self.assertEqual(info["kind"], vc.GraphNodeKind.MEMSET)
            self.assertEqual((info["memset_dst"], info["memset_value"],
                              info["memset_element_size"], info["memset_width"],
                              info["memset_height"]), (buf.device_pointer, 0x11, 1, 4 * n, 1))
            v32 = self.rng.randrange(1, 2 ** 32)
            v16 = self.rng.randrange(1, 2 ** 16) | 1
            # (element size, value, what each covered u32 reads, first word, words)
            cases = [(4, v32, v32, 3, n // 2), (2, v16, v16 | v16 << 16, 10, 7),
                     (1, 0xC3, 0xC3C3C3C3, 0, n)]
            for element_size, value, word, first, words in cases:
                with self.subTest(element_size=element_size):
                    info = graph.node_info(m)
                    info["memset_dst"] = buf.device_pointer + 4 * first
                    info["memset_element_size"] = element_size
                    info["memset_value"] = value
                    info["memset_width"] = words * 4 // element_size
                    graph.set_node_info(m, info)
                    self.assertEqual(same_info(graph.node_info(m)), same_info(info),
                                     "node_info reads back the set")
                    self.poison(buf, n)
                    graph.replay()
                    expected = [POISON] * n
                    expected[first:first + words] = [word] * words
                    self.assert_elements(u32_list(buf.download()), expected,
                                         f"memset of {element_size}-byte elements")
            # A partial dict: the other fields keep the node's values.
            graph.set_node_info(m, {"memset_value": 0x5A})
            self.assertEqual(graph.node_info(m)["memset_value"], 0x5A)
            self.assertEqual(graph.node_info(m)["memset_width"], 4 * n)
            self.poison(buf, n)
            graph.replay()
            self.assert_elements(u32_list(buf.download()), [0x5A5A5A5A] * n, "partial set")

    def test_kernel_node_scalar_slots_round_trip(self):
        n = 300
        # Small integers: a * x + y is exact in float32 on any device.
        x = array.array("f", (float(self.rng.randrange(1, 1000)) for _ in range(n)))
        y = array.array("f", (float(self.rng.randrange(1, 1000)) for _ in range(n)))
        with self.ctx.upload(x) as bx, self.ctx.upload(y) as by, \
                self.saxpy.record([bx, by], scalars=[1.0, n], grid=2) as graph:
            k = graph.kernel_nodes()[0]
            info = graph.node_info(k)
            self.assertEqual(info["argument_count"], 4)
            self.assertEqual(info["arguments"][1:3], [bx.device_pointer, by.device_pointer])
            self.assertEqual(info["arguments"][0], vc.f32(1.0))
            self.assertEqual(info["arguments"][3], n)
            a, count = 2.5, 200
            info["arguments"][0] = vc.f32(a)
            info["arguments"][3] = count
            info["grid"] = [1, 1, 1]  # 256 threads: still covers count
            graph.set_node_info(k, info)
            self.assertEqual(same_info(graph.node_info(k)), same_info(info),
                             "node_info reads back the set")
            expected = list(y)
            for _ in range(2):
                graph.replay()
                expected[:count] = [a * xi + yi for xi, yi in zip(x[:count], expected[:count])]
            self.assert_elements(f32_list(by.download()), expected, "saxpy after the set")
            # The block may change (the grid is explicit): 64 threads, 64 elements.
            info = graph.node_info(k)
            info["block"] = [64, 1, 1]
            graph.set_node_info(k, info)
            graph.replay()
            expected[:64] = [a * xi + yi for xi, yi in zip(x[:64], expected[:64])]
            self.assert_elements(f32_list(by.download()), expected, "saxpy with 64 threads")

    def test_pointer_slots_need_raw(self):
        n = 128
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout, self.ctx.alloc(4 * n) as other, \
                self.add.record([da, db, dout], params=[n]) as graph:
            k = graph.kernel_nodes()[0]
            info = graph.node_info(k)
            self.assertEqual(info["arguments"][2], dout.device_pointer)
            info["arguments"][2] = other.device_pointer
            e = self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k, info)
            self.assertIn("vyre_graph_node_info_set", str(e))
            self.assertEqual(graph.node_info(k)["arguments"][2], dout.device_pointer,
                             "a refused set changes nothing")
            graph.set_node_info(k, info, raw=True)
            self.assertEqual(graph.node_info(k)["arguments"][2], other.device_pointer)
            self.poison(dout, n)
            self.poison(other, n)
            graph.replay()
            # The memset still zeroes dout; the kernel writes other.
            self.assert_elements(u32_list(other.download()), add_u32(a, b), "raw pointer slot")
            self.assert_elements(u32_list(dout.download()), [0] * n, "zeroed output")

    def test_refusals(self):
        n = 64
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout, \
                self.add.record([da, db, dout], params=[n]) as graph:
            kinds = graph.node_kinds()
            k, m = kinds.index(vc.GraphNodeKind.KERNEL), kinds.index(vc.GraphNodeKind.MEMSET)
            kernel, memset = graph.node_info(k), graph.node_info(m)
            bad = dict(kernel, kind=vc.GraphNodeKind.MEMSET)
            for raw in (False, True):
                self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k, bad,
                                   raw=raw)
            # Another node's info (its handles name that node).
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k, memset)
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, m, kernel)
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k,
                               {"cu_function": kernel["cu_function"] + 8})
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k,
                               {"argument_count": kernel["argument_count"] + 1})
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k,
                               {"grid": [0, 1, 1]})
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, m,
                               {"memset_element_size": 3})
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, m,
                               {"memset_height": 2})
            self.expect_status(vc.Status.OUT_OF_RANGE, graph.set_node_info, len(kinds), kernel)
            # Refused here, before the library.
            with self.assertRaises(ValueError) as cm:
                graph.set_node_info(k, {"gird": [1, 1, 1]})
            self.assertIn("Fix:", str(cm.exception))
            with self.assertRaises(ValueError):
                graph.set_node_info(k, {"arguments": [0] * (vc.GRAPH_NODE_MAX_ARGUMENTS + 1)})
            with self.assertRaises(ValueError):
                graph.set_node_info(k, {"grid": [1, 1]})
            with self.assertRaises(ValueError):
                graph.set_node_info(m, {"memset_value": 2 ** 32})
            with self.assertRaises(TypeError):
                graph.set_node_info(k, [kernel])
            # Nothing changed: the graph still adds.
            self.assertEqual(graph.node_info(k), kernel)
            self.assertEqual(graph.node_info(m), memset)
            self.poison(dout, n)
            graph.replay()
            self.assert_elements(u32_list(dout.download()), add_u32(a, b), "after refusals")
        self.expect_status(vc.Status.INVALID_HANDLE, graph.set_node_info, k, kernel)


class CaptureTest(CheckMixin, unittest.TestCase):
    """Context.capture: library dispatches (and, on the fake driver, raw
    driver calls) captured, run only at replay, replayed in order."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = gpu_context()
        _new_library_or_skip()
        cls.add = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                  workgroup_size=256)
        cls.inc = cls.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS,
                                  workgroup_size=256)
        cls.rng = seeded_rng("CaptureTest")

    @classmethod
    def tearDownClass(cls):
        cls.inc.close()
        cls.add.close()
        cls.ctx.close()

    def setUp(self):
        self.before = fake_stats() if FAKE_DRIVER else None

    def tearDown(self):
        if FAKE_DRIVER:
            after = fake_stats()
            # Graphs this test left open are released by their close().
            self.assertEqual(after.misuse_errors, self.before.misuse_errors, "driver misuse")

    def test_capture_dispatch_end_and_replay(self):
        n = 1000
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        da, db = self.ctx.upload(a), self.ctx.upload(b)
        dout = self.ctx.upload(array.array("I", [POISON]) * n)
        launches = fake_stats().kernel_launches if FAKE_DRIVER else 0
        with self.ctx.capture() as cap:
            self.assertTrue(cap.open)
            self.assertNotEqual(cap.stream, 0)
            self.assertEqual(cap.mode, vc.CaptureMode.THREAD_LOCAL)
            cap.dispatch(self.inc, [da], params=[n])           # a += 1
            cap.dispatch(self.add, [da, db, dout], params=[n])  # out = a + b
        self.assertFalse(cap.open)
        self.assertEqual(cap.stream, 0)
        graph = cap.graph
        self.assertIs(cap.end(), graph, "end() after the with-block gives the same graph")
        self.assertTrue(graph.from_capture)
        self.assertFalse(graph.from_sequence)
        self.assertIsNone(graph.program)
        self.assertIs(graph.context, self.ctx)
        # Captured, not run.
        if FAKE_DRIVER:
            self.assertEqual(fake_stats().kernel_launches, launches)
        self.assert_elements(u32_list(da.download()), list(a), "a before any replay")
        self.assert_elements(u32_list(dout.download()), [POISON] * n, "out before any replay")
        info = graph.info()
        self.assertEqual(info["kernel_node_count"], 2)
        kinds = graph.node_kinds()
        self.assertEqual(kinds.count(vc.GraphNodeKind.KERNEL), 2)
        self.assertIn(vc.GraphNodeKind.MEMSET, kinds)  # out's zeroing
        for k in graph.kernel_nodes():
            node = graph.node_info(k)
            self.assertNotEqual(node["cu_function"], 0)
            self.assertEqual(node["argument_count"], 0, "captured kernels report no arguments")
            self.assertEqual(node["arguments"], [])
            # A captured kernel cannot be set through the library.
            self.expect_status(vc.Status.INVALID_ARGUMENT, graph.set_node_info, k, node,
                               raw=True)
        expected_a = a
        for round_ in range(4):
            with self.subTest(round=round_):
                self.poison(dout, n)
                if round_ < 2:
                    outs = graph.replay()
                    self.assertEqual(list(outs), [])
                elif round_ == 2:
                    graph.replay_async().wait()
                else:
                    with graph.launch(vc.STREAM_LEGACY) as pending:
                        pending.wait()
                expected_a = inc_u32(expected_a)
                self.assert_elements(u32_list(da.download()), list(expected_a),
                                     f"a after replay {round_}")
                self.assert_elements(u32_list(dout.download()), add_u32(expected_a, b),
                                     f"out after replay {round_}")
        # A captured graph takes no replay arguments.
        self.expect_status(vc.Status.INVALID_ARGUMENT, graph.replay, element_count=5)
        graph.close()
        for buf in (da, db, dout):
            buf.close()

    def test_captured_memset_node_is_settable(self):
        # out has a tail the kernel does not write: the zeroing memset's
        # value shows there.
        n, tail = 200, 56
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * (n + tail)) as dout:
            with self.ctx.capture() as cap:
                cap.dispatch(self.add, [da, db, (dout, 0, 4 * n)], params=[n])
            with cap.graph as graph:
                m = graph.node_kinds().index(vc.GraphNodeKind.MEMSET)
                info = graph.node_info(m)
                self.assertEqual(info["memset_dst"], dout.device_pointer)
                self.assertEqual(info["memset_width"] * info["memset_element_size"], 4 * n)
                value = self.rng.randrange(1, 2 ** 32)
                info["memset_element_size"] = 4
                info["memset_value"] = value
                info["memset_width"] = n + tail
                graph.set_node_info(m, info)
                self.assertEqual(same_info(graph.node_info(m)), same_info(info))
                self.poison(dout, n + tail)
                graph.replay()
                self.assert_elements(u32_list(dout.download()), add_u32(a, b) + [value] * tail,
                                     "sum, then the memset's value")

    def test_an_exception_discards_the_capture(self):
        n = 64
        with self.ctx.alloc(4 * n) as buf:
            self.poison(buf, n)
            graphs = fake_stats().graphs_live if FAKE_DRIVER else 0
            with self.assertRaises(KeyError):
                with self.ctx.capture() as cap:
                    cap.dispatch(self.inc, [buf], params=[n])
                    raise KeyError("boom")
            self.assertFalse(cap.open)
            with self.assertRaises(RuntimeError) as cm:
                cap.graph
            self.assertIn("Fix:", str(cm.exception))
            if FAKE_DRIVER:
                self.assertEqual(fake_stats().graphs_live, graphs, "the graph was discarded")
            self.assertEqual(self.ctx.telemetry()["live_graphs"], 0)
            # Nothing ran, and the context captures again.
            self.assert_elements(u32_list(buf.download()), [POISON] * n, "discarded work")
            with self.ctx.capture(mode="relaxed") as cap:
                cap.dispatch(self.inc, [buf], params=[n])
            cap.graph.replay()
            cap.graph.close()
            self.assert_elements(u32_list(buf.download()), [POISON + 1] * n, "recaptured")

    def test_refusals(self):
        n = 64
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.alloc(4 * n) as dout:
            with self.ctx.capture(param_bytes=256) as cap:
                # Begin twice.
                e = self.expect_status(vc.Status.INVALID_STATE, self.ctx.capture)
                self.assertIn("vyre_capture_begin", str(e))
                # Host data and cooperative dispatches cannot be captured.
                self.expect_status(vc.Status.INVALID_ARGUMENT, cap.dispatch, self.add,
                                   [da, db, 4 * n], params=[n])
                self.expect_status(vc.Status.INVALID_ARGUMENT, cap.dispatch, self.add,
                                   [da, db, dout], params=[n],
                                   flags=vc.DISPATCH_FLAG_COOPERATIVE)
                # Over param_bytes.
                self.expect_status(vc.Status.LIMIT_EXCEEDED, cap.dispatch, self.add,
                                   [da, db, dout], params=[n] * 65)
                # The capture stream joined to the work stream.
                self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.wait_stream, cap.stream)
                self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.signal_stream,
                                   cap.stream)
                # Ended only by the thread that began a THREAD_LOCAL capture.
                errors = []
                t = threading.Thread(target=lambda: errors.append(self._end_status(cap)))
                t.start()
                t.join()
                self.assertEqual(errors, [vc.Status.INVALID_STATE])
                self.assertTrue(cap.open, "a refused end leaves the capture open")
                cap.dispatch(self.add, [da, db, dout], params=[n])  # still usable
            self.poison(dout, n)
            cap.graph.replay()
            self.assert_elements(u32_list(dout.download()), add_u32(a, b), "after refusals")
            cap.graph.close()
            # End and dispatch with no capture open.
            self.expect_status(vc.Status.INVALID_STATE, cap.dispatch, self.add, [da, db, dout],
                               params=[n])
            with self.ctx.capture() as other:
                pass
            other.graph.close()
            other.abort()  # a capture already over: nothing to do
            cap2 = self.ctx.capture()
            cap2.abort()
            self.assertFalse(cap2.open)
            e = self.expect_status(vc.Status.INVALID_STATE, cap2.end)
            self.assertIn("vyre_capture_end", str(e))
            # Bad arguments.
            with self.assertRaises(ValueError) as cm:
                self.ctx.capture(mode="sideways")
            self.assertIn("Fix:", str(cm.exception))
            self.expect_status(vc.Status.INVALID_ARGUMENT, self.ctx.capture, mode=7)

    @staticmethod
    def _end_status(cap):
        try:
            cap.end()
        except vc.VyreError as e:
            return e.status
        return vc.Status.OK

    def test_relaxed_capture_ends_on_another_thread(self):
        n = 100
        with self.ctx.alloc(4 * n) as buf:
            self.poison(buf, n)
            cap = self.ctx.capture(vc.CaptureMode.RELAXED)
            self.assertIn("open", repr(cap))
            cap.dispatch(self.inc, [buf], params=[n])
            graphs = []
            t = threading.Thread(target=lambda: graphs.append(cap.end()))
            t.start()
            t.join()
            self.assertEqual(len(graphs), 1)
            with graphs[0] as graph:
                graph.replay()
                graph.replay()
            self.assert_elements(u32_list(buf.download()), [POISON + 2] * n, "two replays")

    def test_closing_the_context_ends_its_capture(self):
        ctx = gpu_context()
        cap = ctx.capture()
        ctx.close()
        self.assertFalse(cap.open)
        self.assertTrue(ctx.closed)

    def test_raw_driver_work_on_the_capture_stream(self):
        """Other CUDA code's work (a host-to-device copy and a byte fill,
        through the raw driver API) captured around a library dispatch."""
        if not FAKE_DRIVER:
            self.skipTest("raw driver calls are made through the fake driver")
        cu = RawDriver(os.environ["VYRE_CUDA_DRIVER_LIBRARY"])
        n = 500
        a = random_u32(n, self.rng)
        host_b = array.array("I", random_u32(n, self.rng))  # read by the copy at each replay
        b_address = host_b.buffer_info()[0]
        with self.ctx.upload(a) as da, self.ctx.alloc(4 * n) as db, \
                self.ctx.alloc(4 * n) as dout, self.ctx.alloc(64) as flag, cu.current():
            self.poison(db, n)
            self.poison(dout, n)
            flag.upload(bytes(64))
            with self.ctx.capture() as cap:
                cu.check("cuMemcpyHtoDAsync", cu.memcpy_htod(db.device_pointer, b_address,
                                                             4 * n, cap.stream))
                cap.dispatch(self.add, [da, db, dout], params=[n])
                cu.check("cuMemsetD8Async", cu.memset_d8(flag.device_pointer, 0x7E, 64,
                                                         cap.stream))
            with cap.graph as graph:
                kinds = graph.node_kinds()
                self.assertEqual(kinds[0], vc.GraphNodeKind.MEMCPY)
                self.assertEqual(kinds[-1], vc.GraphNodeKind.MEMSET)
                self.assert_elements(u32_list(db.download()), [POISON] * n, "not run yet")
                self.assertEqual(bytes(flag.download()), bytes(64))
                for round_ in range(3):
                    fresh = random_u32(n, self.rng)
                    memoryview(host_b)[:] = array.array("I", fresh)  # in place: the copy reads it
                    self.poison(dout, n)
                    flag.upload(bytes(64))
                    graph.replay()
                    self.assert_elements(u32_list(db.download()), list(host_b),
                                         f"copied b, replay {round_}")
                    self.assert_elements(u32_list(dout.download()), add_u32(a, host_b),
                                         f"out, replay {round_}")
                    self.assertEqual(bytes(flag.download()), b"\x7e" * 64)


class RawDriver:
    """The few driver calls the capture test plays "other CUDA code" with,
    through cuGetProcAddress_v2 of the driver library the library loaded."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        get = lib.cuGetProcAddress_v2
        get.restype = ctypes.c_int
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                        ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
        u64, vp, i32 = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int

        def proc(name, *argtypes):
            fn = ctypes.c_void_p()
            status = ctypes.c_int()
            r = get(name.encode(), ctypes.byref(fn), 12000, 0, ctypes.byref(status))
            if r != 0 or not fn.value:
                raise unittest.SkipTest(f"{path} has no {name} (CUresult {r})")
            return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(fn.value)

        self.cuInit = proc("cuInit", ctypes.c_uint)
        self.cuDeviceGet = proc("cuDeviceGet", ctypes.POINTER(i32), i32)
        self.cuDevicePrimaryCtxRetain = proc("cuDevicePrimaryCtxRetain",
                                             ctypes.POINTER(vp), i32)
        self.cuDevicePrimaryCtxRelease = proc("cuDevicePrimaryCtxRelease", i32)
        self.cuCtxGetCurrent = proc("cuCtxGetCurrent", ctypes.POINTER(vp))
        self.cuCtxSetCurrent = proc("cuCtxSetCurrent", vp)
        self.memcpy_htod = proc("cuMemcpyHtoDAsync", u64, vp, ctypes.c_size_t, u64)
        self.memset_d8 = proc("cuMemsetD8Async", u64, ctypes.c_ubyte, ctypes.c_size_t, u64)

    @staticmethod
    def check(name, result):
        if result != 0:
            raise AssertionError(f"{name} returned CUresult {result}")

    def current(self):
        """A context manager making device 0's primary context current."""
        driver = self

        class _Current:
            def __enter__(self):
                driver.check("cuInit", driver.cuInit(0))
                self.device = ctypes.c_int()
                driver.check("cuDeviceGet", driver.cuDeviceGet(ctypes.byref(self.device), 0))
                ctx = ctypes.c_void_p()
                driver.check("cuDevicePrimaryCtxRetain",
                             driver.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.device))
                self.previous = ctypes.c_void_p()
                if driver.cuCtxGetCurrent(ctypes.byref(self.previous)) != 0:
                    self.previous = ctypes.c_void_p()
                driver.check("cuCtxSetCurrent", driver.cuCtxSetCurrent(ctx))
                return self

            def __exit__(self, *exc):
                driver.cuCtxSetCurrent(self.previous)
                driver.cuDevicePrimaryCtxRelease(self.device)

        return _Current()


def tearDownModule():
    if FAKE_DRIVER:
        misuse = fake_stats().misuse_errors
        if misuse:
            raise AssertionError(f"the engine misused the (fake) driver API {misuse} times; "
                                 f"its stderr shows each call")


if __name__ == "__main__":
    unittest.main()
