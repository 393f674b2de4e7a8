#include "runtime/transfer/buffer_ipc.h"

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include <array>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/checked_math.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"

namespace vyre {
namespace {

// What vyre_ipc_handle's bytes hold. Fixed-width fields at fixed offsets, in
// the machine's byte order (a handle never leaves the machine), with a
// checksum so bytes cut short or corrupted in transit are refused before the
// driver sees them.
struct IpcWire {
  char magic[8];         // kMagic
  uint32_t layout;       // kLayout
  uint32_t pid;          // the exporting process
  uint64_t bytes;        // the exported buffer's size
  uint64_t offset;       // its start past the allocation's base
  uint64_t ticket;       // its export ticket (ExportTicket), 0 for none
  uint8_t uuid[16];      // the device's UUID (ordinals differ between processes)
  uint8_t cu_handle[64]; // CUipcMemHandle of the allocation's base
  uint64_t checksum;     // FNV-1a 64 of everything above
};
static_assert(sizeof(IpcWire) == VYRE_IPC_HANDLE_BYTES, "the wire layout fills the handle");
static_assert(sizeof(CUipcMemHandle) == sizeof(IpcWire::cu_handle), "CUDA's handle is 64 bytes");

constexpr char kMagic[8] = {'v', 'y', 'r', 'e', 'i', 'p', 'c', '\0'};
constexpr uint32_t kLayout = 2;

constexpr const char* kFreedFix =
    "Fix: keep the exported buffer allocated in the exporting process until every importer "
    "has freed its import, and import on the same machine.";

uint64_t Checksum(const IpcWire& wire) {
  const auto* p = reinterpret_cast<const uint8_t*>(&wire);
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < offsetof(IpcWire, checksum); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

using Uuid = std::array<uint8_t, 16>;

absl::StatusOr<Uuid> DeviceUuid(CUdevice device, const char* what) {
  CUuuid uuid{};
  VYRE_CU(absl::StrFormat("%s: reading the device's UUID", what), cuDeviceGetUuid, &uuid, device);
  Uuid out;
  std::memcpy(out.data(), uuid.bytes, out.size());
  return out;
}

// As nvidia-smi -L prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string UuidText(const uint8_t* u) {
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                         u[12], u[13], u[14], u[15]);
}

// One cuIpcOpenMemHandle mapping in one CUDA context, closed when the last
// buffer over it is freed.
class IpcMapping {
 public:
  IpcMapping(CUcontext context, CUdeviceptr base) : context_(context), base_(base) {}
  ~IpcMapping() {
    driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
    base_.reset();
  }
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  CUdeviceptr base() const { return base_.get(); }

 private:
  CUcontext context_;
  driver::IpcMappingGuard base_;
};

// The live mappings of the process, by CUDA context and CUDA handle: the
// driver maps a handle once per context, so a second import shares the first.
class IpcMappings {
 public:
  static IpcMappings& Get() {
    // Never destroyed: buffers freed during exit still find it.
    static IpcMappings* mappings = new IpcMappings;
    return *mappings;
  }

  // The live mapping of `key`, or null; forgets expired ones on the way.
  std::shared_ptr<IpcMapping> Find(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = live_.find(key);
    if (it == live_.end()) return nullptr;
    std::shared_ptr<IpcMapping> mapping = it->second.lock();
    if (mapping == nullptr) live_.erase(it);
    return mapping;
  }
  void Add(std::string key, const std::shared_ptr<IpcMapping>& mapping)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::erase_if(live_, [](const auto& entry) { return entry.second.expired(); });
    live_[std::move(key)] = mapping;
  }

  // Held across cuIpcOpenMemHandle: two threads importing one handle map it
  // once.
  absl::Mutex mu;

 private:
  absl::flat_hash_map<std::string, std::weak_ptr<IpcMapping>> live_ ABSL_GUARDED_BY(mu);
};

// Whether an exported buffer is still allocated, for importers. The driver
// cannot tell them: it sub-allocates small buffers from larger blocks and
// keeps a freed buffer's block while its process lives, so opening the
// handle of a freed buffer succeeds and maps memory that is reused. A ticket
// is an empty POSIX shared memory object named for the exporting process
// and a serial, created at the buffer's first export and unlinked when its
// memory is freed or the process exits; an import whose ticket is gone is
// refused. Where shared memory objects cannot be made (no /dev/shm), the
// handle carries ticket 0 and importers rely on the driver alone.
class ExportTicket {
 public:
  // A new ticket, or null when the object cannot be made.
  static std::shared_ptr<ExportTicket> Make() {
    static std::atomic<uint64_t> serial{0};
    const uint64_t id = serial.fetch_add(1, std::memory_order_relaxed) + 1;
    std::string name = Name(static_cast<uint32_t>(getpid()), id);
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDONLY, 0600);
    if (fd < 0) return nullptr;
    close(fd);
    Live& live = Live::Get();
    absl::MutexLock lock(&live.mu);
    if (!live.at_exit_registered) live.at_exit_registered = std::atexit(&UnlinkAllAtExit) == 0;
    live.names.insert(name);
    return std::shared_ptr<ExportTicket>(new ExportTicket(id, std::move(name)));
  }
  ~ExportTicket() {
    shm_unlink(name_.c_str());
    Live& live = Live::Get();
    absl::MutexLock lock(&live.mu);
    live.names.erase(name_);
  }
  ExportTicket(const ExportTicket&) = delete;
  ExportTicket& operator=(const ExportTicket&) = delete;
  uint64_t id() const { return id_; }

  static std::string Name(uint32_t pid, uint64_t id) {
    return absl::StrFormat("/vyre_cuda_ipc_%u_%u", pid, id);
  }
  // True when the exporter's ticket `id` still exists.
  static bool Exists(uint32_t pid, uint64_t id) {
    const int fd = shm_open(Name(pid, id).c_str(), O_RDONLY, 0);
    if (fd < 0) return errno != ENOENT;  // only a missing ticket proves the buffer gone
    close(fd);
    return true;
  }

 private:
  ExportTicket(uint64_t id, std::string name) : id_(id), name_(std::move(name)) {}

  // The tickets of buffers still allocated, unlinked at exit, where buffers
  // are not freed one by one.
  struct Live {
    static Live& Get() {
      static Live* live = new Live;  // never destroyed: used by atexit
      return *live;
    }
    absl::Mutex mu;
    absl::flat_hash_set<std::string> names ABSL_GUARDED_BY(mu);
    bool at_exit_registered ABSL_GUARDED_BY(mu) = false;
  };
  static void UnlinkAllAtExit() {
    Live& live = Live::Get();
    absl::MutexLock lock(&live.mu);
    for (const std::string& name : live.names) shm_unlink(name.c_str());
  }

  uint64_t id_;
  std::string name_;
};

// Serialises first exports of a buffer (attaching its ticket once).
absl::Mutex& TicketMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

// cuIpcOpenMemHandle's answers for a handle that names no live allocation
// (its buffer freed, its process gone, another machine's) or that this
// context cannot map.
bool HandleNotOpenable(CUresult r) {
  return r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE ||
         r == CUDA_ERROR_MAP_FAILED || r == CUDA_ERROR_NOT_FOUND ||
         r == CUDA_ERROR_INVALID_DEVICE || r == CUDA_ERROR_INVALID_CONTEXT;
}

absl::StatusOr<IpcWire> ReadWire(const vyre_ipc_handle& handle, const char* what) {
  IpcWire wire;
  std::memcpy(&wire, handle.bytes, sizeof(wire));
  if (std::memcmp(wire.magic, kMagic, sizeof(kMagic)) != 0 || wire.layout != kLayout ||
      wire.checksum != Checksum(wire)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the handle's bytes are not a vyre_ipc_handle from vyre_buffer_export_ipc "
                  "(%s). Fix: send all %d bytes of the exported handle unchanged, and import "
                  "them with a vyre-cuda of the same handle layout.",
                  what,
                  std::memcmp(wire.magic, kMagic, sizeof(kMagic)) != 0 ? "no handle marker"
                  : wire.layout != kLayout ? "an unknown handle layout"
                                           : "their checksum does not match",
                  VYRE_IPC_HANDLE_BYTES);
  }
  if (!RangeInside(wire.offset, wire.bytes, ~uint64_t{0}) || wire.bytes == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the handle names %u bytes at offset %u, which no buffer holds. Fix: "
                  "send the bytes vyre_buffer_export_ipc wrote, unchanged.",
                  what, wire.bytes, wire.offset);
  }
  return wire;
}

}  // namespace

absl::Status ExportIpc(Buffer& buffer, vyre_ipc_handle* out, const char* what) {
  if (buffer.imported()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the buffer is an import of memory another process exported, and CUDA "
                  "exports memory only from the process that allocated it. Fix: send on the "
                  "handle you imported it from, or export the buffer in the process that "
                  "allocated it.",
                  what);
  }
  Context& context = buffer.context();
  driver::ScopedContext bind(context.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  IpcWire wire{};
  std::memcpy(wire.magic, kMagic, sizeof(kMagic));
  wire.layout = kLayout;
  wire.bytes = buffer.bytes();
  wire.pid = static_cast<uint32_t>(getpid());
  CUdeviceptr base = buffer.device();
  if (buffer.borrowed()) {
    // Wrapped memory may start inside its allocation; CUDA's handle names the
    // allocation.
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR;
    void* value = &base;
    VYRE_CU(absl::StrFormat("%s: finding the allocation of the buffer's memory", what),
            cuPointerGetAttributes, 1, &attribute, &value, buffer.device());
  }
  wire.offset = buffer.device() - base;
  VYRE_ASSIGN_OR_RETURN(Uuid uuid, DeviceUuid(context.cu_device(), what));
  std::memcpy(wire.uuid, uuid.data(), uuid.size());
  CUipcMemHandle cu_handle{};
  const CUresult r = driver::Api().cuIpcGetMemHandle(&cu_handle, base);
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) {
    return MakeError(
        VYRE_STATUS_INVALID_ARGUMENT,
        absl::StrFormat(
            "%s: CUDA cannot export the memory at 0x%x for other processes (cuIpcGetMemHandle "
            "returned %s): memory from a stream-ordered pool (cudaMallocAsync), from cuMemCreate "
            "or managed memory has no IPC handle, and Windows WDDM and WSL have none at all. "
            "Fix: export a buffer from vyre_buffer_alloc, or one wrapping memory from "
            "cudaMalloc or cuMemAlloc, on Linux.",
            what, buffer.device(), driver::CuResultName(r)),
        static_cast<int32_t>(r));
  }
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, absl::StrFormat("%s: exporting the buffer's memory", what),
                           "cuIpcGetMemHandle");
  }
  std::memcpy(wire.cu_handle, cu_handle.reserved, sizeof(wire.cu_handle));
  {
    absl::MutexLock lock(&TicketMutex());
    if (buffer.export_ticket() == nullptr) buffer.set_export_ticket(ExportTicket::Make());
    const auto* ticket = static_cast<const ExportTicket*>(buffer.export_ticket().get());
    wire.ticket = ticket != nullptr ? ticket->id() : 0;
  }
  wire.checksum = Checksum(wire);
  std::memcpy(out->bytes, &wire, sizeof(wire));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Buffer>> ImportIpc(std::shared_ptr<Context> context,
                                                  const vyre_ipc_handle& handle,
                                                  const char* what) {
  VYRE_ASSIGN_OR_RETURN(IpcWire wire, ReadWire(handle, what));
  if (wire.pid == static_cast<uint32_t>(getpid())) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the handle was exported by this process (pid %u), and CUDA opens IPC "
                  "handles only in other processes. Fix: use the exported buffer itself here "
                  "(vyre_buffer_copy moves its bytes to a buffer of another context).",
                  what, wire.pid);
  }
  if (wire.ticket != 0 && !ExportTicket::Exists(wire.pid, wire.ticket)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the handle's buffer of %u bytes is no longer allocated: process %u freed "
                  "it or has exited. %s",
                  what, wire.bytes, wire.pid, kFreedFix);
  }
  const uint32_t ordinal = context->device().ordinal;
  VYRE_ASSIGN_OR_RETURN(Uuid uuid, DeviceUuid(context->cu_device(), what));
  if (std::memcmp(uuid.data(), wire.uuid, uuid.size()) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the handle's buffer is on the device with UUID %s, but the context is on "
                  "device %u (UUID %s). Fix: import it into a context on the device with UUID "
                  "%s (nvidia-smi -L lists UUIDs; CUDA_VISIBLE_DEVICES can give it another "
                  "ordinal in each process), then vyre_buffer_copy it wherever it is needed.",
                  what, UuidText(wire.uuid), ordinal, UuidText(uuid.data()),
                  UuidText(wire.uuid));
  }
  const CUcontext cu = context->cu();
  std::string key(reinterpret_cast<const char*>(&cu), sizeof(cu));
  key.append(reinterpret_cast<const char*>(wire.cu_handle), sizeof(wire.cu_handle));
  std::shared_ptr<IpcMapping> mapping;
  {
    IpcMappings& mappings = IpcMappings::Get();
    absl::MutexLock lock(&mappings.mu);
    mapping = mappings.Find(key);
    if (mapping == nullptr) {
      driver::ScopedContext bind(cu);
      VYRE_RETURN_IF_ERROR(bind.status(what));
      CUipcMemHandle cu_handle{};
      std::memcpy(cu_handle.reserved, wire.cu_handle, sizeof(wire.cu_handle));
      CUdeviceptr base = 0;
      const CUresult r = driver::Api().cuIpcOpenMemHandle(&base, cu_handle,
                                                          CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      if (HandleNotOpenable(r)) {
        return MakeError(
            VYRE_STATUS_INVALID_ARGUMENT,
            absl::StrFormat(
                "%s: the CUDA driver could not open the handle of %u bytes from process %u "
                "(cuIpcOpenMemHandle returned %s): its buffer was freed or its process has "
                "exited, or it comes from another machine. %s",
                what, wire.bytes, wire.pid, driver::CuResultName(r), kFreedFix),
            static_cast<int32_t>(r));
      }
      if (r != CUDA_SUCCESS) {
        return driver::CuError(r, absl::StrFormat("%s: mapping memory another process exported",
                                                  what),
                               "cuIpcOpenMemHandle");
      }
      mapping = std::make_shared<IpcMapping>(cu, base);
      mappings.Add(std::move(key), mapping);
    }
  }
  const CUdeviceptr device = mapping->base() + wire.offset;
  return Buffer::Import(std::move(context), device, wire.bytes, std::move(mapping));
}

}  // namespace vyre
