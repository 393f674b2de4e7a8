/* The DLPack C exchange API (DLPack 1.2+), as far as vyre_cuda._fast reads it.
 *
 * A producer such as PyTorch (2.10 and later) puts a capsule named
 * "dlpack_exchange_api" on its tensor type as `__dlpack_c_exchange_api__`;
 * the capsule points at a table of C functions that describe one of its
 * tensors as a DLTensor, and name the current stream of a device, with no
 * Python call and no DLPack capsule per tensor. These declarations follow the
 * layout the DLPack specification (dlpack.h) gives those structs; nothing
 * here links against DLPack or the producer. Only major version 1 is read:
 * a later major version may change the table, and the package then reads
 * the tensor the slower way.
 */
#ifndef VYRE_CUDA_PYTHON_DLPACK_EXCHANGE_H_
#define VYRE_CUDA_PYTHON_DLPACK_EXCHANGE_H_

#include <stdint.h>

#define VYRE_DLX_CAPSULE_NAME "dlpack_exchange_api"
#define VYRE_DLX_MAJOR 1

/* DLDeviceType values read here. */
enum { VYRE_DLX_CUDA = 2 };
/* DLDataTypeCode values the binding refuses: an opaque handle, and complex
 * (a conjugate view's memory is not what it shows). */
enum { VYRE_DLX_OPAQUE_HANDLE = 3, VYRE_DLX_COMPLEX = 5 };

typedef struct {
  int32_t device_type;
  int32_t device_id;
} vyre_dlx_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} vyre_dlx_dtype;

typedef struct {
  void* data;
  vyre_dlx_device device;
  int32_t ndim;
  vyre_dlx_dtype dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} vyre_dlx_tensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} vyre_dlx_version;

typedef struct vyre_dlx_header {
  vyre_dlx_version version;
  struct vyre_dlx_header* prev_api;
} vyre_dlx_header;

/* DLPackExchangeAPI. The three functions this module never calls keep
 * their places as plain pointers. */
typedef struct {
  vyre_dlx_header header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  /* 0, or -1 with a Python exception set. May be NULL. The DLTensor's
   * shape and strides stay valid only until control returns to Python. */
  int (*dltensor_from_py_object_no_sync)(void* py_object, vyre_dlx_tensor* out);
  /* 0, or -1 with a Python exception set. */
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
} vyre_dlx_api;

#endif /* VYRE_CUDA_PYTHON_DLPACK_EXCHANGE_H_ */
