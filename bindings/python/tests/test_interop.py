"""Interop tests: buffers exported through __cuda_array_interface__ and DLPack,
foreign device arrays bound to dispatches, CuPy and PyTorch on a GPU.

Run from bindings/python:  python3 -m unittest discover -s tests -v
(or pytest tests). Environment as for test_vyre_cuda.py: without a driver
the capsule tests run and the rest skip; on the fake driver
(VYRE_CUDA_TEST_FAKE_DRIVER=1) everything but CuPy/PyTorch runs; on a GPU
with VYRE_CUDA_REQUIRE_GPU=1 a missing GPU fails, a missing CuPy or
PyTorch skips. On a GPU, CuPy and PyTorch work is also captured on a
Context.capture stream around a library dispatch and the graph replayed.
"""

import array
import ctypes
import gc
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import vyre_cuda as vc
from vyre_cuda import _dlpack

from test_vyre_cuda import (ADD_BINDINGS, ADD_PTX, FAKE_DRIVER, INC_BINDINGS, INC_PTX,
                            check_sum, fake_stats, gpu_context, random_u32, seeded_rng)

U32 = "I" if array.array("I").itemsize == 4 else "L"


def capsule_pointer(capsule, name=b"dltensor"):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def capsule_name(capsule):
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype = ctypes.c_char_p
    get.argtypes = [ctypes.py_object]
    return get(capsule)


_USED = ctypes.create_string_buffer(b"used_dltensor")
_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")


def consume(capsule, versioned=False):
    """Does what a DLPack consumer does: renames the capsule and returns the
    managed tensor, whose deleter the caller then calls."""
    name = b"dltensor_versioned" if versioned else b"dltensor"
    address = capsule_pointer(capsule, name)
    set_name = ctypes.pythonapi.PyCapsule_SetName
    set_name.restype = ctypes.c_int
    set_name.argtypes = [ctypes.py_object, ctypes.c_void_p]
    set_name(capsule, ctypes.addressof(_USED_VERSIONED if versioned else _USED))
    cls = _dlpack.DLManagedTensorVersioned if versioned else _dlpack.DLManagedTensor
    return cls.from_address(address), address


def call_deleter(deleter, address):
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)(address)


def run_child(test, code, timeout=120):
    """Runs `code` in a fresh interpreter that imports this vyre_cuda (same
    environment otherwise) and returns its stdout; a crash, a hang or a
    non-zero exit fails `test` with the child's output."""
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(vc.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        test.fail(f"the child hung for {timeout} s; output: {e.stdout!r} {e.stderr!r}")
    test.assertEqual(proc.returncode, 0, f"child exit {proc.returncode}; stdout:\n"
                     f"{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


# What a C consumer does, without Python's headers (the symbols come from the
# interpreter that loads it). refuse: numpy.from_dlpack refusing a capsule
# (its own exception set, then its reference dropped). delete_failing: a
# consumer deleting a tensor it took while its own exception is set.
C_CONSUMER = r"""
typedef struct _object PyObject;
extern PyObject *PyExc_RuntimeError;
void PyErr_SetString(PyObject *, const char *);
void Py_DecRef(PyObject *);
PyObject *refuse(PyObject *capsule) {
  PyErr_SetString(PyExc_RuntimeError, "Unsupported device in DLTensor.");
  Py_DecRef(capsule);
  return 0;
}
PyObject *delete_failing(void *managed, void (*deleter)(void *)) {
  PyErr_SetString(PyExc_RuntimeError, "the consumer failed");
  deleter(managed);
  return 0;
}
"""


class CaiArray:
    """A foreign device array that speaks only __cuda_array_interface__."""

    def __init__(self, pointer, shape, typestr="<u4", read_only=False, strides=None,
                 stream=None, version=3, **extra):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr,
                                             data=(pointer, read_only), version=version,
                                             strides=strides, **extra)
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream


class DLPackArray:
    """A foreign device array that speaks only DLPack (it forwards to a
    vyre DeviceArray, so the real capsule path runs on the fake driver)."""

    def __init__(self, view, device=None, legacy_only=False):
        self._view = view
        self._device = device
        self._legacy_only = legacy_only
        self.streams = []

    def __dlpack_device__(self):
        return self._device or self._view.__dlpack_device__()

    def __dlpack__(self, *, stream=None, **kwargs):
        if self._legacy_only and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument")
        self.streams.append(stream)
        return self._view.__dlpack__(stream=stream, **kwargs)


class HostDLPack(bytearray):
    """Host memory that also advertises DLPack on the CPU (as numpy does)."""

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("host memory must go through the buffer protocol")


class DLPackCapsuleTest(unittest.TestCase):
    """The capsule machinery itself: no driver needed."""

    def setUp(self):
        self.released = []
        self.live_before = _dlpack.live_exports()

    def export(self, **kwargs):
        args = dict(data=0x7F0000001000, device=(2, 3), shape=(4, 5), dtype=(1, 32),
                    owner=self, on_release=lambda: self.released.append(1))
        args.update(kwargs)
        return _dlpack.export(**args)

    def test_legacy_capsule_layout(self):
        cap = self.export()
        self.assertEqual(capsule_name(cap), b"dltensor")
        m = _dlpack.DLManagedTensor.from_address(capsule_pointer(cap))
        t = m.dl_tensor
        self.assertEqual(t.data, 0x7F0000001000)
        self.assertEqual((t.device.device_type, t.device.device_id), (2, 3))
        self.assertEqual(t.ndim, 2)
        self.assertEqual([t.shape[0], t.shape[1]], [4, 5])
        self.assertEqual([t.strides[0], t.strides[1]], [5, 1])
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (1, 32, 1))
        self.assertEqual(t.byte_offset, 0)
        self.assertTrue(m.deleter)
        self.assertEqual(ctypes.sizeof(_dlpack.DLTensor), 48)
        self.assertEqual(ctypes.sizeof(_dlpack.DLManagedTensor), 64)
        del cap

    def test_versioned_capsule_layout(self):
        cap = self.export(versioned=True, read_only=True)
        self.assertEqual(capsule_name(cap), b"dltensor_versioned")
        m = _dlpack.DLManagedTensorVersioned.from_address(
            capsule_pointer(cap, b"dltensor_versioned"))
        self.assertEqual((m.version.major, m.version.minor), (1, 0))
        self.assertEqual(m.flags, _dlpack.FLAG_READ_ONLY)
        self.assertEqual(m.dl_tensor.data, 0x7F0000001000)
        self.assertEqual(_dlpack.DLManagedTensorVersioned.dl_tensor.offset, 32)
        del cap

    def test_unconsumed_capsule_deletes_once(self):
        cap = self.export()
        self.assertEqual(_dlpack.live_exports(), self.live_before + 1)
        del cap
        gc.collect()
        self.assertEqual(self.released, [1])
        self.assertEqual(_dlpack.live_exports(), self.live_before)

    def test_consumed_capsule_deletes_once(self):
        for versioned in (False, True):
            with self.subTest(versioned=versioned):
                self.released.clear()
                cap = self.export(versioned=versioned)
                managed, address = consume(cap, versioned)
                self.assertEqual(capsule_name(cap),
                                 b"used_dltensor_versioned" if versioned else b"used_dltensor")
                del cap  # renamed: the capsule no longer owns it
                gc.collect()
                self.assertEqual(self.released, [])
                # Read once: the first call frees the managed tensor, so a
                # second read of its deleter field would read freed memory
                # (it segfaulted once on the GPU machine).
                deleter = managed.deleter
                call_deleter(deleter, address)
                self.assertEqual(self.released, [1])
                call_deleter(deleter, address)  # a buggy second call changes nothing
                self.assertEqual(self.released, [1])
                self.assertEqual(_dlpack.live_exports(), self.live_before)

    def test_export_keeps_its_owner_alive(self):
        class Owner:
            pass
        owner = Owner()
        import weakref
        ref = weakref.ref(owner)
        cap = self.export(owner=owner)
        del owner
        gc.collect()
        self.assertIsNotNone(ref())
        del cap
        gc.collect()
        self.assertIsNone(ref())

    def test_reading_a_capsule(self):
        cap = self.export(shape=(3, 1, 2), dtype=(2, 64))
        imported = _dlpack.read(cap, "t")
        self.assertEqual(capsule_name(cap), b"used_dltensor")
        self.assertEqual(imported.shape, (3, 1, 2))
        self.assertEqual(imported.nbytes, 48)
        self.assertEqual(imported.data, 0x7F0000001000)
        self.assertEqual(imported.device, (2, 3))
        self.assertFalse(imported.read_only)
        with self.assertRaises(_dlpack.DLPackError) as cm:
            _dlpack.read(cap, "again")  # already consumed
        self.assertIn("Fix:", str(cm.exception))
        imported.release()
        imported.release()
        self.assertEqual(self.released, [1])

    def test_reading_refuses_non_contiguous(self):
        cap = self.export(shape=(4, 5))
        m = _dlpack.DLManagedTensor.from_address(capsule_pointer(cap))
        m.dl_tensor.strides[0] = 10  # a column slice of a wider matrix
        with self.assertRaises(_dlpack.DLPackError) as cm:
            _dlpack.read(cap, "binding 0")
        self.assertIn("not C-contiguous", str(cm.exception))
        self.assertIn("Fix:", str(cm.exception))
        self.assertEqual(capsule_name(cap), b"dltensor")  # still the producer's to delete
        del cap
        gc.collect()
        self.assertEqual(self.released, [1])

    def test_a_capsule_dropped_with_an_exception_pending_keeps_it(self):
        """A consumer refuses a capsule by setting its exception and dropping
        the capsule (numpy.from_dlpack on device memory). Freeing it must
        leave that exception alone: the capsule's old destructor, a ctypes
        callback, cleared it (SystemError "returned NULL without setting an
        exception", or a crash) and leaked the tensor. Here the capsule's
        only reference is on the interpreter's stack when refuse() raises, so
        it is dropped with the RuntimeError pending, as in C. In a child
        process, since the bug crashed the interpreter."""
        out = run_child(self, """
            import gc
            from vyre_cuda import _dlpack
            released = []
            def refuse():
                raise RuntimeError("Unsupported device in DLTensor.")
            for versioned in (False, True):
                try:
                    (_dlpack.export(0x7F0000001000, (2, 0), (4,), (1, 8), None,
                                    versioned=versioned,
                                    on_release=lambda v=versioned: released.append(v)),
                     refuse())
                    print("no exception")
                except RuntimeError as e:
                    print("RuntimeError:", e)
            gc.collect()
            print("released:", released, "live:", _dlpack.live_exports())
            print("released:", released, "live:", _dlpack.live_exports())
        """)
        self.assertEqual(out.splitlines(),
                         ["RuntimeError: Unsupported device in DLTensor."] * 2
                         + ["released: [False, True] live: 0"] * 2)

    def test_c_consumers_with_an_exception_pending(self):
        """The same from C (C_CONSUMER, compiled here), as numpy does it: the
        consumer's RuntimeError comes back intact and the tensor is deleted
        once. And a consumer that calls the deleter with its own exception
        set (a ctypes callback cannot keep that one) leaves the module
        working: the tensor is deleted once and the next export does not
        hang on a lock left held."""
        cc = os.environ.get("VYRE_CUDA_TEST_CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("needs a C compiler (VYRE_CUDA_TEST_CC)")
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "consumer.c")
            lib = os.path.join(tmp, "consumer.so")
            with open(src, "w") as f:
                f.write(C_CONSUMER)
            subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src], check=True)
            out = run_child(self, """
                import ctypes, gc, sys
                from vyre_cuda import _dlpack
                try:
                    lib = ctypes.PyDLL(%r)
                except OSError as e:
                    print("skip:", e)
                    sys.exit(0)
                refuse = lib.refuse
                refuse.restype, refuse.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
                delete_failing = lib.delete_failing
                delete_failing.restype = ctypes.c_void_p
                delete_failing.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
                incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))
                released = []
                for versioned in (False, True):
                    cap = _dlpack.export(0x7F0000001000, (2, 0), (4,), (1, 8), None,
                                         versioned=versioned,
                                         on_release=lambda v=versioned: released.append(v))
                    incref(cap)  # the consumer's reference, as __dlpack__() returns it
                    address = id(cap)
                    del cap
                    try:
                        refuse(address)
                        print("no exception")
                    except RuntimeError as e:
                        print("RuntimeError:", e)
                gc.collect()
                print("released:", released, "live:", _dlpack.live_exports())
                imported = _dlpack.read(_dlpack.export(0x7F0000001000, (2, 0), (4,), (1, 8),
                                                       None, on_release=lambda: released.append(2)),
                                        "t")
                managed, deleter = imported._managed, imported._deleter
                imported._deleter = None  # the consumer below deletes it
                try:
                    delete_failing(managed, deleter)
                except RuntimeError:
                    pass
                print("released:", released, "live:", _dlpack.live_exports())
            """ % lib)
        if out.startswith("skip:"):
            self.skipTest(out.strip())
        self.assertEqual(out.splitlines(),
                         ["RuntimeError: Unsupported device in DLTensor."] * 2
                         + ["released: [False, True] live: 0",
                            "released: [False, True, 2] live: 0"])

    def test_dtypes(self):
        for name, typestr, code, bits in (("uint8", "|u1", 1, 8), ("int32", "<i4", 0, 32),
                                          ("float32", "<f4", 2, 32), ("<u4", "<u4", 1, 32),
                                          ("float64", "<f8", 2, 64), ("bool", "|b1", 6, 8)):
            d = vc._dtype(name)
            if sys.byteorder == "little":
                self.assertEqual(d.typestr, typestr, name)
            self.assertEqual((d.code, d.bits), (code, bits), name)
        with self.assertRaises(TypeError) as cm:
            vc._dtype("quaternion")
        self.assertIn("Fix:", str(cm.exception))


class InteropTest(unittest.TestCase):
    """Exports and foreign bindings against a device: the fake driver in CI
    (its device memory is host memory, so a foreign array over another
    buffer's device_pointer is real), a GPU on the GPU machine."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = gpu_context()
        cls.prog = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
        cls.inc = cls.ctx.program(INC_PTX, "vyre_test_inc_u32", INC_BINDINGS)
        cls.rng = seeded_rng("InteropTest")

    @classmethod
    def tearDownClass(cls):
        cls.inc.close()
        cls.prog.close()
        cls.ctx.close()

    def need_wrap(self):
        for name in ("vyre_buffer_wrap", "vyre_context_wait_stream",
                     "vyre_context_signal_stream"):
            if not vc.has_function(name):
                self.skipTest(f"the loaded library has no {name}")

    def live_buffers(self):
        return self.ctx.telemetry()["live_buffers"]

    def test_cuda_array_interface(self):
        buf = self.ctx.alloc(256)
        ptr = buf.device_pointer
        self.assertEqual(buf.__cuda_array_interface__,
                         {"shape": (256,), "typestr": "|u1", "data": (ptr, False),
                          "strides": None, "version": 3, "stream": None})
        view = buf.as_array("uint32", (4, 8), offset=128)
        cai = view.__cuda_array_interface__
        self.assertEqual(cai["shape"], (4, 8))
        self.assertEqual(cai["typestr"], vc._dtype("uint32").typestr)
        self.assertEqual(cai["data"], (ptr + 128, False))
        self.assertEqual(view.nbytes, 128)
        self.assertEqual(buf.as_array("float32").shape, (64,))
        for bad in (dict(shape=(65,), dtype="float32"), dict(dtype="uint32", offset=257),
                    dict(dtype="float64", offset=4)):
            with self.subTest(bad=bad), self.assertRaises(ValueError) as cm:
                buf.as_array(**bad)
            self.assertIn("Fix:", str(cm.exception))
        buf.close()

    def test_dlpack_export(self):
        buf = self.ctx.alloc(96)
        ptr = buf.device_pointer
        self.assertEqual(buf.__dlpack_device__(), (2, self.ctx.device))
        before = _dlpack.released_exports()
        cap = buf.__dlpack__(stream=None)
        managed, address = consume(cap)
        t = managed.dl_tensor
        self.assertEqual(t.data, ptr)
        self.assertEqual((t.device.device_type, t.device.device_id), (2, self.ctx.device))
        self.assertEqual((t.ndim, t.shape[0], t.strides[0]), (1, 96, 1))
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (1, 8, 1))
        self.assertEqual(t.byte_offset, 0)
        # Closing while exported defers the free to the consumer's deleter.
        live = self.live_buffers()
        buf.close()
        buf.close()
        self.assertTrue(buf.closed)
        self.assertEqual(self.live_buffers(), live)
        del cap
        gc.collect()
        call_deleter(managed.deleter, address)
        self.assertEqual(self.live_buffers(), live - 1)
        self.assertEqual(_dlpack.released_exports() - before, 1)

        buf = self.ctx.alloc(64)
        view = buf.as_array("float32", (2, 8))
        cap = view.__dlpack__(max_version=(1, 2), stream=-1)
        managed, address = consume(cap, versioned=True)
        t = managed.dl_tensor
        self.assertEqual((managed.version.major, managed.flags), (1, 0))
        self.assertEqual((t.ndim, t.shape[0], t.shape[1], t.strides[0], t.strides[1]),
                         (2, 2, 8, 8, 1))
        self.assertEqual((t.dtype.code, t.dtype.bits), (2, 32))
        self.assertEqual(t.data, buf.device_pointer)
        call_deleter(managed.deleter, address)
        for kwargs, exc in ((dict(dl_device=(1, 0)), BufferError), (dict(copy=True), BufferError),
                            (dict(stream="s"), TypeError)):
            with self.subTest(kwargs=kwargs), self.assertRaises(exc) as cm:
                buf.__dlpack__(**kwargs)
            self.assertIn("Fix:", str(cm.exception))
        buf.close()

    def test_a_consumer_refusing_a_buffer_raises_its_own_error(self):
        """numpy.from_dlpack(buf) refuses device memory (the fake driver's is
        host memory, but the capsule says CUDA): numpy's own error comes
        through (RuntimeError "Unsupported device in DLTensor." in numpy 1.x
        and 2.x; BufferError allowed for later ones), not SystemError; the
        export is deleted once, the buffer stays usable and close() frees it
        at once. Without numpy, a consumer that raises with the capsule on
        its stack does the same."""
        def refuse():
            raise RuntimeError("Unsupported device in DLTensor.")

        consumers = [("stack", lambda obj: (obj.__dlpack__(), refuse()))]
        try:
            import numpy
            consumers.append(("numpy " + numpy.__version__, numpy.from_dlpack))
        except ImportError:
            pass
        n = 16
        data = random_u32(n, self.rng)
        live = self.live_buffers()
        exports = _dlpack.live_exports()
        buf = self.ctx.upload(data)
        for label, consume in consumers:
            for target in (buf, buf.as_array("uint32"), buf.as_array("float32", (4, 4))):
                with self.subTest(consumer=label, target=type(target).__name__):
                    with self.assertRaises((RuntimeError, BufferError)) as cm:
                        consume(target)
                    self.assertIn("Unsupported device", str(cm.exception))
        self.assertEqual(_dlpack.live_exports(), exports, "every refused capsule deleted")
        self.assertEqual(bytes(buf.download()), data.tobytes())
        self.inc.dispatch([buf], params=[n])  # still a working binding
        self.assertEqual(array.array(U32, bytes(buf.download())).tolist(),
                         [(x + 1) & 0xFFFFFFFF for x in data])
        buf.close()
        self.assertEqual(self.live_buffers(), live, "freed at close(), not deferred")

    def test_exports_of_closed_objects_raise_with_a_fix(self):
        buf = self.ctx.alloc(16)
        buf.close()
        for fn in (lambda: buf.__cuda_array_interface__, lambda: buf.__dlpack__(),
                   lambda: buf.as_array("uint32").__cuda_array_interface__):
            with self.assertRaises(vc.VyreError) as cm:
                fn()
            self.assertEqual(cm.exception.status, vc.Status.INVALID_HANDLE)
            self.assertIn("Fix:", cm.exception.message)
        ctx = vc.Context()
        buf = ctx.alloc(16)
        ctx.close()
        with self.assertRaises(vc.VyreError) as cm:
            buf.__cuda_array_interface__
        self.assertIn(cm.exception.status, (vc.Status.STALE_HANDLE, vc.Status.INVALID_HANDLE))
        self.assertIn("Fix:", cm.exception.message)
        buf.close()
        buf.close()

    def test_cai_stream_while_work_is_in_flight(self):
        self.need_wrap()
        n = 1000
        data = self.ctx.upload(array.array(U32, range(n)))
        self.assertIsNone(data.__cuda_array_interface__["stream"])
        pending = self.inc.dispatch_async([data], params=[n])
        self.assertEqual(data.__cuda_array_interface__["stream"], vc.STREAM_LEGACY)
        pending.wait()
        self.assertIsNone(data.__cuda_array_interface__["stream"])
        pending.close()
        self.assertEqual(list(array.array(U32, bytes(data.download()))),
                         [i + 1 for i in range(n)])
        data.close()

    def check_foreign_add(self, make, label):
        """a + b over foreign arrays made by make(buffer, n) for the two
        inputs and the output, each element compared."""
        n = 3001
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        da, db, dout = self.ctx.upload(a), self.ctx.upload(b), self.ctx.alloc(4 * n)
        live = self.live_buffers()
        outs = self.prog.dispatch([make(da, n), make(db, n), make(dout, n)], params=[n])
        self.assertEqual(list(outs), [None, None, None])
        check_sum(self, a, b, dout.download(), label)
        self.assertEqual(self.live_buffers(), live, f"{label}: wrapped handles released")
        # Asynchronously: the foreign arrays stay referenced until the wait.
        a2 = random_u32(n, self.rng)
        da.upload(a2)
        pending = self.prog.dispatch_async([make(da, n), db, make(dout, n)], params=[n])
        self.assertEqual(self.live_buffers(), live + 2)
        pending.wait()
        self.assertEqual(self.live_buffers(), live)
        pending.close()
        check_sum(self, a2, b, dout.download(), f"{label} async")
        # Recorded: bound by address until the graph closes.
        graph = self.prog.record([make(da, n), make(db, n), make(dout, n)], params=[n])
        dout.upload(bytes(4 * n))
        graph.replay()
        check_sum(self, a2, b, dout.download(), f"{label} graph")
        self.assertEqual(self.live_buffers(), live + 3)
        graph.close()
        self.assertEqual(self.live_buffers(), live)
        for buf in (da, db, dout):
            buf.close()

    def test_cai_arrays_bound_in_place(self):
        self.need_wrap()
        self.check_foreign_add(lambda buf, n: CaiArray(buf.device_pointer, (n,)), "CAI")
        # A 2-D array with explicit C-contiguous strides and a stream.
        self.check_foreign_add(
            lambda buf, n: CaiArray(buf.device_pointer, (1, n), strides=(4 * n, 4),
                                    stream=vc.STREAM_LEGACY), "CAI 2-D, stream")
        # CAI v2 (no stream key), bytes typestr.
        self.check_foreign_add(
            lambda buf, n: CaiArray(buf.device_pointer, (4 * n,), typestr="|u1", version=2),
            "CAI v2")

    def test_dlpack_arrays_bound_in_place(self):
        self.need_wrap()
        before = _dlpack.live_exports()
        made = []

        def make(buf, n, legacy=False):
            arr = DLPackArray(buf.as_array("uint32"), legacy_only=legacy)
            made.append(arr)
            return arr

        self.check_foreign_add(make, "DLPack")
        self.check_foreign_add(lambda buf, n: make(buf, n, legacy=True), "DLPack 0.8")
        gc.collect()
        self.assertEqual(_dlpack.live_exports(), before, "every capsule deleted")
        # The consumer passes the legacy default stream unless told another.
        self.assertTrue(all(s == [vc.STREAM_LEGACY] for s in (m.streams for m in made)))
        view = self.ctx.alloc(64).as_array("uint32")
        arr = DLPackArray(view)
        self.inc.dispatch([arr], params=[16], stream=vc.STREAM_PER_THREAD)
        self.assertEqual(arr.streams, [vc.STREAM_PER_THREAD])

    def test_repeated_dispatch_over_changing_foreign_arrays(self):
        """Foreign arrays are wrapped afresh on every call: new arrays, new
        pointers, a mix with host and resident entries, slot by slot; every
        result is checked and no wrapped handle or capsule outlives its call."""
        self.need_wrap()
        n = 257
        bufs = [self.ctx.alloc(4 * n) for _ in range(4)]
        live = self.live_buffers()
        exports = _dlpack.live_exports()
        for call in range(24):
            a, b = random_u32(n, self.rng), random_u32(n, self.rng)
            src_a, src_b, dst = bufs[call % 4], bufs[(call + 1) % 4], bufs[(call + 2) % 4]
            src_a.upload(a)
            src_b.upload(b)
            dst.upload(bytes(4 * n))
            kind = call % 4
            if kind == 0:
                entries = [CaiArray(src_a.device_pointer, (n,)), b,
                           CaiArray(dst.device_pointer, (n,), stream=vc.STREAM_LEGACY)]
            elif kind == 1:
                entries = [DLPackArray(src_a.as_array("uint32")), src_b,
                           DLPackArray(dst.as_array("uint32"))]
            elif kind == 2:
                entries = [a.tobytes(), CaiArray(src_b.device_pointer, (n,)), dst]
            else:
                entries = [DLPackArray(src_a.as_array("uint32")),
                           CaiArray(src_b.device_pointer, (1, n), strides=(4 * n, 4)),
                           CaiArray(dst.device_pointer, (4 * n,), typestr="|u1", version=2)]
            outs = self.prog.dispatch(entries, params=[n])
            self.assertEqual(list(outs), [None, None, None])
            check_sum(self, a, b, dst.download(), f"call {call} kind {kind}")
            self.assertEqual(self.live_buffers(), live, f"call {call}: handles released")
        del entries
        gc.collect()
        self.assertEqual(_dlpack.live_exports(), exports, "every capsule deleted")
        for buf in bufs:
            buf.close()

    def test_context_wrap(self):
        self.need_wrap()
        n = 64
        owner = self.ctx.upload(array.array(U32, range(n)))
        wrapped = self.ctx.wrap(owner.device_pointer, 4 * n)
        self.assertTrue(wrapped.info()["flags"] & vc.BUFFER_INFO_FLAG_BORROWED)
        self.assertFalse(owner.info()["flags"] & vc.BUFFER_INFO_FLAG_BORROWED)
        self.assertEqual(wrapped.device_pointer, owner.device_pointer)
        self.inc.dispatch([wrapped], params=[n])
        self.assertEqual(list(array.array(U32, bytes(owner.download()))),
                         [i + 1 for i in range(n)])
        cai = CaiArray(owner.device_pointer, (n,))
        w2 = self.ctx.wrap(cai)
        self.assertIs(w2.owner, cai)
        self.assertTrue(w2.borrowed)
        self.assertEqual(bytes(w2.download()), bytes(owner.download()))
        for w in (wrapped, w2):
            w.close()
            w.close()  # twice: harmless
        # The memory is still the owner's.
        self.assertEqual(len(owner.download()), 4 * n)
        with self.assertRaises(ValueError):
            self.ctx.wrap(owner.device_pointer)
        with self.assertRaises(TypeError) as cm:
            self.ctx.wrap(object())
        self.assertIn("Fix:", str(cm.exception))
        owner.close()

    def test_bad_foreign_inputs(self):
        self.need_wrap()
        n = 16
        buf = self.ctx.alloc(4 * n)
        ptr = buf.device_pointer
        good = CaiArray(ptr, (n,))
        live = self.live_buffers()
        cases = [
            ("non-contiguous", ValueError, "C-contiguous",
             [good, good, CaiArray(ptr, (n // 2,), strides=(8,))]),
            ("transposed", ValueError, "C-contiguous",
             [good, good, CaiArray(ptr, (4, 4), strides=(4, 16))]),
            ("read-only output", ValueError, "read-only",
             [good, good, CaiArray(ptr, (n,), read_only=True)]),
            ("masked", ValueError, "mask", [CaiArray(ptr, (n,), mask=object()), good, good]),
            ("malformed", TypeError, "malformed",
             [good, good, type("M", (), {"__cuda_array_interface__": {"shape": (n,)}})()]),
            ("empty", ValueError, "empty", [CaiArray(ptr, (0,)), good, good]),
            ("stream 0", ValueError, "stream", [CaiArray(ptr, (n,), stream=0), good, good]),
            ("DLPack on ROCm", TypeError, "not CUDA",
             [DLPackArray(buf.as_array("uint32"), device=(10, 0)), good, good]),
            ("DLPack on another GPU", ValueError, "device",
             [DLPackArray(buf.as_array("uint32"), device=(2, self.ctx.device + 1)), good,
              good]),
            ("DLPack host memory without the buffer protocol", TypeError, "host memory",
             [DLPackArray(buf.as_array("uint32"), device=(1, 0)), good, good]),
            ("unknown pointer", vc.VyreError, "",
             [CaiArray(ptr + (1 << 40), (n,)), good, good]),
        ]
        for label, exc, text, bindings in cases:
            with self.subTest(label), self.assertRaises(exc) as cm:
                self.prog.dispatch(bindings, params=[n])
            self.assertIn(text, str(cm.exception))
            self.assertIn("Fix:", str(cm.exception))
            self.assertEqual(self.live_buffers(), live, f"{label}: no handle left behind")
        # A read-only input is fine.
        self.prog.dispatch([CaiArray(ptr, (n,), read_only=True), good, good], params=[n])
        gc.collect()
        buf.close()

    def test_host_objects_stay_host_bindings(self):
        n = 257
        a, b = random_u32(n, self.rng), random_u32(n, self.rng)
        host_a = HostDLPack(a.tobytes())
        out = HostDLPack(4 * n)
        self.prog.dispatch([host_a, b, out], params=[n])
        check_sum(self, a, b, out, "host DLPack-on-CPU objects")
        try:
            import numpy as np
        except ImportError:
            return
        na = np.frombuffer(a.tobytes(), dtype=np.uint32).copy()
        nb = np.frombuffer(b.tobytes(), dtype=np.uint32).copy()
        nout = np.zeros(n, dtype=np.uint32)
        self.prog.dispatch([na, nb, nout], params=[n])
        check_sum(self, a, b, nout.tobytes(), "numpy host bindings")


def _gpu_context():
    """A Context on a real GPU, or SkipTest (a failure under
    VYRE_CUDA_REQUIRE_GPU=1 when there is no GPU)."""
    if FAKE_DRIVER:
        raise unittest.SkipTest("CuPy and PyTorch need the real driver, not the fake one")
    return gpu_context()


class _DirectReads:
    """For the CuPy and PyTorch tests: the compiled path reading their arrays
    in C, and what it declines judged as the generic path judges it."""

    def counted_reader(self, array_type):
        """Installs a reader that counts its Python calls and lets the
        compiled path read in C as the real one does; the calls list."""
        from vyre_cuda import _interop, _loader
        if _loader._fast is None:
            self.skipTest(f"the compiled path is off: {_loader._fast_reason}")
        reader = _interop._reader_of(array_type)
        if reader is None or not hasattr(reader, "_c_read"):
            self.skipTest(f"this {array_type.__module__} is not read in C (no _c_read)")
        calls = []

        def counted(a, device):
            calls.append(1)
            return reader(a, device)
        counted.stream = reader.stream
        counted._c_read = reader._c_read
        _interop._readers[array_type] = counted
        self.addCleanup(_interop._readers.__setitem__, array_type, reader)
        return calls

    def same_as_generic(self, array_type, label, call):
        """call() gives what it gives with the array type's reader off."""
        from vyre_cuda import _interop

        def outcome():
            try:
                return ("ok", list(call()))
            except Exception as e:  # whatever the generic path raises
                return ("raised", type(e).__name__, str(e))
        reader = _interop._readers.pop(array_type)
        _interop._plain_types[array_type] = True
        try:
            want = outcome()
        finally:
            _interop._plain_types.pop(array_type, None)
            _interop._readers[array_type] = reader
        self.assertEqual(outcome(), want, label)


class CupyTest(_DirectReads, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = _gpu_context()
        try:
            import cupy
        except Exception as e:  # ImportError, or a CuPy that cannot start
            cls.ctx.close()
            raise unittest.SkipTest(f"cupy not importable: {e}")
        cls.cp = cupy
        cls.prog = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
        cls.rng = random.Random(1234)

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()
        cls.ctx.close()

    def test_cupy_reads_and_writes_a_buffer_in_place(self):
        cp = self.cp
        n = 100003
        a = random_u32(n, self.rng)
        buf = self.ctx.upload(a)
        for view in (buf.as_array("uint32"), ):
            c = cp.asarray(view)
            self.assertEqual(c.data.ptr, buf.device_pointer)
            self.assertEqual(c.tolist(), list(a))
            c += 1
            cp.cuda.get_current_stream().synchronize()
            got = array.array(U32, bytes(buf.download()))
            self.assertEqual(list(got), [(x + 1) & 0xFFFFFFFF for x in a])
        d = cp.from_dlpack(buf.as_array("uint32"))
        self.assertEqual(d.data.ptr, buf.device_pointer)
        self.assertEqual(d.tolist(), [(x + 1) & 0xFFFFFFFF for x in a])
        u8 = cp.asarray(buf)
        self.assertEqual((u8.dtype, u8.shape), (cp.uint8, (4 * n,)))
        del c, d, u8
        buf.close()

    def test_dispatch_over_cupy_arrays(self):
        cp = self.cp
        n = (1 << 20) + 3
        ca = cp.random.randint(0, 2 ** 31, size=n, dtype=cp.uint32)
        cb = cp.random.randint(0, 2 ** 31, size=n, dtype=cp.uint32)
        cout = cp.zeros(n, dtype=cp.uint32)
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            cb *= 3  # ordered before the dispatch through the stream protocols
            self.prog.dispatch([ca, cb, cout], params=[n], stream=stream.ptr)
        ha, hb, hout = ca.get(), cb.get(), cout.get()
        bad = [i for i in range(n) if int(hout[i]) != (int(ha[i]) + int(hb[i])) & 0xFFFFFFFF]
        self.assertEqual(bad[:5], [])
        with self.assertRaises(ValueError) as cm:
            self.prog.dispatch([ca[::2], cb[::2], cout[::2]], params=[n // 2])
        self.assertIn("Fix:", str(cm.exception))

    def test_arrays_read_in_c(self):
        # Once their wraps are cached, the compiled call reads CuPy arrays in
        # C (the Python reader not called), views at an offset too; what it
        # declines, the generic path judges as before.
        cp = self.cp
        calls = self.counted_reader(cp.ndarray)
        n = 4099
        base = cp.random.randint(0, 2 ** 30, size=3 * n + 7, dtype=cp.uint32)
        ca, cb = base[5:5 + n], base[n + 6:2 * n + 6]
        cout = cp.empty(n, dtype=cp.uint32)
        self.prog.dispatch([ca, cb, cout], params=[n])
        del calls[:]
        for it in range(3):
            ca += it + 1  # on CuPy's current stream, ordered before the dispatch
            cout.fill(0xFFFFFFFF)
            self.prog.dispatch([ca, cb, cout], params=[n])
            self.assertTrue(bool((cout == ca + cb).all()), f"call {it}")
        self.assertEqual(calls, [], "read in C, not by the Python reader")
        cases = {"strided": base[::2][:n],
                 "transposed": cp.zeros((2, n // 2 + 1), dtype=cp.uint32).T,
                 "empty": cp.zeros(0, dtype=cp.uint32),
                 "complex": cp.zeros(n // 2, dtype=cp.complex64),
                 "2-D": cp.zeros((1, n), dtype=cp.uint32)}
        for label, c in cases.items():
            self.same_as_generic(cp.ndarray, label,
                                 lambda c=c: self.prog.dispatch([ca, cb, c], params=[n]))

    def test_capture_cupy_work_around_a_dispatch(self):
        # CuPy kernels enqueued on the capture stream around a library
        # dispatch become one graph; each replay runs all of it in order.
        # (A comment, not a docstring: scripts/gpu-bindings.sh counts the
        # interop tests by their "name ... ok" lines.)
        if not vc.has_function("vyre_capture_begin"):
            self.skipTest("the loaded library has no vyre_capture_begin")
        cp = self.cp
        n = (1 << 16) + 3
        a = random_u32(n, self.rng)
        b = random_u32(n, self.rng)
        poison = array.array(U32, [0xA5A5A5A5]) * n
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.upload(poison) as dout:
            # Views and outputs made, and CuPy's kernels loaded, before the
            # capture: it forbids allocations and module loads.
            ca = cp.asarray(da.as_array("uint32"))
            cout = cp.asarray(dout.as_array("uint32"))
            result = cp.full(n, 0xA5A5A5A5, dtype=cp.uint32)
            scratch = cp.zeros(n, dtype=cp.uint32)
            cp.add(scratch, 1, out=scratch)
            cp.multiply(scratch, 3, out=result)
            cp.cuda.runtime.deviceSynchronize()
            result.fill(0xA5A5A5A5)
            cp.cuda.runtime.deviceSynchronize()
            with self.ctx.capture() as cap:
                stream = cp.cuda.ExternalStream(cap.stream)
                with stream:
                    cp.add(ca, 1, out=ca)                       # a += 1
                cap.dispatch(self.prog, [da, db, dout], params=[n])  # out = a + b
                with stream:
                    cp.multiply(cout, 3, out=result)            # result = 3 * out
            graph = cap.graph
            # Captured, not run.
            self.assertEqual(list(array.array(U32, bytes(da.download()))), list(a))
            self.assertEqual(bytes(dout.download()), poison.tobytes())
            self.assertGreaterEqual(graph.info()["kernel_node_count"], 3)
            other = cp.cuda.Stream(non_blocking=True)
            expected_a = list(a)
            for round_ in range(3):
                dout.upload(poison)
                result.fill(0xA5A5A5A5)
                cp.cuda.runtime.deviceSynchronize()
                if round_ < 2:
                    graph.replay()
                    got = result.get()
                else:
                    # Ordered on a CuPy stream: its later work follows the graph.
                    with graph.launch(other.ptr) as pending:
                        got = result.get(stream=other)
                        other.synchronize()
                        pending.wait()
                expected_a = [(x + 1) & 0xFFFFFFFF for x in expected_a]
                expected_out = [(x + y) & 0xFFFFFFFF for x, y in zip(expected_a, b)]
                self.assertEqual(list(array.array(U32, bytes(da.download()))), expected_a,
                                 f"a after replay {round_}")
                self.assertEqual(list(array.array(U32, bytes(dout.download()))), expected_out,
                                 f"out after replay {round_}")
                self.assertEqual([int(v) for v in got],
                                 [(3 * x) & 0xFFFFFFFF for x in expected_out],
                                 f"CuPy's result after replay {round_}")
            graph.close()
            del ca, cout


class TorchTest(_DirectReads, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = _gpu_context()
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch.cuda.is_available() is False")
        except Exception as e:
            cls.ctx.close()
            raise unittest.SkipTest(f"torch with CUDA not importable: {e}")
        cls.torch = torch
        cls.prog = cls.ctx.program(ADD_PTX, "vyre_test_add_u32", ADD_BINDINGS)
        cls.rng = random.Random(4321)

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()
        cls.ctx.close()

    def test_torch_reads_and_writes_a_buffer_in_place(self):
        torch = self.torch
        n = 65537
        a = array.array("i", (self.rng.randrange(-2 ** 30, 2 ** 30) for _ in range(n)))
        buf = self.ctx.upload(a)
        t = torch.from_dlpack(buf.as_array("int32"))
        self.assertEqual(t.device.type, "cuda")
        self.assertEqual(t.data_ptr(), buf.device_pointer)
        self.assertEqual(t.tolist(), list(a))
        t.add_(5)
        torch.cuda.synchronize()
        got = array.array("i", bytes(buf.download()))
        self.assertEqual(list(got), [x + 5 for x in a])
        raw = torch.from_dlpack(buf)
        self.assertEqual((raw.dtype, tuple(raw.shape)), (torch.uint8, (4 * n,)))
        before = _dlpack.live_exports()
        del t, raw
        gc.collect()
        self.assertLess(_dlpack.live_exports(), before + 1)
        buf.close()

    def test_dispatch_over_torch_tensors(self):
        torch = self.torch
        n = (1 << 20) + 5
        ta = torch.randint(0, 2 ** 30, (n,), dtype=torch.int32, device="cuda")
        tb = torch.randint(0, 2 ** 30, (n,), dtype=torch.int32, device="cuda")
        tout = torch.zeros(n, dtype=torch.int32, device="cuda")
        self.prog.dispatch([ta, tb, tout], params=[n])
        self.assertTrue(torch.equal(tout, ta + tb))
        with self.assertRaises(ValueError) as cm:
            self.prog.dispatch([ta[::2], tb[::2], tout[::2]], params=[n // 2])
        self.assertIn("Fix:", str(cm.exception))

    def test_tensors_read_in_c(self):
        # PyTorch 2.10+ (the DLPack C exchange API): once their wraps are
        # cached, the compiled call reads tensors in C (the Python reader not
        # called), views at an offset in their storage too; what the reader
        # declines, the exchange read declines, and the generic path judges
        # it as before.
        torch = self.torch
        calls = self.counted_reader(torch.Tensor)
        n = 4099
        base = torch.randint(0, 2 ** 30, (3 * n + 7,), dtype=torch.int32, device="cuda")
        ta, tb = base[5:5 + n], base[n + 6:2 * n + 6]
        tout = torch.empty(n, dtype=torch.int32, device="cuda")
        self.prog.dispatch([ta, tb, tout], params=[n])
        del calls[:]
        for it in range(3):
            ta.add_(it + 1)  # on torch's current stream, ordered before the dispatch
            tout.fill_(-1)
            self.prog.dispatch([ta, tb, tout], params=[n])
            self.assertTrue(torch.equal(tout, ta + tb), f"call {it}")
        self.assertEqual(calls, [], "read in C, not by the Python reader")

        def zeros(*shape, dtype=torch.int32):
            return torch.zeros(*shape, dtype=dtype, device="cuda")
        cases = {"requires grad": torch.zeros(n, device="cuda", requires_grad=True),
                 "negative view": zeros(n)._neg_view(),
                 "complex": zeros(n // 2, dtype=torch.complex64),
                 "conjugate view": zeros(n // 2, dtype=torch.complex64).conj(),
                 "sparse": zeros(n).to_sparse(),
                 "host tensor": torch.zeros(n, dtype=torch.int32),
                 "transposed": zeros(2, n // 2 + 1).t(),
                 "strided": base[::2][:n],
                 "empty": zeros(0),
                 "2-D": zeros(1, n)}
        for label, t in cases.items():
            self.same_as_generic(torch.Tensor, label,
                                 lambda t=t: self.prog.dispatch([ta, tb, t], params=[n]))

    def test_stream_ordered_with_a_non_default_stream(self):
        torch = self.torch
        n = (1 << 22) + 1
        s = torch.cuda.Stream()
        for it in range(3):
            with torch.cuda.stream(s):
                ta = torch.zeros(n, dtype=torch.int32, device="cuda")
                tb = torch.zeros(n, dtype=torch.int32, device="cuda")
                tout = torch.full((n,), -1, dtype=torch.int32, device="cuda")
                # Long work on s: unordered, the dispatch would read zeros.
                for _ in range(20):
                    ta.add_(1)
                    tb.add_(2)
                # Sync: torch orders the passed (legacy) stream after s.
                self.prog.dispatch([ta, tb, tout], params=[n])
                self.assertTrue(torch.equal(tout, torch.full_like(tout, 60)), f"sync {it}")
                # Async, on s itself: s's later work waits for the dispatch.
                tout.fill_(-1)
                ta.add_(1)
                pending = self.prog.dispatch_async([ta, tb, tout], params=[n],
                                                   stream=s.cuda_stream)
                tout2 = tout * 2  # enqueued on s, after the dispatch
                pending.wait()
                pending.close()
            s.synchronize()
            self.assertTrue(torch.equal(tout2, torch.full_like(tout2, 122)), f"async {it}")

    def test_capture_torch_work_around_a_dispatch(self):
        # PyTorch kernels enqueued on the capture stream around a library
        # dispatch become one graph; each replay runs all of it in order.
        # (A comment, not a docstring: scripts/gpu-bindings.sh counts the
        # interop tests by their "name ... ok" lines.)
        if not vc.has_function("vyre_capture_begin"):
            self.skipTest("the loaded library has no vyre_capture_begin")
        torch = self.torch
        n = (1 << 16) + 7
        # Small values: int32 arithmetic below never overflows.
        a = array.array("i", (self.rng.randrange(1, 2 ** 28) for _ in range(n)))
        b = array.array("i", (self.rng.randrange(1, 2 ** 28) for _ in range(n)))
        poison = array.array("i", [-0x5A5A5A5B]) * n
        with self.ctx.upload(a) as da, self.ctx.upload(b) as db, \
                self.ctx.upload(poison) as dout:
            # Views and outputs made, and PyTorch's kernels loaded, before
            # the capture: it forbids allocations and module loads.
            ta = torch.from_dlpack(da.as_array("int32"))
            tout = torch.from_dlpack(dout.as_array("int32"))
            tres = torch.empty(n, dtype=torch.int32, device=ta.device)
            scratch = torch.zeros(n, dtype=torch.int32, device=ta.device)
            scratch.add_(1)
            torch.mul(scratch, 3, out=tres)
            tres.fill_(-1)
            torch.cuda.synchronize()
            with self.ctx.capture() as cap:
                stream = torch.cuda.ExternalStream(cap.stream, device=ta.device)
                with torch.cuda.stream(stream):
                    ta.add_(1)                                  # a += 1
                cap.dispatch(self.prog, [da, db, dout], params=[n])  # out = a + b
                with torch.cuda.stream(stream):
                    torch.mul(tout, 3, out=tres)                # tres = 3 * out
            graph = cap.graph
            # Captured, not run.
            self.assertEqual(list(array.array("i", bytes(da.download()))), list(a))
            self.assertEqual(bytes(dout.download()), poison.tobytes())
            self.assertGreaterEqual(graph.info()["kernel_node_count"], 3)
            other = torch.cuda.Stream(device=ta.device)
            expected_a = list(a)
            for round_ in range(3):
                dout.upload(poison)
                tres.fill_(-1)
                torch.cuda.synchronize()
                if round_ < 2:
                    graph.replay()
                    got = tres.cpu().tolist()
                else:
                    # Ordered on a PyTorch stream: its later work follows the graph.
                    with graph.launch(other.cuda_stream) as pending:
                        with torch.cuda.stream(other):
                            copy = tres.clone()
                        other.synchronize()
                        pending.wait()
                    got = copy.cpu().tolist()
                expected_a = [x + 1 for x in expected_a]
                expected_out = [x + y for x, y in zip(expected_a, b)]
                self.assertEqual(list(array.array("i", bytes(da.download()))), expected_a,
                                 f"a after replay {round_}")
                self.assertEqual(list(array.array("i", bytes(dout.download()))), expected_out,
                                 f"out after replay {round_}")
                self.assertEqual(got, [3 * x for x in expected_out],
                                 f"PyTorch's result after replay {round_}")
            graph.close()
            del ta, tout


class NumbaTest(unittest.TestCase):
    def test_numba_sees_a_buffer(self):
        ctx = _gpu_context()
        try:
            try:
                from numba import cuda
            except Exception as e:
                self.skipTest(f"numba not importable: {e}")
            a = array.array(U32, range(1000))
            buf = ctx.upload(a)
            d = cuda.as_cuda_array(buf.as_array("uint32"))
            self.assertEqual(list(d.copy_to_host()), list(a))
            self.assertEqual(d.__cuda_array_interface__["data"][0], buf.device_pointer)
            buf.close()
        finally:
            ctx.close()


def tearDownModule():
    if FAKE_DRIVER:
        misuse = fake_stats().misuse_errors
        if misuse:
            raise AssertionError(f"the engine misused the (fake) driver API {misuse} times")


if __name__ == "__main__":
    unittest.main()
