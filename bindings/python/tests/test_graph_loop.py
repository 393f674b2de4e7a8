"""Loop graphs (Graph.loop, vyre_graph_loop_create) on real kernels, or on
the fake driver (which runs WHILE nodes, the library's control kernel and the
test kernels on the host); skipped without a GPU unless
VYRE_CUDA_REQUIRE_GPU=1.

Run from bindings/python:  python3 -m unittest discover -s tests -v
Environment as for test_vyre_cuda.py. The body is a countdown
(vyre_test_countdown_u32: every positive element drops by one, and the flag
word is set while one is still positive) recorded over resident data, its
flag word the loop's condition word. Every launch runs over fresh random
non-zero data with the condition and count words poisoned first, and every
element is compared with a model of the countdown (tests/unit/
graph_loop_test.cc is the C version).
"""

import array
import gc
import unittest
import weakref

import vyre_cuda as vc

from test_graph_capture import CheckMixin, u32_list
from test_interop import CaiArray
from test_vyre_cuda import FAKE_DRIVER, fake_stats, gpu_context, kernel_ptx, seeded_rng

POISON = 0xA5A5A5A5
N = 1000

# vyre_test_countdown_u32(u32* data, u32* flag, const u32* params): for
# i < params[0], a positive data[i] drops by one, and *flag = 1 while data[i]
# is still positive after.
COUNTDOWN_PTX = kernel_ptx("countdown_u32.ptx")
COUNTDOWN_BINDINGS = [vc.Binding(vc.Role.INPUT_OUTPUT, name="data"),
                      vc.Binding(vc.Role.INPUT_OUTPUT, name="flag")]


def countdowns(n, top, rng):
    """n random values in [1, top]: each needs that many rounds to reach 0."""
    return array.array("I", (rng.randint(1, top) for _ in range(n)))


def cpu_countdown(values, iterations):
    """What `iterations` rounds of the countdown leave."""
    return [max(0, v - iterations) for v in values]


class GraphLoopTest(CheckMixin, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.ctx = gpu_context()
        if not vc.has_function("vyre_graph_loop_create"):
            cls.ctx.close()
            raise unittest.SkipTest("the loaded library has no vyre_graph_loop_create")
        cls.prog = cls.ctx.program(COUNTDOWN_PTX, "vyre_test_countdown_u32", COUNTDOWN_BINDINGS,
                                   workgroup_size=256)
        cls.rng = seeded_rng("GraphLoopTest")

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()
        cls.ctx.close()

    def setUp(self):
        if FAKE_DRIVER:
            gc.collect()
            self.stats_before = fake_stats()
        self.data = self.ctx.alloc(4 * N)
        # [0] the condition word, [1] the count word, [2..3] spare (untouched).
        self.words = self.ctx.alloc(16)

    def tearDown(self):
        self.data.close()
        self.words.close()
        if FAKE_DRIVER:
            gc.collect()
            after = fake_stats()
            self.assertEqual(after.graphs_live, self.stats_before.graphs_live,
                             "CUDA graphs leaked")
            self.assertEqual(after.graph_execs_live, self.stats_before.graph_execs_live,
                             "executable graphs leaked")

    def record_body(self):
        """The countdown over self.data with words[0] as its flag, recorded."""
        return self.prog.record([self.data, (self.words, 0, 4)], params=[N])

    def expect_status(self, status, fn, *args, **kwargs):
        e = super().expect_status(status, fn, *args, **kwargs)
        self.assertIn("vyre_graph_loop_create", str(e))
        return e

    def launch_and_check(self, loop, max_iterations, top, label, has_count=True,
                         replay=None):
        """Fresh countdowns, poisoned words, one launch of `loop`; checks every
        element, the condition word, the count word and the spare words."""
        values = countdowns(N, top, self.rng)
        self.data.upload(values)
        self.words.upload(array.array("I", [POISON]) * 4)
        (replay or loop.replay)()
        peak = max(values)
        rounds = min(max(peak, 1), max_iterations)
        got = u32_list(self.data.download())
        self.assert_elements(got, cpu_countdown(values, rounds), f"{label}: data")
        words = u32_list(self.words.download())
        if peak > max_iterations:
            self.assertNotEqual(words[0], 0, f"{label}: the bound stopped the loop, so the "
                                             f"condition word stays set")
        else:
            self.assertEqual(words[0], 0, f"{label}: the body cleared the condition word")
        if has_count:
            self.assertEqual(words[1], rounds, f"{label}: count word")
        else:
            self.assertEqual(words[1], POISON, f"{label}: no count word, untouched")
        self.assertEqual(words[2:], [POISON, POISON], f"{label}: spare words untouched")
        return values

    def test_runs_until_the_body_clears_the_condition(self):
        body = self.record_body()
        with body.loop(condition=(self.words, 0), max_iterations=100,
                       count=(self.words, 4)) as loop:
            self.assertIs(loop.body, body)
            self.assertIsNone(body.body)
            self.assertEqual(loop.context, self.ctx)
            values = self.launch_and_check(loop, 100, 40, "max 100")
            # Values in [1, 40]: the loop ran as many rounds as the largest.
            self.assertEqual(u32_list(self.words.download(4, offset=4))[0], max(values))
            self.assertEqual(loop.node_kinds(),
                             [vc.GraphNodeKind.KERNEL, vc.GraphNodeKind.CONDITIONAL])
            self.assertEqual(loop.info()["replays"], 1)
            body.close()  # the loop keeps its body
            self.launch_and_check(loop, 100, 40, "max 100, body closed")
        body.close()

    def test_stops_at_the_bound_with_the_condition_still_set(self):
        with self.record_body() as body, \
                body.loop(condition=(self.words, 0), max_iterations=5,
                          count=(self.words, 4)) as loop:
            values = self.launch_and_check(loop, 5, 40, "max 5", replay=None)
            self.assertGreater(max(values), 5, "the data must outlast the bound")
            # A bound of one runs the body once.
            with body.loop(self.words, 1, count=vc.BufferRange(self.words, 4)) as once:
                self.launch_and_check(once, 1, 40, "max 1")

    def test_replayed_again_with_fresh_data(self):
        with self.record_body() as body, \
                body.loop(condition=(self.words, 0), max_iterations=100,
                          count=(self.words, 4)) as loop:
            for i in range(2):
                self.launch_and_check(loop, 100, 40, f"replay {i}")
            self.launch_and_check(loop, 100, 40, "replay_async",
                                  replay=lambda: loop.replay_async().wait())
            self.assertEqual(loop.info()["replays"], 3)

    def test_without_a_count_word(self):
        with self.record_body() as body, \
                body.loop(condition=(self.words, 0), max_iterations=1000) as loop:
            self.launch_and_check(loop, 1000, 90, "no count", has_count=False)

    def test_the_loop_keeps_what_it_uses_referenced(self):
        # Dropped by the caller, the body Graph, its buffers and the words
        # stay alive (and open) while the loop does, and go with it.
        data = self.ctx.alloc(4 * N)
        words = self.ctx.alloc(8)
        body = self.prog.record([data, (words, 0, 4)], params=[N])
        loop = body.loop(condition=(words, 0), max_iterations=100, count=(words, 4))
        values = countdowns(N, 40, self.rng)
        data.upload(values)
        words.upload(array.array("I", [POISON, POISON]))
        refs = [weakref.ref(o) for o in (data, words, body)]
        del data, words, body
        gc.collect()
        self.assertTrue(all(r() is not None for r in refs), "dropped while the loop lives")
        loop.replay()
        data, words, body = (r() for r in refs)
        self.assertIs(loop.body, body)
        self.assert_elements(u32_list(data.download()), [0] * N, "kept data")
        self.assertEqual(u32_list(words.download()), [0, max(values)])
        del data, words, body
        loop.close()
        self.assertIsNone(loop.body)
        gc.collect()
        self.assertEqual([r() for r in refs], [None, None, None], "kept after close()")

    def test_a_foreign_array_stays_wrapped_while_the_loop_lives(self):
        # The body binds the data through a wrap of a foreign array (CUDA
        # array interface): closing or rebinding the body leaves the wrap
        # open while a loop over it lives; the last owner closes it.
        foreign = CaiArray(self.data.device_pointer, (N,))
        body = self.prog.record([foreign, (self.words, 0, 4)], params=[N])
        wraps = list(body._imports)
        self.assertEqual(len(wraps), 1)
        loop = body.loop(condition=(self.words, 0), max_iterations=100,
                         count=(self.words, 4))
        body.replay(bindings=[self.data, (self.words, 0, 4)])  # rebinds the body
        body.close()
        self.assertFalse(wraps[0].closed, "the loop's share keeps the wrap open")
        self.launch_and_check(loop, 100, 40, "foreign body")
        loop.close()
        self.assertTrue(wraps[0].closed, "the last owner closes the wrap")

    def test_a_sequence_body_loops_too(self):
        with self.ctx.sequence([vc.DispatchStep(self.prog, [self.data, (self.words, 0, 4)],
                                                params=[N])]) as seq, \
                seq.record() as body, \
                body.loop(condition=(self.words, 0), max_iterations=64,
                          count=(self.words, 4)) as loop:
            seq.close()
            body.close()
            self.launch_and_check(loop, 64, 50, "sequence body")
            self.launch_and_check(loop, 64, 99, "sequence body, bounded")

    def test_refusals(self):
        with self.record_body() as body:
            e = self.expect_status(vc.Status.INVALID_ARGUMENT, body.loop,
                                   condition=(self.words, 0), max_iterations=0,
                                   count=(self.words, 4))
            self.assertIn("Fix:", str(e))
            # A misaligned offset.
            self.expect_status(vc.Status.INVALID_ARGUMENT, body.loop,
                               condition=(self.words, 2), max_iterations=10)
            self.expect_status(vc.Status.INVALID_ARGUMENT, body.loop,
                               condition=(self.words, 0), max_iterations=10,
                               count=(self.words, 13))
            # Past the buffer's end.
            self.expect_status(vc.Status.OUT_OF_RANGE, body.loop,
                               condition=(self.words, 16), max_iterations=10)
            # The count on the condition's word.
            self.expect_status(vc.Status.INVALID_ARGUMENT, body.loop,
                               condition=(self.words, 4), max_iterations=10,
                               count=(self.words, 4))
            # Checked here: the Python types and ranges.
            with self.assertRaises(TypeError):
                body.loop(condition=b"\0\0\0\0", max_iterations=10)
            with self.assertRaises(TypeError):
                body.loop(condition=(1, 0), max_iterations=10)
            with self.assertRaises(ValueError):
                body.loop(condition=(self.words, 0), max_iterations=2 ** 32)
            with self.assertRaises(ValueError):
                body.loop(condition=(self.words, -4), max_iterations=10)
        # A body with HOST bindings.
        host = array.array("I", [3]) * N
        flag = array.array("I", [0])
        with self.prog.record([host, flag], params=[N]) as host_body:
            self.expect_status(vc.Status.INVALID_ARGUMENT, host_body.loop,
                               condition=(self.words, 0), max_iterations=10)
        # A closed body, a closed word buffer.
        body = self.record_body()
        body.close()
        with self.assertRaises(vc.VyreError) as cm:
            body.loop(condition=(self.words, 0), max_iterations=10)
        self.assertIn(cm.exception.status, (vc.Status.INVALID_HANDLE, vc.Status.STALE_HANDLE))
        with self.record_body() as body:
            spare = self.ctx.alloc(16)
            spare.close()
            with self.assertRaises(vc.VyreError) as cm:
                body.loop(condition=(spare, 0), max_iterations=10)
            self.assertIn(cm.exception.status,
                          (vc.Status.INVALID_HANDLE, vc.Status.STALE_HANDLE))

    def test_an_older_library_raises_library_load_error(self):
        from vyre_cuda import _loader
        saved = _loader._lib_missing
        _loader._lib_missing = saved | {"vyre_graph_loop_create"}
        try:
            with self.record_body() as body:
                with self.assertRaises(vc.LibraryLoadError) as cm:
                    body.loop(condition=(self.words, 0), max_iterations=10)
        finally:
            _loader._lib_missing = saved
        self.assertIn("Graph.loop", str(cm.exception))
        self.assertIn("Fix:", str(cm.exception))

    def test_a_freed_word_buffer_stales_the_loop(self):
        words = self.ctx.alloc(16)
        with self.prog.record([self.data, (words, 0, 4)], params=[N]) as body:
            loop = body.loop(condition=(words, 0), max_iterations=10)
            words.close()
            with self.assertRaises(vc.VyreError) as cm:
                loop.replay()
            self.assertEqual(cm.exception.status, vc.Status.STALE_HANDLE, str(cm.exception))
            loop.close()


if __name__ == "__main__":
    unittest.main()
