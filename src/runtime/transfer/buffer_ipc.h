// Buffers shared between processes: a buffer's memory exported as a
// vyre_ipc_handle (CUDA IPC memory handle plus what the importer needs to
// check and size it), and imported as a borrowed buffer of another process's
// context.
#ifndef VYRE_RUNTIME_TRANSFER_BUFFER_IPC_H_
#define VYRE_RUNTIME_TRANSFER_BUFFER_IPC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/context/context.h"
#include "runtime/transfer/buffer.h"
#include "vyre_cuda.h"

namespace vyre {

// The handle of `buffer`'s whole range. Refused for an import (the exporter's
// memory is not this process's to share) and for memory CUDA cannot export.
absl::Status ExportIpc(Buffer& buffer, vyre_ipc_handle* out, const char* what);

// Maps the memory `handle` names into `context` (once per CUDA context and
// handle; later imports share the mapping) and returns a buffer over it.
absl::StatusOr<std::shared_ptr<Buffer>> ImportIpc(std::shared_ptr<Context> context,
                                                  const vyre_ipc_handle& handle,
                                                  const char* what);

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_BUFFER_IPC_H_
