// Package rawdriver calls the CUDA driver directly from Go tests, standing in
// for other CUDA code in the process (CuPy, PyTorch, a user's own
// cuMemAlloc): the driver the library loaded (VYRE_CUDA_DRIVER_LIBRARY, else
// libcuda.so.1; dlopen of the same path returns the same instance), entry
// points resolved through cuGetProcAddress_v2 at CUDA 12.0's ABI. Like
// CuPy or PyTorch, it retains device 0's primary context once and keeps it
// for the life of the process: released per call, the context was destroyed
// (with the memory and streams made in it) whenever the test's own vyre
// context was closed first. Every call makes that context current for its
// duration (cgo calls may run on any OS thread). (cgo is not allowed in
// _test.go files, hence a package.)
package rawdriver

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*get_proc_fn)(const char*, void**, int, unsigned long long, int*);
typedef int (*init_fn)(unsigned int);
typedef int (*device_get_fn)(int*, int);
typedef int (*retain_fn)(void**, int);
typedef int (*get_current_fn)(void**);
typedef int (*set_current_fn)(void*);
typedef int (*mem_alloc_fn)(unsigned long long*, size_t);
typedef int (*mem_free_fn)(unsigned long long);
typedef int (*htod_fn)(unsigned long long, const void*, size_t, void*);
typedef int (*dtoh_fn)(void*, unsigned long long, size_t, void*);
typedef int (*memset32_fn)(unsigned long long, unsigned int, size_t, void*);
typedef int (*stream_create_fn)(void**, unsigned int);
typedef int (*stream_fn)(void*);

static struct {
  int loaded;
  void* context;  // device 0's primary context, retained for good
  init_fn init;
  device_get_fn device_get;
  retain_fn retain;
  get_current_fn get_current;
  set_current_fn set_current;
  mem_alloc_fn mem_alloc;
  mem_free_fn mem_free;
  htod_fn htod;
  dtoh_fn dtoh;
  memset32_fn memset32;
  stream_create_fn stream_create;
  stream_fn stream_destroy;
  stream_fn stream_sync;
} raw;

// 0, or -1 when the driver or an entry point is missing.
static int raw_load(const char* path) {
  if (raw.loaded) return 0;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  get_proc_fn get = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!get) return -1;
#define RAW_SYM(field, name)                                          \
  {                                                                   \
    void* p = NULL;                                                   \
    int status = 0;                                                   \
    if (get(name, &p, 12000, 0, &status) != 0 || !p) return -1;      \
    *(void**)&raw.field = p;                                          \
  }
  RAW_SYM(init, "cuInit");
  RAW_SYM(device_get, "cuDeviceGet");
  RAW_SYM(retain, "cuDevicePrimaryCtxRetain");
  RAW_SYM(get_current, "cuCtxGetCurrent");
  RAW_SYM(set_current, "cuCtxSetCurrent");
  RAW_SYM(mem_alloc, "cuMemAlloc");
  RAW_SYM(mem_free, "cuMemFree");
  RAW_SYM(htod, "cuMemcpyHtoDAsync");
  RAW_SYM(dtoh, "cuMemcpyDtoHAsync");
  RAW_SYM(memset32, "cuMemsetD32Async");
  RAW_SYM(stream_create, "cuStreamCreate");
  RAW_SYM(stream_destroy, "cuStreamDestroy");
  RAW_SYM(stream_sync, "cuStreamSynchronize");
#undef RAW_SYM
  int device = 0;
  if (raw.init(0) || raw.device_get(&device, 0) || raw.retain(&raw.context, device)) return -1;
  raw.loaded = 1;
  return 0;
}

typedef struct { void* previous; } scope;

static int enter(scope* s) {
  s->previous = NULL;
  raw.get_current(&s->previous);
  return raw.set_current(raw.context);
}
static void leave(scope* s) { raw.set_current(s->previous); }

#define IN_CONTEXT(expr)      \
  scope s;                    \
  int r = enter(&s);          \
  if (r) return r;            \
  r = (expr);                 \
  leave(&s);                  \
  return r;

static int raw_alloc(unsigned long long* p, size_t n) { IN_CONTEXT(raw.mem_alloc(p, n)) }
static int raw_free(unsigned long long p) { IN_CONTEXT(raw.mem_free(p)) }
static int raw_write(unsigned long long dst, const void* src, size_t n) {
  IN_CONTEXT(raw.htod(dst, src, n, NULL) || raw.stream_sync(NULL))
}
static int raw_read(void* dst, unsigned long long src, size_t n, uintptr_t stream) {
  IN_CONTEXT(raw.dtoh(dst, src, n, (void*)stream) || raw.stream_sync((void*)stream))
}
static int raw_memset32(unsigned long long dst, unsigned int v, size_t n, uintptr_t stream) {
  IN_CONTEXT(raw.memset32(dst, v, n, (void*)stream))
}
static int raw_stream_create(uintptr_t* out) {
  void* s_ = NULL;
  scope s;
  int r = enter(&s);
  if (r) return r;
  r = raw.stream_create(&s_, 1);
  leave(&s);
  *out = (uintptr_t)s_;
  return r;
}
static int raw_stream_destroy(uintptr_t stream) { IN_CONTEXT(raw.stream_destroy((void*)stream)) }
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

func load() error {
	path := os.Getenv("VYRE_CUDA_DRIVER_LIBRARY")
	if path == "" {
		path = "libcuda.so.1"
	}
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	if C.raw_load(p) != 0 {
		return fmt.Errorf("cannot load the CUDA driver %q or one of its entry points", path)
	}
	return nil
}

func result(call string, r C.int) error {
	if r != 0 {
		return fmt.Errorf("%s returned CUresult %d", call, int(r))
	}
	return nil
}

// Alloc is cuMemAlloc of `bytes`.
func Alloc(bytes uint64) (uint64, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var p C.ulonglong
	err := result("cuMemAlloc", C.raw_alloc(&p, C.size_t(bytes)))
	return uint64(p), err
}

// Free is cuMemFree.
func Free(pointer uint64) error {
	if err := load(); err != nil {
		return err
	}
	return result("cuMemFree", C.raw_free(C.ulonglong(pointer)))
}

// Write copies src (len > 0) to device memory at dst and waits (NULL stream).
func Write(dst uint64, src []byte) error {
	if err := load(); err != nil {
		return err
	}
	// A Go pointer as a call argument: raw_write waits before it returns.
	return result("cuMemcpyHtoDAsync", C.raw_write(C.ulonglong(dst), unsafe.Pointer(&src[0]),
		C.size_t(len(src))))
}

// Read copies len(dst) (> 0) bytes from device memory at src into dst,
// enqueued on `stream` (0: the NULL stream), and waits for that stream.
func Read(src uint64, dst []byte, stream uint64) error {
	if err := load(); err != nil {
		return err
	}
	// A Go pointer as a call argument: raw_read waits before it returns.
	return result("cuMemcpyDtoHAsync", C.raw_read(unsafe.Pointer(&dst[0]), C.ulonglong(src),
		C.size_t(len(dst)), C.uintptr_t(stream)))
}

// MemsetD32 enqueues cuMemsetD32Async of `count` words on `stream`.
func MemsetD32(dst uint64, value uint32, count int, stream uint64) error {
	if err := load(); err != nil {
		return err
	}
	return result("cuMemsetD32Async",
		C.raw_memset32(C.ulonglong(dst), C.uint(value), C.size_t(count), C.uintptr_t(stream)))
}

// StreamCreate is cuStreamCreate(CU_STREAM_NON_BLOCKING).
func StreamCreate() (uint64, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var s C.uintptr_t
	err := result("cuStreamCreate", C.raw_stream_create(&s))
	return uint64(s), err
}

// StreamDestroy is cuStreamDestroy.
func StreamDestroy(stream uint64) error {
	if err := load(); err != nil {
		return err
	}
	return result("cuStreamDestroy", C.raw_stream_destroy(C.uintptr_t(stream)))
}
