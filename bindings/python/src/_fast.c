/* vyre_cuda._fast: the compiled fast path of the Python binding (issue 21).
 *
 * Written against the CPython C API. It links nothing of vyre-cuda: the
 * package loads libvyre_cuda with ctypes and hands this module the addresses
 * of the few entry points it calls (init()), so both paths use the same
 * library instance. vyre_cuda.h gives the types and prototypes only.
 *
 * Every function handles the common shapes of its call (resident Buffers,
 * host memory with the buffer protocol, int parameters) and returns
 * NotImplemented, before calling the library, for anything else: the
 * package then runs its ctypes code, so rare inputs and every validation
 * error read exactly as they do there. A failed library call raises through
 * the package's own _check(status, call), which reads this thread's last
 * error at once (the GIL is held from the call's return to that read).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vyre_cuda.h"

#include "dlpack_exchange.h"

#include <structmember.h> /* T_OBJECT_EX */

#if PY_VERSION_HEX < 0x030900A4
#define Py_SET_SIZE(o, size) (Py_SIZE(o) = (size))
#endif

/* The library's entry points, by address (typeof keeps them in step with the
 * header; no symbol is referenced at link time). */
static __typeof__(vyre_dispatch)* p_dispatch;
static __typeof__(vyre_dispatch_async)* p_dispatch_async;
static __typeof__(vyre_pending_wait)* p_pending_wait;
static __typeof__(vyre_pending_timing)* p_pending_timing;
static __typeof__(vyre_graph_replay)* p_graph_replay;
static __typeof__(vyre_graph_replay_async)* p_graph_replay_async;
static __typeof__(vyre_buffer_upload)* p_buffer_upload;
static __typeof__(vyre_buffer_download)* p_buffer_download;
static __typeof__(vyre_sequence_run)* p_sequence_run;
/* Optional (an older library may lack them): NULL sends the call to ctypes. */
static __typeof__(vyre_context_wait_stream)* p_context_wait_stream;
static __typeof__(vyre_context_signal_stream)* p_context_signal_stream;

/* The package's types and its error raiser, from init(). */
static PyTypeObject* t_buffer;
static PyTypeObject* t_buffer_range;
static PyTypeObject* t_array;
static PyTypeObject* t_pinned;
static PyObject* o_outputs;
static PyObject* o_check;

static PyObject* s_bits;
static PyObject* s_address;
static PyObject* s_nbytes;
static PyObject* s_buffer;
static PyObject* s_offset;
static PyObject* s_length;
static PyObject* s_bindings;
static PyObject* s_params;
static PyObject* s_role;
static PyObject* s_raw_timing;
static PyObject* s_wall_ns;
static PyObject* s_device_ns;
static PyObject* s_enqueue_ns;
static PyObject* s_wait_ns;
static PyObject* s_vyre_dispatch;
static PyObject* s_vyre_dispatch_async;
static PyObject* s_vyre_pending_wait;
static PyObject* s_vyre_pending_timing;
static PyObject* s_vyre_graph_replay;
static PyObject* s_vyre_graph_replay_async;
static PyObject* s_vyre_buffer_upload;
static PyObject* s_vyre_buffer_download;
static PyObject* s_vyre_sequence_run;
static PyObject* s_vyre_context_wait_stream;
static PyObject* s_vyre_context_signal_stream;
static PyObject* s_device;
static PyObject* s_wraps;
static PyObject* s_stream;
static PyObject* s_context;
static PyObject* s_wait_streams;
static PyObject* s_data;
static PyObject* s_device_id;
static PyObject* s_ptr;
static PyObject* s_c_read;

enum { OK = 0, FALLBACK = 1, ERR = -1 };

/* Room on the stack; larger calls take the ctypes path. */
#define MAX_BINDINGS 32
#define MAX_WORDS 256
#define MAX_SCALARS 64

enum { ROLE_INPUT = 1, ROLE_OUTPUT = 2, ROLE_INPUT_OUTPUT = 3, ROLE_SHARED = 4 };
enum { KIND_SCALAR32 = 2, KIND_SCALAR64 = 3 };

/* ------------------------------------------------------------------------ */
/* Conversions: OK with *out set, FALLBACK for anything the ctypes path must  */
/* judge (its error then reads as always). Never leaves an exception set.    */
/* ------------------------------------------------------------------------ */

/* An int (bool and IntEnum included, as int() takes them) in
 * [signed ? -2**(bits-1) : 0, 2**bits), stored as its low `bits` bits. */
static int int_in(PyObject* o, int bits, int allow_negative, uint64_t* out) {
  if (!PyLong_Check(o)) return FALLBACK;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return FALLBACK;
  }
  if (overflow < 0) return FALLBACK;
  if (overflow > 0) {
    if (bits < 64) return FALLBACK;
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      return FALLBACK;
    }
    *out = u;
    return OK;
  }
  if (v < 0) {
    if (!allow_negative) return FALLBACK;
    if (bits < 64 && v < -(1LL << (bits - 1))) return FALLBACK;
  } else if (bits < 64 && (unsigned long long)v >> bits) {
    return FALLBACK;
  }
  *out = bits < 64 ? ((uint64_t)v & ((1ULL << bits) - 1)) : (uint64_t)v;
  return OK;
}

static int attr_u64(PyObject* o, PyObject* name, uint64_t* out) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (v == NULL) {
    PyErr_Clear();
    return FALLBACK;
  }
  int r = PyLong_CheckExact(v) ? int_in(v, 64, 0, out) : FALLBACK;
  Py_DECREF(v);
  return r;
}

/* None, an int, or a list/tuple of 1-3 ints in [0, 2**32): as _dim3. */
static int dim3(PyObject* o, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 0;
  if (o == Py_None) return OK;
  uint64_t v;
  if (PyLong_Check(o)) {
    if (int_in(o, 32, 0, &v)) return FALLBACK;
    out[0] = (uint32_t)v;
    out[1] = out[2] = 1;
    return OK;
  }
  if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return FALLBACK;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (n < 1 || n > 3) return FALLBACK;
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < 3; i++) {
    if (i < n) {
      if (int_in(items[i], 32, 0, &v)) return FALLBACK;
      out[i] = (uint32_t)v;
    } else {
      out[i] = 1;
    }
  }
  return OK;
}

/* u32 words from a list/tuple of ints in [-2**31, 2**32). (No Python code
 * runs here: int and float values are read directly.) */
static int words_of(PyObject* o, uint32_t* words, size_t* count) {
  *count = 0;
  if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return FALLBACK;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (n > MAX_WORDS) return FALLBACK;
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; i++) {
    uint64_t v;
    if (int_in(items[i], 32, 1, &v)) return FALLBACK;
    words[i] = (uint32_t)v;
  }
  *count = (size_t)n;
  return OK;
}

/* The declared width of scalar slot i from a Program's params (None or a
 * list of (ParamKind, index)): the last SCALAR32/64 entry naming i wins, as
 * in _scalar_array's dict. FALLBACK when params has an unexpected shape. */
static int scalar_kind(PyObject* params, Py_ssize_t i, int* kind) {
  *kind = KIND_SCALAR32;
  if (params == Py_None) return OK;
  if (!PyList_CheckExact(params)) return FALLBACK;
  Py_ssize_t n = PyList_GET_SIZE(params);
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject* pair = PyList_GET_ITEM(params, k);
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) return FALLBACK;
    uint64_t kv, index;
    if (int_in(PyTuple_GET_ITEM(pair, 0), 32, 0, &kv) ||
        int_in(PyTuple_GET_ITEM(pair, 1), 64, 0, &index))
      return FALLBACK;
    if ((kv == KIND_SCALAR32 || kv == KIND_SCALAR64) && index == (uint64_t)i) *kind = (int)kv;
  }
  return OK;
}

/* u64 scalars from a list/tuple of ints in [-2**63, 2**64) and floats
 * (packed to their slot's width, f32 or f64, as f32()/f64() do). */
static int scalars_of(PyObject* o, PyObject* program_params, uint64_t* out, size_t* count) {
  *count = 0;
  if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return FALLBACK;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (n > MAX_SCALARS) return FALLBACK;
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* v = items[i];
    if (PyFloat_CheckExact(v)) {
      int kind;
      if (scalar_kind(program_params, i, &kind)) return FALLBACK;
      double d = PyFloat_AS_DOUBLE(v);
      if (kind == KIND_SCALAR64) {
        uint64_t bits;
        memcpy(&bits, &d, 8);
        out[i] = bits;
      } else {
        /* struct.pack("<f") refuses values outside float32's range. */
        float f = (float)d;
        if (isinf(f) && !isinf(d)) return FALLBACK;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        out[i] = bits;
      }
    } else if (int_in(v, 64, 1, &out[i])) {
      return FALLBACK;
    }
  }
  *count = (size_t)n;
  return OK;
}

/* ------------------------------------------------------------------------ */
/* Host memory                                                               */
/* ------------------------------------------------------------------------ */

/* The host types the ctypes path uses as host memory: those with the
 * buffer protocol, and PinnedMemory (exact types: subclasses may speak a
 * device protocol first). */
static int is_host_type(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  return t == &PyBytes_Type || t == &PyByteArray_Type || t == &PyMemoryView_Type ||
         t == t_array || t == t_pinned || strcmp(t->tp_name, "numpy.ndarray") == 0;
}

/* PinnedMemory's address and size, read directly (it has no buffer protocol
 * before Python 3.12), as a view that holds nothing; closed (address None)
 * goes to the ctypes path, which says so. */
static int pinned_view(PyObject* o, int writable, Py_buffer* view) {
  uint64_t address, nbytes;
  if (attr_u64(o, s_address, &address) || attr_u64(o, s_nbytes, &nbytes) || address == 0 ||
      nbytes == 0 || nbytes > (uint64_t)PY_SSIZE_T_MAX)
    return FALLBACK;
  if (PyBuffer_FillInfo(view, NULL, (void*)(uintptr_t)address, (Py_ssize_t)nbytes, 0,
                        writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
    PyErr_Clear();
    return FALLBACK;
  }
  return OK;
}

/* A C-contiguous, non-empty view of o (writable when asked). */
static int host_view(PyObject* o, int writable, Py_buffer* view) {
  if (!is_host_type(o)) return FALLBACK;
  if (Py_TYPE(o) == t_pinned) return pinned_view(o, writable, view);
  if (PyObject_GetBuffer(o, view, writable ? PyBUF_FULL : PyBUF_FULL_RO) < 0) {
    PyErr_Clear();
    return FALLBACK;
  }
  if (view->len <= 0 || !PyBuffer_IsContiguous(view, 'C')) {
    PyBuffer_Release(view);
    return FALLBACK;
  }
  return OK;
}

/* What one call holds: the buffer exports it reads or writes through. */
typedef struct {
  Py_buffer views[MAX_BINDINGS];
  int count;
} holds;

static void holds_release(holds* h) {
  while (h->count > 0) PyBuffer_Release(&h->views[--h->count]);
}

/* ------------------------------------------------------------------------ */
/* Bindings                                                                  */
/* ------------------------------------------------------------------------ */

static int role_of(PyObject* decls, Py_ssize_t i, long* role) {
  if (!PyList_CheckExact(decls)) return FALLBACK;
  if (i >= PyList_GET_SIZE(decls)) {
    *role = ROLE_INPUT;
    return OK;
  }
  PyObject* decl = PyList_GET_ITEM(decls, i);
  Py_INCREF(decl);
  PyObject* r = PyObject_GetAttr(decl, s_role);
  Py_DECREF(decl);
  if (r == NULL) {
    PyErr_Clear();
    return FALLBACK;
  }
  uint64_t v;
  int st = int_in(r, 32, 0, &v);
  Py_DECREF(r);
  if (st) return FALLBACK;
  *role = (long)v;
  return OK;
}

/* Binding i: resident (Buffer, BufferRange of a Buffer) or host memory.
 * outputs[i] gets the host object holding an output (a new reference);
 * keep_out (async only) receives a memoryview per host output, which keeps
 * its memory exported (alive, unresizable) until the Pending lets it go. */
static int marshal(PyObject* entry, Py_ssize_t i, PyObject* decls, vyre_dispatch_binding* s,
                   holds* h, PyObject** output, PyObject* keep_out) {
  vyre_dispatch_binding init = VYRE_DISPATCH_BINDING_INIT;
  *s = init;
  *output = NULL;
  PyTypeObject* t = Py_TYPE(entry);
  if (t == t_buffer) {
    s->source = VYRE_SOURCE_RESIDENT;
    return attr_u64(entry, s_bits, &s->buffer.bits);
  }
  if (t == t_buffer_range) {
    PyObject* buf = PyObject_GetAttr(entry, s_buffer);
    if (buf == NULL) {
      PyErr_Clear();
      return FALLBACK;
    }
    int st = Py_TYPE(buf) == t_buffer ? attr_u64(buf, s_bits, &s->buffer.bits) : FALLBACK;
    Py_DECREF(buf);
    if (st || attr_u64(entry, s_offset, &s->offset) || attr_u64(entry, s_length, &s->length))
      return FALLBACK;
    s->source = VYRE_SOURCE_RESIDENT;
    return OK;
  }
  long role;
  if (role_of(decls, i, &role)) return FALLBACK;
  if (role != ROLE_INPUT && role != ROLE_OUTPUT && role != ROLE_INPUT_OUTPUT) return FALLBACK;
  if (role == ROLE_INPUT) {
    if (h->count >= MAX_BINDINGS) return FALLBACK;
    if (host_view(entry, 0, &h->views[h->count])) return FALLBACK;
    Py_buffer* v = &h->views[h->count++];
    s->host_input = v->buf;
    s->host_bytes = (uint64_t)v->len;
    return OK;
  }
  /* OUTPUT / INPUT_OUTPUT: a writable buffer in place, or a byte count for a
   * new (zeroed) bytearray, as _writable makes. */
  PyObject* owner;
  if (PyLong_CheckExact(entry)) {
    uint64_t n;
    if (int_in(entry, 63, 0, &n) || n == 0 || n > (uint64_t)PY_SSIZE_T_MAX) return FALLBACK;
    owner = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (owner == NULL) return ERR;
    memset(PyByteArray_AS_STRING(owner), 0, (size_t)n);
  } else {
    if (!is_host_type(entry)) return FALLBACK;
    owner = entry;
    Py_INCREF(owner);
  }
  void* address;
  Py_ssize_t len;
  if (keep_out != NULL && Py_TYPE(owner) != t_pinned) {
    PyObject* mv = PyMemoryView_FromObject(owner);
    if (mv == NULL) {
      PyErr_Clear();
      Py_DECREF(owner);
      return FALLBACK;
    }
    Py_buffer* v = PyMemoryView_GET_BUFFER(mv);
    if (v->readonly || v->len <= 0 || !PyBuffer_IsContiguous(v, 'C')) {
      Py_DECREF(mv);
      Py_DECREF(owner);
      return FALLBACK;
    }
    address = v->buf;
    len = v->len;
    int st = PyList_Append(keep_out, mv);
    Py_DECREF(mv);
    if (st < 0) {
      Py_DECREF(owner);
      return ERR;
    }
  } else {
    if (h->count >= MAX_BINDINGS || host_view(owner, 1, &h->views[h->count])) {
      Py_DECREF(owner);
      return FALLBACK;
    }
    Py_buffer* v = &h->views[h->count++];
    address = v->buf;
    len = v->len;
    /* Async PinnedMemory: the Pending keeps it (its memory) alive. */
    if (keep_out != NULL && PyList_Append(keep_out, owner) < 0) {
      Py_DECREF(owner);
      return ERR;
    }
  }
  s->host_output = address;
  if (role == ROLE_INPUT_OUTPUT) s->host_input = address;
  s->host_bytes = (uint64_t)len;
  *output = owner;
  return OK;
}

/* ------------------------------------------------------------------------ */
/* Readers in C                                                              */
/* ------------------------------------------------------------------------ */

/* A reader (_interop._torch_reader / _cupy_reader's function) may carry
 * `_c_read`, a tuple saying how this module reads the same arrays itself
 * instead of calling it:
 *   ("dlpack_exchange", capsule, refuse_attrs, refuse_methods): the
 *     producer's DLPack C exchange API (PyTorch 2.10+), one C call a tensor
 *     and one for the stream; a tensor with any refuse_attrs attribute or
 *     refuse_methods() result true is declined (PyTorch: requires_grad,
 *     is_neg), as the Python reader declines it;
 *   ("cupy", get_device, get_current_stream, contiguous_attr): a
 *     cupy.ndarray's data.ptr, data.device_id, nbytes and contiguous_attr
 *     read directly, the current device checked once a call.
 * What either accepts, the Python reader accepts with the same pointer and
 * size (tests hold both to it); anything it declines goes to the Python
 * reader's verdict through the package's own path. A reader without
 * `_c_read`, or with one this module does not know, is called. */
enum { READ_PYTHON = 0, READ_EXCHANGE = 1, READ_CUPY = 2 };
/* read_array's result besides OK / FALLBACK / ERR: not this reader's to
 * bind (the generic path judges the array). */
enum { DECLINED = 2 };

typedef struct {
  PyObject* reader; /* strong, with spec: entries are never freed */
  PyObject* spec;
  int kind;
  const vyre_dlx_api* api;  /* READ_EXCHANGE */
  PyObject* refuse_attrs;   /* READ_EXCHANGE: tuples of str (borrowed from spec) */
  PyObject* refuse_methods;
  PyObject* get_device;     /* READ_CUPY (borrowed from spec) */
  PyObject* get_stream;
  PyObject* contiguous_attr;
} reader_spec;

/* Entries stay for the process (a call may hold one while a reader runs
 * Python code); past the table's size a reader is simply called. */
#define MAX_READER_SPECS 16
static reader_spec reader_specs[MAX_READER_SPECS];
static int reader_spec_count;
static const reader_spec python_reader = {NULL, NULL, READ_PYTHON, NULL, NULL, NULL,
                                          NULL, NULL, NULL};

static int all_str(PyObject* t) {
  if (!PyTuple_CheckExact(t)) return 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
    if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(t, i))) return 0;
  return 1;
}

/* The API table of major version 1 in the capsule's chain, or NULL. */
static const vyre_dlx_api* exchange_api(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, VYRE_DLX_CAPSULE_NAME)) return NULL;
  const vyre_dlx_header* h = PyCapsule_GetPointer(capsule, VYRE_DLX_CAPSULE_NAME);
  for (int depth = 0; h != NULL && depth < 8; depth++, h = h->prev_api) {
    if (h->version.major != VYRE_DLX_MAJOR) continue;
    const vyre_dlx_api* api = (const vyre_dlx_api*)h;
    return api->dltensor_from_py_object_no_sync && api->current_work_stream ? api : NULL;
  }
  return NULL;
}

/* How `reader` is read (never NULL; never leaves an exception set). */
static const reader_spec* spec_of(PyObject* reader) {
  for (int i = 0; i < reader_spec_count; i++)
    if (reader_specs[i].reader == reader) return &reader_specs[i];
  if (reader_spec_count == MAX_READER_SPECS) return &python_reader;
  reader_spec s = python_reader;
  PyObject* spec = PyObject_GetAttr(reader, s_c_read);
  if (spec == NULL) PyErr_Clear();
  if (spec != NULL && PyTuple_CheckExact(spec) && PyTuple_GET_SIZE(spec) == 4 &&
      PyUnicode_Check(PyTuple_GET_ITEM(spec, 0))) {
    const char* kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 0));
    PyObject** f = &PyTuple_GET_ITEM(spec, 0);
    if (kind == NULL) {
      PyErr_Clear();
    } else if (strcmp(kind, "dlpack_exchange") == 0 && all_str(f[2]) && all_str(f[3])) {
      s.api = exchange_api(f[1]);
      if (s.api != NULL) {
        s.kind = READ_EXCHANGE;
        s.refuse_attrs = f[2];
        s.refuse_methods = f[3];
      }
    } else if (strcmp(kind, "cupy") == 0 && PyCallable_Check(f[1]) && PyCallable_Check(f[2]) &&
               PyUnicode_CheckExact(f[3])) {
      s.kind = READ_CUPY;
      s.get_device = f[1];
      s.get_stream = f[2];
      s.contiguous_attr = f[3];
    }
  }
  Py_INCREF(reader);
  s.reader = reader;
  s.spec = spec; /* (the reference from GetAttr, kept) */
  reader_specs[reader_spec_count] = s;
  return &reader_specs[reader_spec_count++];
}

/* What one call learns once: the context's device, and (CuPy) whether the
 * current device is it (0 not asked yet, 1 yes, -1 no). */
typedef struct {
  PyObject* device; /* borrowed */
  long device_id;
  int cupy_current;
} read_state;

/* After a reader (or its stream) raised: 1 with the error cleared when it
 * is an Exception (the package's loop catches those: the generic path then
 * judges the array), 0 with it left set otherwise (KeyboardInterrupt,
 * SystemExit: they propagate, as from the loop). */
static int clear_exception(void) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return 0;
  PyErr_Clear();
  return 1;
}

/* After a read raised: DECLINED, or ERR for what must propagate. */
static int declined_on_error(void) { return clear_exception() ? DECLINED : ERR; }

/* Whether any of obj's attributes (methods' results) is true: 0 no, 1 yes,
 * or ERR / DECLINED when one raised. */
static int any_true(PyObject* obj, PyObject* attrs, int call) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(attrs); i++) {
    PyObject* name = PyTuple_GET_ITEM(attrs, i);
    PyObject* v = call ? PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                   NULL)
                       : PyObject_GetAttr(obj, name);
    int truth = v == NULL ? -1 : PyObject_IsTrue(v);
    Py_XDECREF(v);
    if (truth < 0) return declined_on_error();
    if (truth) return 1;
  }
  return 0;
}

/* A tensor through the exchange API: its first byte and size when it is a
 * non-empty, C-contiguous array of whole-byte, non-complex elements on the
 * context's device. */
static int read_exchange(const reader_spec* s, PyObject* e, const read_state* rs,
                         uint64_t* pointer, uint64_t* nbytes) {
  vyre_dlx_tensor t;
  memset(&t, 0, sizeof t);
  if (s->api->dltensor_from_py_object_no_sync(e, &t) != 0)
    return PyErr_Occurred() ? declined_on_error() : DECLINED;
  if (t.device.device_type != VYRE_DLX_CUDA || t.device.device_id != rs->device_id ||
      t.dtype.lanes != 1 || t.dtype.bits == 0 || t.dtype.bits % 8 != 0 ||
      t.dtype.code == VYRE_DLX_COMPLEX || t.dtype.code == VYRE_DLX_OPAQUE_HANDLE ||
      t.ndim < 0 || (t.ndim > 0 && t.shape == NULL))
    return DECLINED;
  /* Elements, and C-contiguity as PyTorch's is_contiguous() judges it (a
   * dimension of one element may have any stride). */
  uint64_t count = 1; /* elements in the dimensions after d: d's C-contiguous stride */
  for (int32_t d = t.ndim - 1; d >= 0; d--) {
    int64_t extent = t.shape[d];
    if (extent < 0) return DECLINED;
    if (t.strides != NULL && extent > 1 && (uint64_t)t.strides[d] != count) return DECLINED;
    if (extent != 0 && count > UINT64_MAX / (uint64_t)extent) return DECLINED;
    count *= (uint64_t)extent;
  }
  uint64_t size = t.dtype.bits / 8;
  if (count == 0 || count > UINT64_MAX / size) return DECLINED;
  *pointer = (uint64_t)(uintptr_t)t.data + t.byte_offset;
  *nbytes = count * size;
  /* (Read last: they may run Python code, after which t is not valid.) */
  int refused = any_true(e, s->refuse_attrs, 0);
  if (refused == 0) refused = any_true(e, s->refuse_methods, 1);
  if (refused == 1) return DECLINED;
  return refused; /* 0 (OK), DECLINED or ERR */
}

/* An int attribute as a long long (DECLINED when it is not one). */
static int attr_ll(PyObject* o, PyObject* name, long long* out) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (v == NULL) return declined_on_error();
  int st = OK;
  if (!PyLong_Check(v)) {
    st = DECLINED;
  } else {
    *out = PyLong_AsLongLong(v);
    if (*out == -1 && PyErr_Occurred()) st = declined_on_error();
  }
  Py_DECREF(v);
  return st;
}

/* A cupy.ndarray, as _cupy_reader's read(): pointer and size when its
 * memory is the context's device, it is C-contiguous and non-empty, and the
 * current device (whose current stream the call orders after) is it. */
static int read_cupy(const reader_spec* s, PyObject* e, read_state* rs, uint64_t* pointer,
                     uint64_t* nbytes) {
  long long ptr, device, size;
  PyObject* memory = PyObject_GetAttr(e, s_data);
  if (memory == NULL) return declined_on_error();
  int st = attr_ll(memory, s_device_id, &device);
  if (st == OK) st = attr_ll(memory, s_ptr, &ptr);
  Py_DECREF(memory);
  if (st != OK) return st;
  if (device != rs->device_id) return DECLINED;
  PyObject* c = PyObject_GetAttr(e, s->contiguous_attr);
  int contiguous = c == NULL ? -1 : PyObject_IsTrue(c);
  Py_XDECREF(c);
  if (contiguous < 0) return declined_on_error();
  if (!contiguous) return DECLINED;
  if ((st = attr_ll(e, s_nbytes, &size)) != OK) return st;
  if (size <= 0) return DECLINED;
  if (rs->cupy_current == 0) {
    PyObject* current = PyObject_CallNoArgs(s->get_device);
    if (current == NULL) return declined_on_error();
    long long id = PyLong_Check(current) ? PyLong_AsLongLong(current) : -1;
    Py_DECREF(current);
    if (id == -1 && PyErr_Occurred()) return declined_on_error();
    rs->cupy_current = id == rs->device_id ? 1 : -1;
  }
  if (rs->cupy_current < 0) return DECLINED;
  *pointer = (uint64_t)ptr;
  *nbytes = (uint64_t)size;
  return OK;
}

/* Entry e as its cache key (pointer, nbytes) (a new reference) through its
 * reader: OK, DECLINED (the reader's None, or it raised an Exception),
 * FALLBACK (an answer of an unexpected shape) or ERR. */
static int read_array(const reader_spec* s, PyObject* reader, PyObject* e, read_state* rs,
                      PyObject** key) {
  *key = NULL;
  uint64_t pointer = 0, nbytes = 0;
  int st;
  if (s->kind == READ_EXCHANGE) {
    st = read_exchange(s, e, rs, &pointer, &nbytes);
  } else if (s->kind == READ_CUPY) {
    st = read_cupy(s, e, rs, &pointer, &nbytes);
  } else {
    PyObject* call_args[2] = {e, rs->device};
    PyObject* got = PyObject_Vectorcall(reader, call_args, 2, NULL);
    if (got == NULL) return declined_on_error();
    if (got == Py_None) {
      Py_DECREF(got);
      return DECLINED;
    }
    if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 2) {
      Py_DECREF(got);
      return FALLBACK;
    }
    *key = got;
    return OK;
  }
  if (st != OK) return st;
  *key = Py_BuildValue("(KK)", (unsigned long long)pointer, (unsigned long long)nbytes);
  return *key == NULL ? ERR : OK;
}

/* The producer stream the reader names for the device (a new reference; 0
 * is the legacy default stream), or NULL with an exception set. */
static PyObject* reader_stream(const reader_spec* s, PyObject* reader, const read_state* rs) {
  if (s->kind == READ_EXCHANGE) {
    void* stream = NULL;
    if (s->api->current_work_stream(VYRE_DLX_CUDA, (int32_t)rs->device_id, &stream) != 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "current_work_stream failed without an error");
      return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)stream);
  }
  if (s->kind == READ_CUPY) {
    PyObject* stream = PyObject_CallNoArgs(s->get_stream);
    if (stream == NULL) return NULL;
    PyObject* ptr = PyObject_GetAttr(stream, s_ptr);
    Py_DECREF(stream);
    return ptr;
  }
  PyObject* fn = PyObject_GetAttr(reader, s_stream);
  if (fn == NULL) return NULL;
  PyObject* call_args[1] = {rs->device};
  PyObject* stream = PyObject_Vectorcall(fn, call_args, 1, NULL);
  Py_DECREF(fn);
  return stream;
}

/* The context's device as the call's read_state (FALLBACK when it is not
 * an int). */
static int read_state_of(PyObject* device, read_state* rs) {
  rs->device = device;
  rs->cupy_current = 0;
  if (!PyLong_CheckExact(device)) return FALLBACK;
  rs->device_id = PyLong_AsLong(device);
  if (rs->device_id == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return FALLBACK;
  }
  return OK;
}

/* ------------------------------------------------------------------------ */
/* PyTorch tensors / CuPy arrays in a synchronous dispatch                    */
/* ------------------------------------------------------------------------ */

/* With dispatch's read_known argument True (Program.dispatch without a
 * `stream`): an entry of a type in the readers registered by init_known
 * (_interop._readers: torch.Tensor, cupy.ndarray) is bound through the
 * Context's cached wrap of its memory, read in this call, and the context is
 * made to wait for the arrays' producer streams through the package's
 * _program._wait_streams (looked up at each use) before the dispatch: what
 * _program._resolve_known and a second compiled call did, in one call. Any
 * case it does not settle (a wrap not cached yet, a reader declining, a
 * SHARED binding, a closed context) is FALLBACK before anything happened;
 * the package then resolves in Python as before (a reader only reads, so
 * reading again is harmless). */
static PyObject* o_readers;   /* _interop._readers (init_known) */
static PyObject* o_program_ns; /* vars(_program), for _wait_streams */
static PyObject* o_wait_streams; /* _program._wait_streams as init_known found it */

static PyObject* raise_status(vyre_status status, PyObject* call);

typedef struct {
  int enabled;
  PyObject* context; /* new references, read at the first array */
  PyObject* device;
  PyObject* wraps;
  uint64_t context_bits;
  read_state rs;                /* (rs.device: k->device) */
  PyObject* used[MAX_BINDINGS]; /* the readers used, each once, in order */
  const reader_spec* specs[MAX_BINDINGS]; /* how each is read */
  int used_count;
  PyObject* bufs[MAX_BINDINGS]; /* the wraps bound, held until the call is done */
  int buf_count;
} known_arrays;

static void known_release(known_arrays* k) {
  while (k->used_count > 0) Py_DECREF(k->used[--k->used_count]);
  while (k->buf_count > 0) Py_DECREF(k->bufs[--k->buf_count]);
  Py_CLEAR(k->context);
  Py_CLEAR(k->device);
  Py_CLEAR(k->wraps);
}

/* Entry i (its type's reader given) as its cached wrap. */
static int known_entry(known_arrays* k, PyObject* program, PyObject* e, PyObject* reader,
                       Py_ssize_t i, PyObject* decls, vyre_dispatch_binding* s) {
  long role;
  if (decls == NULL || role_of(decls, i, &role) || role == ROLE_SHARED) return FALLBACK;
  if (k->device == NULL) {
    uint64_t bits;
    if ((k->context = PyObject_GetAttr(program, s_context)) == NULL ||
        (k->device = PyObject_GetAttr(k->context, s_device)) == NULL ||
        (k->wraps = PyObject_GetAttr(k->context, s_wraps)) == NULL) {
      PyErr_Clear();
      return FALLBACK;
    }
    if (!PyDict_CheckExact(k->wraps) || attr_u64(k->context, s_bits, &bits) || bits == 0 ||
        read_state_of(k->device, &k->rs))
      return FALLBACK;
    k->context_bits = bits;
  }
  const reader_spec* spec = spec_of(reader);
  PyObject* got;
  int st = read_array(spec, reader, e, &k->rs, &got);
  if (st == ERR) return ERR;
  if (st != OK) return FALLBACK; /* (declined: the package's path judges it) */
  PyObject* buf = PyDict_GetItemWithError(k->wraps, got); /* borrowed: (pointer, nbytes) */
  if (buf == NULL) PyErr_Clear();
  Py_DECREF(got);
  if (buf == NULL || Py_TYPE(buf) != t_buffer || k->buf_count >= MAX_BINDINGS) return FALLBACK;
  Py_INCREF(buf);
  k->bufs[k->buf_count++] = buf;
  vyre_dispatch_binding init = VYRE_DISPATCH_BINDING_INIT;
  *s = init;
  s->source = VYRE_SOURCE_RESIDENT;
  if (attr_u64(buf, s_bits, &s->buffer.bits)) return FALLBACK;
  int seen = 0;
  for (int u = 0; u < k->used_count; u++) seen |= k->used[u] == reader;
  if (!seen) {
    Py_INCREF(reader);
    k->specs[k->used_count] = spec;
    k->used[k->used_count++] = reader;
  }
  return OK;
}

/* The producers (each reader's `stream(device)` once, 0 read as the legacy
 * default stream), then the legacy default stream (the dispatch's), each
 * once: wait(context, producers). FALLBACK when a stream read fails (the
 * generic path orders those arrays), ERR when wait raised. */
static int known_wait(known_arrays* k) {
  PyObject* producers = PyList_New(0);
  PyObject* legacy = PyLong_FromLong(1); /* STREAM_LEGACY */
  int st = producers == NULL || legacy == NULL ? ERR : OK;
  for (int u = 0; st == OK && u < k->used_count; u++) {
    PyObject* stream = reader_stream(k->specs[u], k->used[u], &k->rs);
    int truth = stream == NULL ? -1 : PyObject_IsTrue(stream);
    if (truth < 0) {
      st = clear_exception() ? FALLBACK : ERR;
      Py_XDECREF(stream);
      break;
    }
    if (!truth) {
      Py_INCREF(legacy);
      Py_SETREF(stream, legacy);
    }
    int seen = PySequence_Contains(producers, stream);
    if (seen < 0 || (!seen && PyList_Append(producers, stream) < 0)) st = ERR;
    Py_DECREF(stream);
  }
  if (st == OK) {
    int seen = PySequence_Contains(producers, legacy);
    if (seen < 0 || (!seen && PyList_Append(producers, legacy) < 0)) st = ERR;
  }
  if (st == OK) {
    /* Looked up now: the package's current _wait_streams. */
    PyObject* wait = PyDict_GetItemWithError(o_program_ns, s_wait_streams); /* borrowed */
    int direct = wait != NULL && wait == o_wait_streams && p_context_wait_stream != NULL;
    for (Py_ssize_t j = 0; direct && j < PyList_GET_SIZE(producers); j++) {
      uint64_t v;
      PyObject* stream = PyList_GET_ITEM(producers, j);
      direct = PyLong_CheckExact(stream) && int_in(stream, 64, 0, &v) == OK && v != 0;
    }
    if (wait == NULL) {
      PyErr_Clear();
      st = FALLBACK;
    } else if (direct) {
      /* The package's own _wait_streams, as it is: what it does (the
       * context waits for each stream, once each, in order, through
       * vyre_context_wait_stream as fast.context_wait_stream calls it),
       * without its two Python calls. */
      for (Py_ssize_t j = 0; j < PyList_GET_SIZE(producers); j++) {
        uint64_t v;
        int_in(PyList_GET_ITEM(producers, j), 64, 0, &v);
        vyre_context context = {k->context_bits};
        vyre_status status = p_context_wait_stream(context, v);
        if (status) {
          raise_status(status, s_vyre_context_wait_stream);
          st = ERR;
          break;
        }
      }
    } else {
      Py_INCREF(wait);
      PyObject* call_args[2] = {k->context, producers};
      PyObject* r = PyObject_Vectorcall(wait, call_args, 2, NULL);
      Py_DECREF(wait);
      if (r == NULL) st = ERR;
      Py_XDECREF(r);
    }
  }
  Py_XDECREF(producers);
  Py_XDECREF(legacy);
  return st;
}

static PyObject* timing_dict(const vyre_timing* t) {
  PyObject* d = PyDict_New();
  if (d == NULL) return NULL;
  PyObject* keys[4] = {s_wall_ns, s_device_ns, s_enqueue_ns, s_wait_ns};
  uint64_t values[4] = {t->wall_ns, t->device_ns, t->enqueue_ns, t->wait_ns};
  for (int k = 0; k < 4; k++) {
    PyObject* v = PyLong_FromUnsignedLongLong(values[k]);
    if (v == NULL || PyDict_SetItem(d, keys[k], v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

/* Raises the library's error through the package's _check. */
static PyObject* raise_status(vyre_status status, PyObject* call) {
  PyObject* st = PyLong_FromLong((long)status);
  if (st == NULL) return NULL;
  PyObject* r = PyObject_CallFunctionObjArgs(o_check, st, call, NULL);
  Py_DECREF(st);
  if (r == NULL) return NULL;
  Py_DECREF(r);
  PyErr_Format(PyExc_SystemError, "%U returned status %d and _check did not raise", call,
               (int)status);
  return NULL;
}

/* Outputs(), made as the type call makes it: init() checks that Outputs is a
 * list subclass that list's own tp_new (a zeroed instance from tp_alloc) and
 * tp_init (nothing to do without arguments) make, and finds the offset of
 * its _raw_timing slot; then the list's items are set at once and the slot
 * written in place. That skips the type call, the appends (and the list's
 * regrowth) and a generic attribute store: about a tenth of a microsecond
 * per call. 0 when Outputs is anything else: then the generic calls. */
static Py_ssize_t raw_timing_offset;

static PyObject* new_outputs(Py_ssize_t n, PyObject** items) {
  if (raw_timing_offset) {
    PyTypeObject* type = (PyTypeObject*)o_outputs;
    PyObject* outputs = type->tp_alloc(type, 0);
    if (outputs == NULL) return NULL;
    if (n > 0) {
      PyListObject* list = (PyListObject*)outputs;
      list->ob_item = PyMem_New(PyObject*, (size_t)n);
      if (list->ob_item == NULL) {
        Py_DECREF(outputs);
        return PyErr_NoMemory();
      }
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject* item = items && items[i] ? items[i] : Py_None;
        Py_INCREF(item);
        list->ob_item[i] = item;
      }
      list->allocated = n;
      Py_SET_SIZE(list, n);
    }
    return outputs;
  }
  PyObject* outputs = PyObject_CallNoArgs(o_outputs);
  if (outputs == NULL) return NULL;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (PyList_Append(outputs, items && items[i] ? items[i] : Py_None) < 0) {
      Py_DECREF(outputs);
      return NULL;
    }
  }
  return outputs;
}

/* Outputs of items (a list/tuple, or n Nones when NULL) with .timing: the
 * four timing words go in as 32 bytes (Outputs._raw_timing, a slot), and
 * Outputs makes the dict when .timing is first read. */
static PyObject* timed_outputs(Py_ssize_t n, PyObject** items, const vyre_timing* timing) {
  PyObject* outputs = new_outputs(n, items);
  if (outputs == NULL) return NULL;
  const uint64_t words[4] = {timing->wall_ns, timing->device_ns, timing->enqueue_ns,
                             timing->wait_ns};
  PyObject* raw = PyBytes_FromStringAndSize((const char*)words, sizeof words);
  if (raw != NULL && raw_timing_offset) {
    /* The fresh instance's slot is empty (NULL): it takes the reference. */
    *(PyObject**)((char*)outputs + raw_timing_offset) = raw;
    return outputs;
  }
  if (raw == NULL || PyObject_SetAttr(outputs, s_raw_timing, raw) < 0) {
    Py_XDECREF(raw);
    Py_DECREF(outputs);
    return NULL;
  }
  Py_DECREF(raw);
  return outputs;
}

static int ready(void) {
  if (p_dispatch == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "vyre_cuda._fast: init() was not called");
    return 0;
  }
  return 1;
}

/* dispatch(program, bindings, params, scalars, grid, block, element_count,
 *          fixpoint_iterations, shared_memory_bytes, flags, is_async
 *          [, read_known])
 * read_known True (sync only): PyTorch tensors / CuPy arrays too (see
 * known_arrays). Sync: Outputs with .timing. Async: (pending handle bits, Outputs,
 * keep_out list). NotImplemented when the ctypes path must run. */
static PyObject* fast_dispatch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 11 && nargs != 12) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.dispatch takes 11 or 12 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  PyObject* program = args[0];
  PyObject* bindings = args[1];
  int is_async = PyObject_IsTrue(args[10]);
  if (is_async < 0) return NULL;
  known_arrays kn; /* (its arrays are filled up to the counts) */
  kn.context = kn.device = kn.wraps = NULL;
  kn.context_bits = 0;
  kn.used_count = kn.buf_count = 0;
  kn.enabled = nargs == 12 && args[11] == Py_True && !is_async && o_readers != NULL;

  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  vyre_dispatch_binding structs[MAX_BINDINGS];
  uint32_t words[MAX_WORDS];
  uint64_t scalars[MAX_SCALARS];
  uint64_t v;

  if (!PyList_CheckExact(bindings) && !PyTuple_CheckExact(bindings)) Py_RETURN_NOTIMPLEMENTED;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(bindings);
  if (n > MAX_BINDINGS) Py_RETURN_NOTIMPLEMENTED;
  /* params / scalars: "if params:" in the ctypes path; None and empty
   * lists/tuples mean none; other types go there. */
  if (args[2] != Py_None) {
    if (words_of(args[2], words, &desc.param_word_count)) Py_RETURN_NOTIMPLEMENTED;
    if (desc.param_word_count) desc.param_words = words;
  }
  if (args[3] != Py_None &&
      (PyList_CheckExact(args[3]) || PyTuple_CheckExact(args[3])) &&
      PySequence_Fast_GET_SIZE(args[3]) > 0) {
    PyObject* program_params = PyObject_GetAttr(program, s_params);
    if (program_params == NULL) {
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
    int st = scalars_of(args[3], program_params, scalars, &desc.scalar_count);
    Py_DECREF(program_params);
    if (st) Py_RETURN_NOTIMPLEMENTED;
    desc.scalars = scalars;
  } else if (args[3] != Py_None && !((PyList_CheckExact(args[3]) || PyTuple_CheckExact(args[3])))) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  if (dim3(args[4], desc.grid) || dim3(args[5], desc.block)) Py_RETURN_NOTIMPLEMENTED;
  if (int_in(args[6], 64, 0, &desc.element_count)) Py_RETURN_NOTIMPLEMENTED;
  if (int_in(args[7], 32, 0, &v)) Py_RETURN_NOTIMPLEMENTED;
  desc.fixpoint_iterations = (uint32_t)v;
  if (int_in(args[8], 32, 0, &v)) Py_RETURN_NOTIMPLEMENTED;
  desc.shared_memory_bytes = (uint32_t)v;
  if (int_in(args[9], 32, 0, &v)) Py_RETURN_NOTIMPLEMENTED;
  desc.flags = (uint32_t)v;
  vyre_program handle;
  if (attr_u64(program, s_bits, &handle.bits)) Py_RETURN_NOTIMPLEMENTED;

  PyObject* decls = NULL;  /* the program's Binding list, read for host entries */
  PyObject* outs[MAX_BINDINGS] = {NULL};
  PyObject* keep_out = NULL;
  PyObject* result = NULL;
  holds h;
  h.count = 0;
  int st = OK;
  if (is_async) {
    keep_out = PyList_New(0);
    if (keep_out == NULL) return NULL;
  }
  /* Each item is fetched afresh and held while it is marshalled: an
   * attribute read may run Python code that changes the list. */
  for (Py_ssize_t i = 0; i < n && st == OK; i++) {
    if (i >= PySequence_Fast_GET_SIZE(bindings)) {
      st = FALLBACK;
      break;
    }
    PyObject* e = PySequence_Fast_GET_ITEM(bindings, i);
    PyTypeObject* t = Py_TYPE(e);
    if (t != t_buffer && t != t_buffer_range && decls == NULL) {
      decls = PyObject_GetAttr(program, s_bindings);
      if (decls == NULL) {
        PyErr_Clear();
        st = FALLBACK;
        break;
      }
    }
    Py_INCREF(e);
    PyObject* reader = NULL;
    if (kn.enabled && t != t_buffer && t != t_buffer_range && !is_host_type(e)) {
      reader = PyDict_GetItemWithError(o_readers, (PyObject*)t); /* borrowed */
      if (reader == NULL) PyErr_Clear();
    }
    if (reader != NULL) {
      Py_INCREF(reader);
      st = known_entry(&kn, program, e, reader, i, decls, &structs[i]);
      Py_DECREF(reader);
    } else {
      st = marshal(e, i, decls, &structs[i], &h, &outs[i], keep_out);
    }
    Py_DECREF(e);
  }
  if (st == OK && PySequence_Fast_GET_SIZE(bindings) != n) st = FALLBACK;
  /* Known arrays: their producers' streams are waited for last, once
   * nothing can send the call to the package any more. */
  if (st == OK && kn.used_count) st = known_wait(&kn);
  if (st != OK) goto done;
  desc.bindings = n ? structs : NULL;
  desc.binding_count = (size_t)n;

  vyre_status status;
  if (is_async) {
    vyre_pending pending = {0};
    Py_BEGIN_ALLOW_THREADS
    status = p_dispatch_async(handle, &desc, &pending);
    Py_END_ALLOW_THREADS
    holds_release(&h);
    if (status) {
      raise_status(status, s_vyre_dispatch_async);
      goto done;
    }
    PyObject* outputs = new_outputs(n, outs);
    if (outputs == NULL) {
      /* Memory exhausted after the enqueue: the pending handle is lost to
       * Python. Wait for it so no output memory is written afterwards. */
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      Py_BEGIN_ALLOW_THREADS
      p_pending_wait(pending, VYRE_WAIT_FOREVER);
      Py_END_ALLOW_THREADS
      PyErr_Restore(type, value, tb);
      goto done;
    }
    result = Py_BuildValue("(KNO)", (unsigned long long)pending.bits, outputs, keep_out);
  } else {
    vyre_timing timing = VYRE_TIMING_INIT;
    Py_BEGIN_ALLOW_THREADS
    status = p_dispatch(handle, &desc, &timing);
    Py_END_ALLOW_THREADS
    holds_release(&h);
    if (status) {
      raise_status(status, s_vyre_dispatch);
      goto done;
    }
    result = timed_outputs(n, outs, &timing);
  }

done:
  holds_release(&h);
  known_release(&kn);
  for (Py_ssize_t i = 0; i < n && i < MAX_BINDINGS; i++) Py_XDECREF(outs[i]);
  Py_XDECREF(keep_out);
  Py_XDECREF(decls);
  if (st == FALLBACK) Py_RETURN_NOTIMPLEMENTED;
  return result;
}

/* resolve_known(decls, bindings, context, readers, plain_types)
 * -> (entries, held, producers) | None | NotImplemented
 *
 * _program._resolve_known's loop for a dispatch without a `stream` (the
 * consumer is then the legacy default stream), in C: per PyTorch tensor /
 * CuPy array (a type in `readers`), the reader's call and the Context's
 * cached wrap, and the producer streams (each reader's `stream(device)`,
 * once per call, 0 read as the legacy default stream, then the legacy
 * default stream), each once, in order of first use. The caller makes the
 * context wait for `producers` (_wait_streams). Half a microsecond less per
 * call over three arrays than the same loop in Python (dispatch_async, and
 * a dispatch's first call over new memory, use it; a later dispatch reads
 * the arrays in its own call). None: no array to resolve (as the Python
 * loop says);
 * NotImplemented: something the Python loop must decide (a type seen for
 * the first time, a wrap not cached yet, an unexpected shape); it then runs
 * and gives the same answer (a reader only reads, so reading again is
 * harmless). */
static PyObject* fast_resolve_known(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.resolve_known takes 5 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  PyObject *decls = args[0], *bindings = args[1], *context = args[2], *readers = args[3],
           *plain = args[4];
  if (!PyList_CheckExact(bindings) && !PyTuple_CheckExact(bindings)) Py_RETURN_NONE;
  if (!PyList_CheckExact(decls) || !PyDict_CheckExact(readers) || !PyDict_CheckExact(plain))
    Py_RETURN_NOTIMPLEMENTED;
  PyObject* device = NULL;
  PyObject* wraps = NULL;
  PyObject* entries = NULL;
  PyObject* held = NULL;
  PyObject* used = NULL;
  PyObject* result = NULL;
  const reader_spec* specs[MAX_BINDINGS]; /* of used's readers, in order */
  read_state rs;
  int st = OK;
  if (PySequence_Fast_GET_SIZE(bindings) > MAX_BINDINGS) Py_RETURN_NOTIMPLEMENTED;
  for (Py_ssize_t i = 0; st == OK && i < PySequence_Fast_GET_SIZE(bindings); i++) {
    PyObject* e = PySequence_Fast_GET_ITEM(bindings, i);
    PyTypeObject* t = Py_TYPE(e);
    if (t == t_buffer) continue;
    PyObject* reader = PyDict_GetItemWithError(readers, (PyObject*)t);  /* borrowed */
    if (reader == NULL) {
      if (PyErr_Occurred()) {
        PyErr_Clear();
        st = FALLBACK;
        break;
      }
      int plain_type = PyDict_Contains(plain, (PyObject*)t);
      if (plain_type < 0) PyErr_Clear();
      if (plain_type != 1) st = FALLBACK;  /* first seen: _reader_of decides */
      continue;
    }
    Py_INCREF(reader);
    Py_INCREF(e);
    long role = ROLE_INPUT;
    if (i < PyList_GET_SIZE(decls) && role_of(decls, i, &role)) st = FALLBACK;
    if (st == OK && role != ROLE_SHARED && device == NULL) {
      if ((device = PyObject_GetAttr(context, s_device)) == NULL ||
          (wraps = PyObject_GetAttr(context, s_wraps)) == NULL || !PyDict_CheckExact(wraps)) {
        PyErr_Clear();
        st = FALLBACK;
      } else {
        st = read_state_of(device, &rs);
      }
    }
    PyObject* got = NULL;
    const reader_spec* spec = &python_reader;
    if (st == OK && role != ROLE_SHARED) {
      spec = spec_of(reader);
      int read = read_array(spec, reader, e, &rs, &got);
      if (read != DECLINED) st = read; /* declined: the generic path judges it */
    }
    if (got != NULL) {
      PyObject* buf = NULL;
      if (entries == NULL) {
        /* The first array: a closed context resolves nothing. */
        uint64_t bits;
        if (attr_u64(context, s_bits, &bits)) {
          st = FALLBACK;
        } else if (bits == 0) {
          Py_DECREF(got);
          Py_DECREF(e);
          Py_DECREF(reader);
          Py_INCREF(Py_None);
          result = Py_None;
          goto done;
        } else if ((entries = PySequence_List(bindings)) == NULL ||
                   (held = PyList_New(0)) == NULL || (used = PyList_New(0)) == NULL) {
          st = ERR;
        }
      }
      if (st == OK) {
        buf = PyDict_GetItemWithError(wraps, got);  /* borrowed */
        if (buf == NULL) {
          if (PyErr_Occurred()) PyErr_Clear();
          st = FALLBACK;  /* not wrapped yet: _cached_wrap, in Python */
        }
      }
      if (st == OK) {
        int seen = PySequence_Contains(used, reader);
        if (!seen) specs[PyList_GET_SIZE(used)] = spec;
        if (seen < 0 || (!seen && PyList_Append(used, reader) < 0) ||
            PyList_Append(held, e) < 0) {
          st = ERR;
        } else if (i >= PyList_GET_SIZE(entries)) {
          st = FALLBACK;  /* bindings changed under a reader */
        } else {
          Py_INCREF(buf);
          PyList_SetItem(entries, i, buf);  /* steals buf */
        }
      }
    }
    Py_XDECREF(got);
    Py_DECREF(e);
    Py_DECREF(reader);
  }
  if (st != OK) goto done;
  if (entries == NULL) {
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
  }
  {
    /* The producers (each reader's stream once per call), then the legacy
     * default stream (the dispatch's), each once. */
    PyObject* producers = PyList_New(0);
    if (producers == NULL) {
      st = ERR;
      goto done;
    }
    PyObject* legacy = PyLong_FromLong(1);  /* STREAM_LEGACY */
    if (legacy == NULL) {
      Py_DECREF(producers);
      st = ERR;
      goto done;
    }
    for (Py_ssize_t k = 0; st == OK && k < PyList_GET_SIZE(used); k++) {
      PyObject* s = reader_stream(specs[k], PyList_GET_ITEM(used, k), &rs);
      /* `stream(device) or STREAM_LEGACY`: 0 names the legacy default stream. */
      int truth = s == NULL ? -1 : PyObject_IsTrue(s);
      if (truth < 0) {
        /* As the Python loop: the generic path (DLPack) orders these. */
        Py_XDECREF(s);
        Py_DECREF(legacy);
        Py_DECREF(producers);
        if (clear_exception()) {
          Py_INCREF(Py_None);
          result = Py_None;
        } else {
          st = ERR;
        }
        goto done;
      }
      if (!truth) {
        Py_INCREF(legacy);
        Py_SETREF(s, legacy);
      }
      int seen = PySequence_Contains(producers, s);
      if (seen < 0 || (!seen && PyList_Append(producers, s) < 0)) st = ERR;
      Py_DECREF(s);
    }
    if (st == OK) {
      int seen = PySequence_Contains(producers, legacy);
      if (seen < 0 || (!seen && PyList_Append(producers, legacy) < 0)) st = ERR;
    }
    Py_DECREF(legacy);
    if (st == OK) result = PyTuple_Pack(3, entries, held, producers);
    Py_DECREF(producers);
  }

done:
  Py_XDECREF(device);
  Py_XDECREF(wraps);
  Py_XDECREF(entries);
  Py_XDECREF(held);
  Py_XDECREF(used);
  if (st == FALLBACK) Py_RETURN_NOTIMPLEMENTED;
  return result;
}

/* graph_replay(graph_bits, output_count, params, scalars, program_params,
 *              element_count, flags, is_async)
 * For a dispatch graph replayed without bindings (its resident ranges kept).
 * params/scalars None keep the graph's. Sync: Outputs of output_count Nones
 * with .timing; async: the pending handle bits. */
static PyObject* fast_graph_replay(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 8) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.graph_replay takes 8 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  vyre_graph graph;
  uint64_t count, v;
  uint32_t words[MAX_WORDS];
  uint64_t scalars[MAX_SCALARS];
  vyre_graph_replay_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  if (int_in(args[0], 64, 0, &graph.bits) || int_in(args[1], 32, 0, &count))
    Py_RETURN_NOTIMPLEMENTED;
  /* Passed words or scalars, even none, replace the graph's: non-NULL. */
  if (args[2] != Py_None) {
    if (words_of(args[2], words, &desc.param_word_count)) Py_RETURN_NOTIMPLEMENTED;
    desc.param_words = words;
  }
  if (args[3] != Py_None) {
    if (scalars_of(args[3], args[4], scalars, &desc.scalar_count)) Py_RETURN_NOTIMPLEMENTED;
    desc.scalars = scalars;
  }
  if (int_in(args[5], 64, 0, &desc.element_count) || int_in(args[6], 32, 0, &v))
    Py_RETURN_NOTIMPLEMENTED;
  desc.flags = (uint32_t)v;
  int is_async = PyObject_IsTrue(args[7]);
  if (is_async < 0) return NULL;
  vyre_status status;
  if (is_async) {
    vyre_pending pending = {0};
    Py_BEGIN_ALLOW_THREADS
    status = p_graph_replay_async(graph, &desc, &pending);
    Py_END_ALLOW_THREADS
    if (status) return raise_status(status, s_vyre_graph_replay_async);
    return PyLong_FromUnsignedLongLong(pending.bits);
  }
  vyre_timing timing = VYRE_TIMING_INIT;
  Py_BEGIN_ALLOW_THREADS
  status = p_graph_replay(graph, &desc, &timing);
  Py_END_ALLOW_THREADS
  if (status) return raise_status(status, s_vyre_graph_replay);
  return timed_outputs((Py_ssize_t)count, NULL, &timing);
}

/* sequence_run(bits, outs: tuple) -> Outputs of outs (the DOWNLOAD steps'
 * host objects) with .timing. */
static PyObject* fast_sequence_run(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.sequence_run takes 2 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  vyre_sequence sequence;
  if (int_in(args[0], 64, 0, &sequence.bits) || !PyTuple_CheckExact(args[1]))
    Py_RETURN_NOTIMPLEMENTED;
  vyre_timing timing = VYRE_TIMING_INIT;
  vyre_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_sequence_run(sequence, &timing);
  Py_END_ALLOW_THREADS
  if (status) return raise_status(status, s_vyre_sequence_run);
  return timed_outputs(PyTuple_GET_SIZE(args[1]), &PyTuple_GET_ITEM(args[1], 0), &timing);
}

/* pending_wait(bits, timeout_ns) -> None */
static PyObject* fast_pending_wait(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.pending_wait takes 2 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  vyre_pending pending;
  uint64_t timeout;
  if (int_in(args[0], 64, 0, &pending.bits) || int_in(args[1], 64, 0, &timeout))
    Py_RETURN_NOTIMPLEMENTED;
  vyre_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_pending_wait(pending, timeout);
  Py_END_ALLOW_THREADS
  if (status) return raise_status(status, s_vyre_pending_wait);
  Py_RETURN_NONE;
}

/* pending_timing(bits) -> dict */
static PyObject* fast_pending_timing(PyObject* self, PyObject* arg) {
  (void)self;
  if (!ready()) return NULL;
  vyre_pending pending;
  if (int_in(arg, 64, 0, &pending.bits)) Py_RETURN_NOTIMPLEMENTED;
  vyre_timing timing = VYRE_TIMING_INIT;
  vyre_status status = p_pending_timing(pending, &timing);
  if (status) return raise_status(status, s_vyre_pending_timing);
  return timing_dict(&timing);
}

/* buffer_upload(bits, data, offset) -> None */
static PyObject* fast_buffer_upload(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.buffer_upload takes 3 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  vyre_buffer buffer;
  uint64_t offset;
  Py_buffer view;
  if (int_in(args[0], 64, 0, &buffer.bits) || int_in(args[2], 64, 0, &offset) ||
      host_view(args[1], 0, &view))
    Py_RETURN_NOTIMPLEMENTED;
  vyre_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_buffer_upload(buffer, offset, view.buf, (uint64_t)view.len);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (status) return raise_status(status, s_vyre_buffer_upload);
  Py_RETURN_NONE;
}

/* buffer_download(bits, out, offset) -> the filled object; out a writable
 * buffer, or a byte count for a new bytearray. */
static PyObject* fast_buffer_download(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "vyre_cuda._fast.buffer_download takes 3 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  vyre_buffer buffer;
  uint64_t offset, n;
  if (int_in(args[0], 64, 0, &buffer.bits) || int_in(args[2], 64, 0, &offset))
    Py_RETURN_NOTIMPLEMENTED;
  PyObject* out = args[1];
  PyObject* owner;
  if (PyLong_CheckExact(out)) {
    if (int_in(out, 63, 0, &n) || n == 0 || n > (uint64_t)PY_SSIZE_T_MAX)
      Py_RETURN_NOTIMPLEMENTED;
    owner = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (owner == NULL) return NULL;
    memset(PyByteArray_AS_STRING(owner), 0, (size_t)n);
  } else {
    owner = out;
    Py_INCREF(owner);
  }
  Py_buffer view;
  if (host_view(owner, 1, &view)) {
    Py_DECREF(owner);
    Py_RETURN_NOTIMPLEMENTED;
  }
  vyre_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_buffer_download(buffer, offset, view.buf, (uint64_t)view.len);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (status) {
    Py_DECREF(owner);
    return raise_status(status, s_vyre_buffer_download);
  }
  return owner;
}

/* context_wait_stream(context_bits, cu_stream) / context_signal_stream(...)
 * -> None: vyre_context_wait_stream / vyre_context_signal_stream, for the
 * ordering of a dispatch over foreign arrays after (before) their producers'
 * streams. NotImplemented when the library lacks the call or an argument is
 * not a plain int in range (the ctypes path then judges it). */
static PyObject* order_stream(PyObject* const* args, Py_ssize_t nargs, int wait) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError,
                    wait ? "vyre_cuda._fast.context_wait_stream takes 2 arguments"
                         : "vyre_cuda._fast.context_signal_stream takes 2 arguments");
    return NULL;
  }
  if (!ready()) return NULL;
  __typeof__(vyre_context_wait_stream)* fn =
      wait ? p_context_wait_stream : p_context_signal_stream;
  vyre_context context;
  uint64_t stream;
  if (fn == NULL || !PyLong_CheckExact(args[0]) || !PyLong_CheckExact(args[1]) ||
      int_in(args[0], 64, 0, &context.bits) || int_in(args[1], 64, 0, &stream) || stream == 0)
    Py_RETURN_NOTIMPLEMENTED;
  vyre_status status = fn(context, stream);
  if (status)
    return raise_status(status, wait ? s_vyre_context_wait_stream : s_vyre_context_signal_stream);
  Py_RETURN_NONE;
}

static PyObject* fast_context_wait_stream(PyObject* self, PyObject* const* args,
                                          Py_ssize_t nargs) {
  (void)self;
  return order_stream(args, nargs, 1);
}

static PyObject* fast_context_signal_stream(PyObject* self, PyObject* const* args,
                                            Py_ssize_t nargs) {
  (void)self;
  return order_stream(args, nargs, 0);
}

static int set_type(PyObject* o, PyTypeObject** slot, const char* what) {
  if (!PyType_Check(o)) {
    PyErr_Format(PyExc_TypeError, "vyre_cuda._fast.init: %s must be a type", what);
    return -1;
  }
  Py_INCREF(o);
  Py_XSETREF(*slot, (PyTypeObject*)o);
  return 0;
}

/* init(addresses: dict name -> int, Buffer, BufferRange, array.array,
 *      PinnedMemory, Outputs, check) */
static PyObject* fast_init(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 7 || !PyDict_Check(args[0]) || !PyCallable_Check(args[5]) ||
      !PyCallable_Check(args[6])) {
    PyErr_SetString(PyExc_TypeError,
                    "vyre_cuda._fast.init(addresses, Buffer, BufferRange, array, PinnedMemory, "
                    "Outputs, check)");
    return NULL;
  }
  struct {
    const char* name;
    void** slot;
  } fns[] = {
      {"vyre_dispatch", (void**)&p_dispatch},
      {"vyre_dispatch_async", (void**)&p_dispatch_async},
      {"vyre_pending_wait", (void**)&p_pending_wait},
      {"vyre_pending_timing", (void**)&p_pending_timing},
      {"vyre_graph_replay", (void**)&p_graph_replay},
      {"vyre_graph_replay_async", (void**)&p_graph_replay_async},
      {"vyre_buffer_upload", (void**)&p_buffer_upload},
      {"vyre_buffer_download", (void**)&p_buffer_download},
      {"vyre_sequence_run", (void**)&p_sequence_run},
  };
  void* addresses[sizeof fns / sizeof fns[0]];
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    PyObject* a = PyDict_GetItemString(args[0], fns[k].name);  /* borrowed */
    if (a == NULL || !PyLong_Check(a)) {
      PyErr_Format(PyExc_ValueError, "vyre_cuda._fast.init: no address for %s", fns[k].name);
      return NULL;
    }
    addresses[k] = PyLong_AsVoidPtr(a);
    if (addresses[k] == NULL) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "vyre_cuda._fast.init: %s is NULL", fns[k].name);
      return NULL;
    }
  }
  /* Optional entry points: absent (or None) leaves the call to ctypes. */
  struct {
    const char* name;
    void** slot;
  } optional[] = {
      {"vyre_context_wait_stream", (void**)&p_context_wait_stream},
      {"vyre_context_signal_stream", (void**)&p_context_signal_stream},
  };
  void* optional_addresses[sizeof optional / sizeof optional[0]];
  for (size_t k = 0; k < sizeof optional / sizeof optional[0]; k++) {
    PyObject* a = PyDict_GetItemString(args[0], optional[k].name);  /* borrowed */
    optional_addresses[k] = NULL;
    if (a != NULL && PyLong_Check(a)) {
      optional_addresses[k] = PyLong_AsVoidPtr(a);
      if (optional_addresses[k] == NULL && PyErr_Occurred()) return NULL;
    }
  }
  if (set_type(args[1], &t_buffer, "Buffer") < 0 ||
      set_type(args[2], &t_buffer_range, "BufferRange") < 0 ||
      set_type(args[3], &t_array, "array") < 0 ||
      set_type(args[4], &t_pinned, "PinnedMemory") < 0)
    return NULL;
  Py_ssize_t offset = 0;
  if (PyType_Check(args[5])) {
    PyTypeObject* type = (PyTypeObject*)args[5];
    PyObject* slot = PyObject_GetAttr(args[5], s_raw_timing);
    if (slot == NULL) {
      PyErr_Clear();
    } else {
      if (PyType_IsSubtype(type, &PyList_Type) && type->tp_new == PyList_Type.tp_new &&
          type->tp_init == PyList_Type.tp_init && type->tp_alloc == PyType_GenericAlloc &&
          Py_TYPE(slot) == &PyMemberDescr_Type &&
          ((PyMemberDescrObject*)slot)->d_common.d_type == type &&
          ((PyMemberDescrObject*)slot)->d_member->type == T_OBJECT_EX &&
          ((PyMemberDescrObject*)slot)->d_member->offset > 0)
        offset = ((PyMemberDescrObject*)slot)->d_member->offset;
      Py_DECREF(slot);
    }
  }
  Py_INCREF(args[5]);
  Py_XSETREF(o_outputs, args[5]);
  raw_timing_offset = offset;
  Py_INCREF(args[6]);
  Py_XSETREF(o_check, args[6]);
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) *fns[k].slot = addresses[k];
  for (size_t k = 0; k < sizeof optional / sizeof optional[0]; k++)
    *optional[k].slot = optional_addresses[k];
  Py_RETURN_NONE;
}

/* init_known(readers: dict, program_namespace: dict): _interop._readers
 * (type -> reader) and vars(_program) (its _wait_streams), for dispatch's
 * read_known. */
static PyObject* fast_init_known(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
    PyErr_SetString(PyExc_TypeError,
                    "vyre_cuda._fast.init_known(readers: dict, program_namespace: dict)");
    return NULL;
  }
  Py_INCREF(args[0]);
  Py_XSETREF(o_readers, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(o_program_ns, args[1]);
  PyObject* wait = PyDict_GetItemWithError(args[1], s_wait_streams); /* borrowed */
  if (wait == NULL && PyErr_Occurred()) return NULL;
  Py_XINCREF(wait);
  Py_XSETREF(o_wait_streams, wait);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))fast_init, METH_FASTCALL,
     "init(addresses, Buffer, BufferRange, array, PinnedMemory, Outputs, check): the library's "
     "entry points (name -> address) and the package's types."},
    {"init_known", (PyCFunction)(void (*)(void))fast_init_known, METH_FASTCALL,
     "init_known(readers, program_namespace): PyTorch / CuPy arrays in dispatch."},
    {"dispatch", (PyCFunction)(void (*)(void))fast_dispatch, METH_FASTCALL,
     "Program.dispatch / dispatch_async over resident and host bindings."},
    {"resolve_known", (PyCFunction)(void (*)(void))fast_resolve_known, METH_FASTCALL,
     "_program._resolve_known's loop (PyTorch / CuPy arrays to cached wraps), no stream."},
    {"graph_replay", (PyCFunction)(void (*)(void))fast_graph_replay, METH_FASTCALL,
     "Graph.replay / replay_async keeping the bound ranges."},
    {"sequence_run", (PyCFunction)(void (*)(void))fast_sequence_run, METH_FASTCALL,
     "Sequence.run."},
    {"pending_wait", (PyCFunction)(void (*)(void))fast_pending_wait, METH_FASTCALL,
     "vyre_pending_wait."},
    {"pending_timing", fast_pending_timing, METH_O, "vyre_pending_timing as a dict."},
    {"buffer_upload", (PyCFunction)(void (*)(void))fast_buffer_upload, METH_FASTCALL,
     "Buffer.upload from host memory."},
    {"buffer_download", (PyCFunction)(void (*)(void))fast_buffer_download, METH_FASTCALL,
     "Buffer.download into host memory or a new bytearray."},
    {"context_wait_stream", (PyCFunction)(void (*)(void))fast_context_wait_stream,
     METH_FASTCALL, "vyre_context_wait_stream(context bits, CUstream)."},
    {"context_signal_stream", (PyCFunction)(void (*)(void))fast_context_signal_stream,
     METH_FASTCALL, "vyre_context_signal_stream(context bits, CUstream)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast",
    "The compiled fast path of vyre_cuda (internal: the package calls it).", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define INTERN(var, text)                                  \
  do {                                                     \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
      return NULL;                                         \
  } while (0)

PyMODINIT_FUNC PyInit__fast(void) {
  INTERN(s_bits, "_bits");
  INTERN(s_address, "_address");
  INTERN(s_nbytes, "nbytes");
  INTERN(s_buffer, "buffer");
  INTERN(s_offset, "offset");
  INTERN(s_length, "length");
  INTERN(s_bindings, "bindings");
  INTERN(s_params, "params");
  INTERN(s_role, "role");
  INTERN(s_raw_timing, "_raw_timing");
  INTERN(s_wall_ns, "wall_ns");
  INTERN(s_device_ns, "device_ns");
  INTERN(s_enqueue_ns, "enqueue_ns");
  INTERN(s_wait_ns, "wait_ns");
  INTERN(s_vyre_dispatch, "vyre_dispatch");
  INTERN(s_vyre_dispatch_async, "vyre_dispatch_async");
  INTERN(s_vyre_pending_wait, "vyre_pending_wait");
  INTERN(s_vyre_pending_timing, "vyre_pending_timing");
  INTERN(s_vyre_graph_replay, "vyre_graph_replay");
  INTERN(s_vyre_graph_replay_async, "vyre_graph_replay_async");
  INTERN(s_vyre_buffer_upload, "vyre_buffer_upload");
  INTERN(s_vyre_buffer_download, "vyre_buffer_download");
  INTERN(s_vyre_sequence_run, "vyre_sequence_run");
  INTERN(s_vyre_context_wait_stream, "vyre_context_wait_stream");
  INTERN(s_vyre_context_signal_stream, "vyre_context_signal_stream");
  INTERN(s_device, "device");
  INTERN(s_wraps, "_wraps");
  INTERN(s_stream, "stream");
  INTERN(s_context, "_context");
  INTERN(s_wait_streams, "_wait_streams");
  INTERN(s_data, "data");
  INTERN(s_device_id, "device_id");
  INTERN(s_ptr, "ptr");
  INTERN(s_c_read, "_c_read");
  return PyModule_Create(&module);
}
