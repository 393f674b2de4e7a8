"""PyTorch tensors and CuPy arrays bound at their own speed (issue 21, scope 2).

A dispatch reads a torch.Tensor / cupy.ndarray (exact types) directly, with
no DLPack capsule, and binds it through a wrap of its memory the Context
keeps by (device pointer, bytes). The fake driver cannot serve real PyTorch
or CuPy, so these tests register small stand-ins that speak the same
attributes (over a vyre buffer's device pointer, which on the fake driver is
real memory) and, for the generic path they fall back to, DLPack or the CUDA
array interface, as the real types do. They run through the compiled path
and, under VYRE_CUDA_PURE_PYTHON=1 (or with it switched off), through ctypes.
"""

import array
import contextlib
import ctypes
import gc
import types
import unittest
import weakref

import vyre_cuda as vc
from vyre_cuda import _interop, _loader, _program

from test_fast_path import ctypes_path
from test_vyre_cuda import (ADD_BINDINGS, ADD_PTX, FAKE_DRIVER, INC_BINDINGS, INC_PTX,
                            check_sum, fake_stats, gpu_context, random_u32, seeded_rng)


# The package's own (setUp records the waits through a wrapper).
ORIGINAL_WAIT_STREAMS = _program._wait_streams


class _DType:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize


# A stand-in for the torch module: what _interop._torch_reader reads of it.
class _FakeTorchC:
    current = 0  # the raw current stream (0: the legacy default stream)

    @classmethod
    def _cuda_getCurrentRawStream(cls, index):
        return cls.current


FAKE_TORCH = types.SimpleNamespace(strided=object(), sparse_coo=object(),
                                   int32=_DType("int32", 4), uint8=_DType("uint8", 1),
                                   complex64=_DType("complex64", 8), _C=_FakeTorchC)


class FakeTensor:
    """What a dispatch reads of a torch.Tensor, plus DLPack (through a vyre
    DeviceArray over the same memory) for the generic path."""

    def __init__(self, buf, count=None, dtype="int32", device=None, contiguous=True,
                 requires_grad=False, offset=0):
        dt = getattr(FAKE_TORCH, dtype)
        self._buf = buf
        self._count = buf.nbytes // dt.itemsize if count is None else count
        self._offset = offset
        self.dtype = dt
        self._device = buf.context.device if device is None else device
        self._contiguous = contiguous
        self.requires_grad = requires_grad
        self.is_cuda = True
        self.layout = FAKE_TORCH.strided
        self.reads = 0  # data_ptr() calls: the direct path ran
        self._pointer = buf.device_pointer + offset

    def data_ptr(self):
        self.reads += 1
        return self._pointer

    @property
    def nbytes(self):
        return self._count * self.dtype.itemsize

    def is_contiguous(self):
        return self._contiguous

    def is_neg(self):
        return False

    def get_device(self):
        return self._device

    def __dlpack_device__(self):
        return (2, self._device)

    def __dlpack__(self, *, stream=None, **kwargs):
        if not self._contiguous:
            raise AssertionError("a strided stand-in speaks the CUDA array interface")
        view = self._buf.as_array("uint8", self.nbytes, self._offset)
        return view.__dlpack__(stream=stream, **kwargs)


FAKE_TORCH.Tensor = FakeTensor


class FakeCaiTensor(FakeTensor):
    """A tensor whose generic path is the CUDA array interface: for a
    non-contiguous view (strides) or any pointer (the DeviceArray export
    behind FakeTensor.__dlpack__ is contiguous and inside its buffer only)."""

    __dlpack_device__ = None

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self._count,), "typestr": "<u4", "version": 3, "stream": None,
                "data": (self._buf.device_pointer + self._offset, False),
                "strides": None if self._contiguous else (8,)}


# A stand-in for PyTorch's DLPack C exchange API (DLPack 1.2): a table of C
# functions in a capsule on the tensor type. Its functions are ctypes
# callbacks that describe a FakeExchangeTensor from its fields.
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_FROM_OBJECT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_DLTensor))
_WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                ctypes.POINTER(ctypes.c_void_p))


class _ExchangeHeader(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p)]


class _ExchangeApi(ctypes.Structure):
    _fields_ = [("header", _ExchangeHeader), ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", _FROM_OBJECT),
                ("current_work_stream", _WORK_STREAM)]


# (dtype name -> DLPack code, bits)
_DL_DTYPES = {"int32": (0, 32), "uint8": (1, 8), "complex64": (5, 64)}


class _Exchange:
    """Counts what the compiled path asks of the table."""
    tensors = 0
    streams = 0


@_FROM_OBJECT
def _exchange_tensor(obj, out):
    _Exchange.tensors += 1
    if obj.exchange_fails:
        return -1  # (a producer refusing: no exception to carry through ctypes)
    code, bits = _DL_DTYPES[obj.dtype.name]
    t = out[0]
    t.data = obj._pointer
    t.device_type, t.device_id = 2, obj._device
    t.ndim, t.code, t.bits, t.lanes = 1, code, bits, 1
    obj._dl_shape = (ctypes.c_int64 * 1)(obj._count)
    obj._dl_strides = (ctypes.c_int64 * 1)(1 if obj._contiguous else 2)
    t.shape = obj._dl_shape
    t.strides = obj._dl_strides
    t.byte_offset = 0
    return 0


@_WORK_STREAM
def _exchange_stream(device_type, device_id, out):
    _Exchange.streams += 1
    out[0] = _FakeTorchC.current or None
    return 0


def _exchange_capsule(major=1):
    api = _ExchangeApi()
    api.header.major, api.header.minor = major, 2
    api.dltensor_from_py_object_no_sync = _exchange_tensor
    api.current_work_stream = _exchange_stream
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(api), _CAPSULE_NAME, None)
    _keep.append(api)  # the capsule points into it
    return capsule


_CAPSULE_NAME = b"dlpack_exchange_api"  # the capsule keeps this pointer
_keep = []


class FakeExchangeTensor(FakeCaiTensor):
    """A tensor whose type carries the exchange API, as torch.Tensor does
    from PyTorch 2.10 (its generic path: the CUDA array interface)."""

    __dlpack_c_exchange_api__ = _exchange_capsule()

    def __init__(self, buf, count=None, dtype="int32", neg=False, exchange_fails=False,
                 **kwargs):
        super().__init__(buf, count, dtype, **kwargs)
        self._neg = neg
        self.exchange_fails = exchange_fails

    def is_neg(self):
        return self._neg


class FakeCupyArray:
    """What a dispatch reads of a cupy.ndarray."""

    _c_contiguous = True  # (a descriptor on the real type)

    def __init__(self, buf, contiguous=True, device=None):
        self._buf = buf
        self.data = types.SimpleNamespace(ptr=buf.device_pointer,
                                          device_id=buf.context.device
                                          if device is None else device)
        self.nbytes = buf.nbytes
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        self._c_contiguous = contiguous
        self.dtype = types.SimpleNamespace(kind="u")

    def __dlpack_device__(self):
        return (2, self.data.device_id)

    def __dlpack__(self, *, stream=None, **kwargs):
        return self._buf.as_array("uint32").__dlpack__(stream=stream, **kwargs)


_FakeCupyStream = types.SimpleNamespace(ptr=0)


class _FakeCupyRuntime:
    device_reads = 0

    @classmethod
    def getDevice(cls):
        cls.device_reads += 1
        return 0


FAKE_CUPY = types.SimpleNamespace(cuda=types.SimpleNamespace(
    get_current_stream=lambda: _FakeCupyStream, runtime=_FakeCupyRuntime),
    ndarray=FakeCupyArray)
FAKE_TORCH_EXCHANGE = types.SimpleNamespace(**{**vars(FAKE_TORCH), "Tensor": FakeExchangeTensor})
_STAND_INS = (FakeTensor, FakeCaiTensor, FakeExchangeTensor, FakeCupyArray)




@contextlib.contextmanager
def generic_only():
    """The stand-ins unregistered: what every call did before the cache."""
    saved = dict(_interop._readers)
    for t in _STAND_INS:
        _interop._readers.pop(t, None)
        _interop._plain_types[t] = True
    try:
        yield
    finally:
        for t in _STAND_INS:
            _interop._plain_types.pop(t, None)
        _interop._readers.update(saved)


def outcome(fn):
    try:
        return ("ok", fn())
    except vc.VyreError as e:
        return ("raised", type(e).__name__, str(e), e.status, e.message)
    except (TypeError, ValueError, BufferError) as e:
        return ("raised", type(e).__name__, str(e))


class KnownArrayTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        vc.load()
        for name in ("vyre_buffer_wrap", "vyre_context_wait_stream",
                     "vyre_context_signal_stream"):
            if not vc.has_function(name):
                raise unittest.SkipTest(f"the loaded library has no {name}")
        torch_reader = _interop._torch_reader(FAKE_TORCH)
        _interop._readers[FakeTensor] = torch_reader
        _interop._readers[FakeCaiTensor] = torch_reader
        _interop._readers[FakeCupyArray] = _interop._cupy_reader(FAKE_CUPY)
        _interop._readers[FakeExchangeTensor] = _interop._torch_reader(FAKE_TORCH_EXCHANGE)

    @classmethod
    def tearDownClass(cls):
        for t in _STAND_INS:
            _interop._readers.pop(t, None)

    def setUp(self):
        self.ctx = gpu_context()
        self.addCleanup(self.ctx.close)
        self.add = self.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS,
                                    workgroup_size=64)
        self.inc = self.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS,
                                    workgroup_size=64)
        self.rng = seeded_rng(self.id())
        self.n = 1000
        _FakeTorchC.current = 0
        self.waits, self.signals = [], []
        wait, signal = _program._wait_streams, _program._signal_streams

        def record_wait(context, streams):
            streams = list(streams)
            self.waits.append(list(dict.fromkeys(streams)))
            wait(context, streams)

        def record_signal(context, streams):
            streams = list(streams)
            self.signals.append(list(dict.fromkeys(streams)))
            signal(context, streams)

        _program._wait_streams, _program._signal_streams = record_wait, record_signal

        def restore():
            _program._wait_streams, _program._signal_streams = wait, signal
        self.addCleanup(restore)

    def live(self):
        return self.ctx.telemetry()["live_buffers"]

    def paths(self):
        """The paths this process can run: compiled (when in use) and ctypes."""
        out = [("ctypes", ctypes_path)]
        if _loader._fast is not None:
            out.insert(0, ("compiled", contextlib.nullcontext))
        return out

    def test_repeated_calls_reuse_the_wraps(self):
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        ta, tb, tout = FakeTensor(da), FakeTensor(db), FakeTensor(dout)
        for label, path in self.paths():
            with self.subTest(label), path():
                self.ctx.trim()  # an empty cache
                live = self.live()
                for call in range(6):
                    # New contents every call: the cached wrap is the memory.
                    a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                    da.upload(a)
                    db.upload(b)
                    dout.upload(bytes(4 * n))
                    outs = self.add.dispatch([ta, tb, tout], params=[n])
                    self.assertEqual(list(outs), [None, None, None])
                    check_sum(self, a, b, dout.download(), f"{label} call {call}")
                    self.assertEqual(len(self.ctx._wraps), 3)
                    self.assertEqual(self.live(), live + 3, "one wrap per array, kept")
                self.assertGreaterEqual(ta.reads, 6, "read directly, not through DLPack")
                # Fresh stand-ins over the same memory: the same wraps.
                self.add.dispatch([FakeTensor(da), FakeCupyArray(db), FakeTensor(dout)],
                                  params=[n])
                self.assertEqual(self.live(), live + 3)
                check_sum(self, a, b, dout.download(), f"{label} new objects")
                # Resident and host entries mixed in: still right.
                dout.upload(bytes(4 * n))
                self.add.dispatch([a, db, tout], params=[n])
                check_sum(self, a, b, dout.download(), f"{label} mixed")

    def test_a_different_range_wraps_again(self):
        n = self.n
        da, db = self.ctx.alloc(4 * n), self.ctx.alloc(4 * n)
        outs = [self.ctx.alloc(4 * n) for _ in range(2)]
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        da.upload(a)
        db.upload(b)
        live = self.live()
        for k, out in enumerate(outs):
            self.add.dispatch([FakeTensor(da), FakeTensor(db), FakeTensor(out)], params=[n])
            check_sum(self, a, b, out.download(), f"output {k}")
        self.assertEqual(self.live(), live + 4)
        # The same pointer with fewer bytes is another range.
        half = n // 2
        self.add.dispatch([FakeTensor(da, half), FakeTensor(db, half), FakeTensor(outs[0], half)],
                          params=[half])
        self.assertEqual(len(self.ctx._wraps), 7)
        check_sum(self, a[:half], b[:half], outs[0].download(4 * half), "half")
        # An array at an offset inside a buffer.
        dout = self.ctx.alloc(8 * n)
        self.add.dispatch([FakeTensor(da), FakeTensor(db), FakeTensor(dout, n, offset=4 * n)],
                          params=[n])
        check_sum(self, a, b, dout.download(4 * n, offset=4 * n), "offset")

    def test_the_cache_is_bounded(self):
        """Past the limit the oldest wraps leave the cache; one evicted by a
        later array of the same call stays usable until that call is done."""
        n = 64
        saved = _interop._WRAP_CACHE_LIMIT
        _interop._WRAP_CACHE_LIMIT = 2  # fewer than the three arrays of a call
        self.addCleanup(setattr, _interop, "_WRAP_CACHE_LIMIT", saved)
        bufs = [self.ctx.alloc(4 * n) for _ in range(9)]
        for label, path in self.paths():
            with self.subTest(label), path():
                self.ctx.trim()
                live = self.live()
                for k in range(8):
                    a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                    bufs[k].upload(a)
                    bufs[k + 1].upload(b)
                    out = self.ctx.alloc(4 * n)
                    self.add.dispatch([FakeTensor(bufs[k]), FakeTensor(bufs[k + 1]),
                                       FakeTensor(out)], params=[n])
                    check_sum(self, a, b, out.download(), f"{label} call {k}")
                    out.close()
                    self.assertLessEqual(len(self.ctx._wraps), 2)
                    self.assertLessEqual(self.live(), live + 1 + 2, "evicted wraps freed")
                # Async: the evicted wraps stay valid for the work in flight.
                a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                bufs[0].upload(a)
                bufs[1].upload(b)
                pending = self.add.dispatch_async(
                    [FakeTensor(bufs[0]), FakeTensor(bufs[1]), FakeTensor(bufs[2])],
                    params=[n])
                pending.wait()
                pending.close()
                check_sum(self, a, b, bufs[2].download(), f"{label} async")

    def test_streams_are_ordered_as_through_dlpack(self):
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        ta, tb, tout = FakeTensor(da), FakeTensor(db), FakeTensor(dout)
        for label, path in self.paths():
            with self.subTest(label), path():
                # The producer on the legacy default stream: one wait.
                _FakeTorchC.current = 0
                del self.waits[:], self.signals[:]
                self.add.dispatch([ta, tb, tout], params=[n])
                self.assertEqual(self.waits, [[vc.STREAM_LEGACY]])
                self.assertEqual(self.signals, [], "a dispatch that waits signals nothing")
                # Another current stream: it and the dispatch's stream.
                _FakeTorchC.current = vc.STREAM_PER_THREAD
                del self.waits[:]
                self.add.dispatch([ta, tb, tout], params=[n])
                self.assertEqual(self.waits, [[vc.STREAM_PER_THREAD, vc.STREAM_LEGACY]])
                del self.waits[:]
                self.add.dispatch([ta, tb, tout], params=[n], stream=vc.STREAM_PER_THREAD)
                self.assertEqual(self.waits, [[vc.STREAM_PER_THREAD]])
                # Async: the dispatch's stream waits for the work afterwards.
                del self.waits[:]
                a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                da.upload(a)
                db.upload(b)
                dout.upload(bytes(4 * n))
                live = self.live()
                pending = self.add.dispatch_async([ta, tb, tout], params=[n],
                                                  stream=vc.STREAM_PER_THREAD)
                self.assertEqual(self.waits, [[vc.STREAM_PER_THREAD]])
                self.assertEqual(self.signals, [[vc.STREAM_PER_THREAD]])
                self.assertEqual(self.live(), live, "no wrap per call")
                pending.wait()
                pending.close()
                check_sum(self, a, b, dout.download(), f"{label} async")

    def test_the_compiled_call_reads_the_arrays_itself(self):
        """Without a `stream`, once the wraps are cached, the compiled
        dispatch reads the arrays, binds the wraps and orders the work after
        their streams (through _wait_streams) on its own: no Python resolve,
        the same waits, the right sums, no reference left behind."""
        if _loader._fast is None:
            self.skipTest(f"the compiled path is off: {_loader._fast_reason}")
        import sys
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        ta, tb, tout = FakeTensor(da), FakeTensor(db), FakeCupyArray(dout)
        resolves = []
        resolve = _program._resolve_known

        def counted(*args):
            resolves.append(args)
            return resolve(*args)
        _program._resolve_known = counted
        self.addCleanup(setattr, _program, "_resolve_known", resolve)
        self.add.dispatch([ta, tb, tout], params=[n])  # the wraps made
        del resolves[:], self.waits[:]
        _FakeTorchC.current = vc.STREAM_PER_THREAD
        counts = [sys.getrefcount(x) for x in (ta, tb, tout)]
        wraps = dict(self.ctx._wraps)
        wrap_counts = {k: sys.getrefcount(v) for k, v in wraps.items()}
        for call in range(4):
            a, b = random_u32(n, self.rng), random_u32(n, self.rng)
            da.upload(a)
            db.upload(b)
            dout.upload(bytes(4 * n))
            outs = self.add.dispatch([ta, tb, tout], params=[n])
            self.assertEqual(list(outs), [None, None, None])
            self.assertIsNotNone(outs.timing)
            check_sum(self, a, b, dout.download(), f"call {call}")
        self.assertEqual(resolves, [], "read in the compiled call")
        # The torch stand-ins' stream, the CuPy stand-in's (0: legacy), once each.
        self.assertEqual(self.waits, [[vc.STREAM_PER_THREAD, vc.STREAM_LEGACY]] * 4)
        self.assertEqual([sys.getrefcount(x) for x in (ta, tb, tout)], counts)
        self.assertEqual({k: sys.getrefcount(v) for k, v in wraps.items()}, wrap_counts)
        # The package's own _wait_streams (the compiled call then makes the
        # context wait itself): the same sums.
        recording = _program._wait_streams
        _program._wait_streams = ORIGINAL_WAIT_STREAMS
        try:
            for current in (vc.STREAM_PER_THREAD, 0):
                _FakeTorchC.current = current
                a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                da.upload(a)
                db.upload(b)
                dout.upload(bytes(4 * n))
                self.add.dispatch([ta, tb, tout], params=[n])
                check_sum(self, a, b, dout.download(), f"direct waits, stream {current}")
        finally:
            _program._wait_streams = recording
        self.assertEqual(resolves, [])
        # A wait that fails: its error, and nothing dispatched.
        recording = _program._wait_streams
        _program._wait_streams = lambda context, streams: 1 / 0
        before = self.ctx.telemetry()["dispatches"]
        try:
            with self.assertRaises(ZeroDivisionError):
                self.add.dispatch([ta, tb, tout], params=[n])
        finally:
            _program._wait_streams = recording
        self.assertEqual(self.ctx.telemetry()["dispatches"], before)
        # A reader interrupted: the interrupt propagates (only an Exception
        # sends the array to the generic path).
        def interrupted(t, device):
            raise KeyboardInterrupt
        interrupted.stream = lambda device: 0
        _interop._readers[FakeCaiTensor] = interrupted
        try:
            for label, path in self.paths():
                with self.subTest(label), path(), self.assertRaises(KeyboardInterrupt):
                    self.add.dispatch([FakeCaiTensor(da), tb, tout], params=[n])
        finally:
            _interop._readers[FakeCaiTensor] = _interop._readers[FakeTensor]
        # A reader that declines (another device): the generic path, as before.
        with generic_only():
            want = outcome(lambda: self.add.dispatch([FakeTensor(da, device=7), tb, tout],
                                                     params=[n]))
        self.assertEqual(outcome(lambda: self.add.dispatch([FakeTensor(da, device=7), tb, tout],
                                                           params=[n])), want)

    def test_async_keeps_the_arrays_until_the_wait(self):
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        da.upload(a)
        db.upload(b)
        for label, path in self.paths():
            with self.subTest(label), path():
                ta = FakeTensor(da)
                ref = weakref.ref(ta)
                pending = self.add.dispatch_async([ta, FakeCupyArray(db), FakeTensor(dout)],
                                                  params=[n])
                del ta
                gc.collect()
                self.assertIsNotNone(ref(), "referenced while the work may run")
                pending.wait()
                pending.close()
                gc.collect()
                self.assertIsNone(ref(), "let go after the wait")
                check_sum(self, a, b, dout.download(), label)

    def test_bad_inputs_fail_as_through_the_generic_path(self):
        n = 16
        buf = self.ctx.alloc(4 * n)
        good = FakeTensor(buf)
        other = self.ctx.device + 1
        cases = {
            "non-contiguous": [good, good, FakeCaiTensor(buf, n // 2, contiguous=False)],
            "another device": [FakeTensor(buf, device=other), good, good],
            "cupy on another device": [FakeCupyArray(buf, device=other), good, good],
            "cupy non-contiguous": [good, FakeCupyArray(buf, contiguous=False), good],
            "empty": [FakeTensor(buf, 0), good, good],
            "too small": [good, good, FakeTensor(buf, n // 2)],
            "unknown pointer": [good, good, FakeCaiTensor(buf, offset=1 << 40)],
            "bad stream": None,
        }
        live = self.live()
        for label, bindings in cases.items():
            if bindings is None:
                def call():
                    return self.add.dispatch([good, good, good], params=[n], stream="x")
            else:
                def call(bindings=bindings):
                    return self.add.dispatch(bindings, params=[n])
            with self.subTest(label):
                with generic_only():
                    want = outcome(call)
                if label not in ("cupy non-contiguous", "too small"):
                    # (The stand-ins' DLPack export is contiguous; a resident
                    # range's size is the kernel's business.)
                    self.assertEqual(want[0], "raised", f"{label}: {want}")
                if want[0] == "raised":
                    self.assertIn("Fix:", want[2])
                for path_label, path in self.paths():
                    with path():
                        self.assertEqual(outcome(call), want, f"{label} ({path_label})")
                self.ctx.trim()
                self.assertEqual(self.live(), live, f"{label}: no wrap left behind")
        # Declined by the direct reader but fine for the generic path: a
        # tensor that requires grad (real PyTorch's DLPack then refuses it).
        self.inc.dispatch([FakeTensor(buf, requires_grad=True)], params=[n])
        self.assertEqual(len(self.ctx._wraps), 0)

    def test_closing_the_context_drops_the_wraps(self):
        ctx = gpu_context()
        add = ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS, workgroup_size=64)
        n = 64
        bufs = [ctx.alloc(4 * n) for _ in range(3)]
        tensors = [FakeTensor(b) for b in bufs]
        add.dispatch(tensors, params=[n])
        cached = list(ctx._wraps.values())
        self.assertEqual(len(cached), 3)
        ctx.close()
        self.assertEqual(ctx._wraps, {})
        self.assertTrue(all(b.closed for b in cached))
        for label, path in self.paths():
            with self.subTest(label), path():
                with generic_only():
                    want = outcome(lambda: add.dispatch(tensors, params=[n]))
                self.assertEqual(want[0], "raised")
                self.assertEqual(outcome(lambda: add.dispatch(tensors, params=[n])), want)
                self.assertEqual(ctx._wraps, {}, "nothing cached on a closed context")

    def test_trim_drops_the_wraps(self):
        n = 64
        bufs = [self.ctx.alloc(4 * n) for _ in range(3)]
        live = self.live()
        self.add.dispatch([FakeTensor(b) for b in bufs], params=[n])
        self.assertEqual(self.live(), live + 3)
        self.ctx.trim()
        self.assertEqual(self.live(), live)
        self.assertEqual(self.ctx._wraps, {})

    def test_the_exchange_api_reads_tensors_in_c(self):
        """A tensor type with the DLPack C exchange API (PyTorch 2.10+) is
        read through it by the compiled call once its wraps are cached: one C
        call a tensor and one for the stream, no Python read; the same wraps,
        sums and waits as the Python reader gives."""
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        ta, tb, tout = (FakeExchangeTensor(buf) for buf in (da, db, dout))
        for label, path in self.paths():
            for current in (0, vc.STREAM_PER_THREAD):
                with self.subTest(label, current=current), path():
                    _FakeTorchC.current = current
                    self.ctx.trim()
                    live = self.live()
                    for call in range(4):
                        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                        da.upload(a)
                        db.upload(b)
                        dout.upload(bytes(4 * n))
                        del self.waits[:]
                        tensors, streams, reads = _Exchange.tensors, _Exchange.streams, ta.reads
                        outs = self.add.dispatch([ta, tb, tout], params=[n])
                        self.assertEqual(list(outs), [None, None, None])
                        check_sum(self, a, b, dout.download(), f"{label} call {call}")
                        self.assertEqual(self.waits, [[vc.STREAM_LEGACY]] if current == 0 else
                                         [[vc.STREAM_PER_THREAD, vc.STREAM_LEGACY]])
                        self.assertEqual(self.live(), live + 3, "one wrap per tensor, kept")
                        if label == "ctypes":
                            self.assertEqual(_Exchange.tensors, tensors)
                        elif call > 0:  # (the first call caches the wraps in Python)
                            self.assertEqual(_Exchange.tensors - tensors, 3)
                            self.assertEqual(_Exchange.streams - streams, 1, "once a call")
                            self.assertEqual(ta.reads, reads, "no Python read")
        # The async path resolves through the same reads.
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        da.upload(a)
        db.upload(b)
        dout.upload(bytes(4 * n))
        pending = self.add.dispatch_async([ta, tb, tout], params=[n])
        pending.wait()
        pending.close()
        check_sum(self, a, b, dout.download(), "async")

    def test_the_exchange_api_declines_what_the_reader_declines(self):
        """What the Python reader declines, the exchange read declines too
        (no wrap cached): the generic path binds it or raises its error, the
        same on every path. A table that refuses a tensor leaves it to the
        Python reader."""
        n = 16
        buf = self.ctx.alloc(4 * n)
        cases = {
            "requires grad": dict(requires_grad=True),
            "negative view": dict(neg=True),
            "complex": dict(count=n // 2, dtype="complex64"),
            "non-contiguous": dict(count=n // 2, contiguous=False),
            "another device": dict(device=self.ctx.device + 1),
            "empty": dict(count=0),
            "the producer refuses": dict(exchange_fails=True),
        }
        for label, kwargs in cases.items():
            def call(kwargs=kwargs):
                return self.inc.dispatch([FakeExchangeTensor(buf, **kwargs)], params=[n])
            with self.subTest(label):
                self.ctx.trim()
                with generic_only():
                    want = outcome(call)
                for path_label, path in self.paths():
                    with path():
                        tensors = _Exchange.tensors
                        self.assertEqual(outcome(call), want, f"{label} ({path_label})")
                        if path_label == "compiled" and label != "empty":
                            self.assertGreater(_Exchange.tensors, tensors, "asked")
                    # (A table refusing leaves the tensor to the Python
                    # reader, which binds it.)
                    self.assertEqual(len(self.ctx._wraps), label == "the producer refuses",
                                     f"{label}: declined")
        # A table of another major version is not read: the Python reader is.
        other = types.SimpleNamespace(**{**vars(FAKE_TORCH_EXCHANGE), "Tensor": type(
            "T2", (FakeExchangeTensor,), {"__dlpack_c_exchange_api__": _exchange_capsule(2)})})
        reader = _interop._torch_reader(other)
        _interop._readers[other.Tensor] = reader
        self.addCleanup(_interop._readers.pop, other.Tensor, None)
        a = random_u32(n, self.rng)
        buf.upload(a)
        t = other.Tensor(buf)
        for _ in range(3):
            self.inc.dispatch([t], params=[n])
        tensors, reads = _Exchange.tensors, t.reads
        self.inc.dispatch([t], params=[n])
        self.assertEqual(_Exchange.tensors, tensors)
        self.assertEqual(t.reads - reads, 1)
        self.assertEqual(list(array.array("I", bytes(buf.download()))),
                         [(x + 4) & 0xFFFFFFFF for x in a])

    def test_cupy_arrays_read_in_c(self):
        """The compiled call reads CuPy arrays itself, asking for the current
        device once a call (the Python reader asks once an array)."""
        n = self.n
        da, db, dout = (self.ctx.alloc(4 * n) for _ in range(3))
        arrays = [FakeCupyArray(buf) for buf in (da, db, dout)]
        for label, path in self.paths():
            with self.subTest(label), path():
                self.add.dispatch(arrays, params=[n])  # the wraps cached
                for call in range(3):
                    a, b = random_u32(n, self.rng), random_u32(n, self.rng)
                    da.upload(a)
                    db.upload(b)
                    dout.upload(bytes(4 * n))
                    del self.waits[:]
                    reads = _FakeCupyRuntime.device_reads
                    self.add.dispatch(arrays, params=[n])
                    check_sum(self, a, b, dout.download(), f"{label} call {call}")
                    self.assertEqual(self.waits, [[vc.STREAM_LEGACY]])
                    self.assertEqual(_FakeCupyRuntime.device_reads - reads,
                                     1 if label == "compiled" else 3)

    def test_the_compiled_stream_calls(self):
        fast = _loader._fast
        if fast is None:
            self.skipTest(f"the compiled path is off: {_loader._fast_reason}")
        self.assertIsNone(fast.context_wait_stream(self.ctx._bits, vc.STREAM_LEGACY))
        self.assertIsNone(fast.context_signal_stream(self.ctx._bits, vc.STREAM_PER_THREAD))
        self.assertIs(fast.context_wait_stream(self.ctx._bits, 0), NotImplemented)
        self.assertIs(fast.context_wait_stream(self.ctx._bits, "1"), NotImplemented)
        with self.assertRaises(TypeError):
            fast.context_wait_stream(self.ctx._bits)
        with self.assertRaises(vc.VyreError) as cm:
            fast.context_wait_stream(12345, vc.STREAM_LEGACY)
        self.assertIn("Fix:", str(cm.exception))

    def test_real_types_are_recognised_by_exact_type_only(self):
        self.assertIsNone(_interop._reader_of(bytearray))
        self.assertIsNone(_interop._reader_of(vc.Buffer))
        sub = type("Tensor", (FakeTensor,), {"__module__": "torch"})
        self.assertIsNone(_interop._reader_of(sub), "not torch.Tensor itself")


def tearDownModule():
    if FAKE_DRIVER:
        misuse = fake_stats().misuse_errors
        if misuse:
            raise AssertionError(f"the engine misused the (fake) driver API {misuse} times")


if __name__ == "__main__":
    unittest.main()
