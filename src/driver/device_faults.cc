#include "driver/device_faults.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"
#include "driver/release_report.h"

namespace vyre::driver {

std::atomic<uint32_t> internal::g_faulted_devices{0};

namespace {

// Sticky results newer than the oldest cuda.h the library builds against.
constexpr CUresult kErrorContained = static_cast<CUresult>(226);
constexpr CUresult kErrorTensorMemoryLeak = static_cast<CUresult>(721);
constexpr CUresult kErrorExternalDevice = static_cast<CUresult>(911);

struct DeviceEntry {
  CUdevice device = 0;
  int ordinal = -1;
  CUcontext primary = nullptr;    // the primary context, while live > 0
  int live = 0;                   // vyre contexts holding a retain
  CUresult fault = CUDA_SUCCESS;  // the first sticky error seen, until the reset
};

// The lock is a leaf: nothing here calls back into the engine or the log
// callback while holding it (messages are logged after it is released).
struct Table {
  std::mutex mu;
  std::vector<DeviceEntry> devices;  // one per device ever used: a handful
};

Table& Devices() {
  static Table* table = new Table;  // never destroyed: contexts may die late
  return *table;
}

DeviceEntry* FindByContext(Table& t, CUcontext context) {
  if (context == nullptr) return nullptr;
  for (DeviceEntry& e : t.devices) {
    if (e.live > 0 && e.primary == context) return &e;
  }
  return nullptr;
}

DeviceEntry* FindByDevice(Table& t, CUdevice device) {
  for (DeviceEntry& e : t.devices) {
    if (e.device == device) return &e;
  }
  return nullptr;
}

DeviceEntry& EntryFor(Table& t, CUdevice device, int ordinal) {
  DeviceEntry* e = FindByDevice(t, device);
  if (e == nullptr) {
    t.devices.push_back(DeviceEntry{});
    e = &t.devices.back();
    e->device = device;
  }
  e->ordinal = ordinal;
  return *e;
}

// Marks the entry faulted; true when the fault is new.
bool MarkFaulted(DeviceEntry& e, CUresult cause) {
  if (e.fault != CUDA_SUCCESS) return false;
  e.fault = cause;
  internal::g_faulted_devices.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ClearFault(DeviceEntry& e) {
  if (e.fault == CUDA_SUCCESS) return;
  e.fault = CUDA_SUCCESS;
  internal::g_faulted_devices.fetch_sub(1, std::memory_order_relaxed);
}

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
std::string Described(CUresult result) {
  return absl::StrCat(CuResultName(result), ": ", CuResultDescription(result));
}

std::string DeviceName(int ordinal) {
  return ordinal >= 0 ? absl::StrCat("device ", ordinal) : std::string("this device");
}

struct LogLine {
  vyre_log_level level;
  std::string text;
};

void Emit(const std::vector<LogLine>& lines) {
  for (const LogLine& line : lines) {
    if (LogEnabled(line.level)) LogMessage(line.level, line.text);
  }
}

LogLine FaultRecordedLine(int ordinal, CUresult cause) {
  return {VYRE_LOG_WARNING,
          absl::StrFormat("%s faulted (%s): CUDA accepts no more work on its primary context; "
                          "every vyre context of the device now answers "
                          "VYRE_STATUS_DEVICE_FAULT until all of them are destroyed",
                          DeviceName(ordinal), Described(cause))};
}

absl::Status ContextsStillAlive(const char* what, const DeviceEntry& e) {
  return MakeError(
      VYRE_STATUS_DEVICE_FAULT,
      absl::StrFormat(
          "%s: %s faulted earlier (%s) and %d vyre context(s) on it are still alive; CUDA "
          "accepts no work on the device until they are all gone. Fix: destroy the %d "
          "remaining vyre context(s) on %s (vyre_context_destroy), then create the context "
          "again; the library then resets the device.",
          what, DeviceName(e.ordinal), Described(e.fault), e.live, e.live,
          DeviceName(e.ordinal)),
      static_cast<int32_t>(e.fault));
}

absl::Status ResetFailed(const char* what, int ordinal, CUresult cause, CUresult reset) {
  return MakeError(
      VYRE_STATUS_DEVICE_FAULT,
      absl::StrFormat(
          "%s: %s faulted earlier (%s) and resetting its primary context failed: "
          "cuDevicePrimaryCtxReset returned %s. Fix: call vyre_context_create again, which "
          "retries the reset; if it keeps failing, restart the process and check the device "
          "(nvidia-smi, Xid errors in the kernel log).",
          what, DeviceName(ordinal), Described(cause), Described(reset)),
      static_cast<int32_t>(reset));
}

}  // namespace

bool IsStickyResult(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case kErrorContained:
    case kErrorTensorMemoryLeak:
    case kErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

int RecordFaultOnCurrentContext(CUresult result) {
  if (Api().cuCtxGetCurrent == nullptr) return -1;
  CUcontext current = nullptr;
  if (Api().cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr) return -1;
  int ordinal = -1;
  bool fresh = false;
  {
    Table& t = Devices();
    std::lock_guard lock(t.mu);
    DeviceEntry* e = FindByContext(t, current);
    if (e == nullptr) return -1;
    fresh = MarkFaulted(*e, result);
    ordinal = e->ordinal;
  }
  if (fresh) Emit({FaultRecordedLine(ordinal, result)});
  return ordinal;
}

bool FindFault(CUcontext context, DeviceFault* fault) {
  Table& t = Devices();
  std::lock_guard lock(t.mu);
  DeviceEntry* e = FindByContext(t, context);
  if (e == nullptr || e->fault == CUDA_SUCCESS) return false;
  fault->cause = e->fault;
  fault->ordinal = e->ordinal;
  return true;
}

std::string DeviceFaultFix(int ordinal) {
  return absl::StrCat("destroy every vyre context on ", DeviceName(ordinal),
                      " (vyre_context_destroy) and create a new one; the library then resets "
                      "the device");
}

absl::Status FaultedContextError(const char* what, const DeviceFault& fault) {
  return MakeError(VYRE_STATUS_DEVICE_FAULT,
                   absl::StrCat(what, ": the device faulted earlier (", Described(fault.cause),
                                ") and CUDA accepts no more work on this context. Fix: ",
                                DeviceFaultFix(fault.ordinal), "."),
                   static_cast<int32_t>(fault.cause));
}

absl::StatusOr<CUcontext> RetainPrimaryContext(CUdevice device, int ordinal, const char* what) {
  std::vector<LogLine> logs;
  CUresult failed = CUDA_SUCCESS;  // a plain retain failure, reported through CuError
  absl::StatusOr<CUcontext> result = [&]() -> absl::StatusOr<CUcontext> {
    Table& t = Devices();
    std::lock_guard lock(t.mu);
    DeviceEntry& e = EntryFor(t, device, ordinal);
    if (e.fault != CUDA_SUCCESS) {
      if (e.live > 0) return ContextsStillAlive(what, e);
      // The reset when the last context went failed: try again.
      CUresult reset = Api().cuDevicePrimaryCtxReset(device);
      if (reset != CUDA_SUCCESS) return ResetFailed(what, ordinal, e.fault, reset);
      logs.push_back({VYRE_LOG_INFO,
                      absl::StrFormat("%s: reset the primary context after the fault (%s)",
                                      DeviceName(ordinal), Described(e.fault))});
      ClearFault(e);
    }
    CUcontext context = nullptr;
    CUresult r = Api().cuDevicePrimaryCtxRetain(&context, device);
    if (IsStickyResult(r)) {
      if (e.live > 0) {
        // Our contexts on the device have not run into it yet.
        if (MarkFaulted(e, r)) logs.push_back(FaultRecordedLine(ordinal, r));
        return ContextsStillAlive(what, e);
      }
      // No vyre context uses the device: a fault another CUDA user of the
      // process caused, or one we saw in a context since released. Its
      // primary context is unusable for everyone, so resetting loses nothing.
      logs.push_back({VYRE_LOG_WARNING,
                      absl::StrFormat("%s: cuDevicePrimaryCtxRetain returned %s and no vyre "
                                      "context uses the device: resetting its primary context "
                                      "(cuDevicePrimaryCtxReset) and retrying",
                                      DeviceName(ordinal), Described(r))});
      CUresult reset = Api().cuDevicePrimaryCtxReset(device);
      if (reset != CUDA_SUCCESS) {
        MarkFaulted(e, r);  // the next create retries the reset
        return ResetFailed(what, ordinal, r, reset);
      }
      context = nullptr;
      CUresult again = Api().cuDevicePrimaryCtxRetain(&context, device);
      if (IsStickyResult(again)) {
        return MakeError(
            VYRE_STATUS_DEVICE_FAULT,
            absl::StrFormat("%s: cuDevicePrimaryCtxRetain still returned %s after the library "
                            "reset %s's primary context: the driver keeps this fault for the "
                            "life of the process (driver 580 refuses every new context, primary "
                            "or not, after a kernel fault). Fix: restart the process (a service "
                            "that must outlive faulting kernels runs its GPU work in a child "
                            "process) and check the device (nvidia-smi, Xid errors in the "
                            "kernel log).",
                            what, Described(again), DeviceName(ordinal)),
            static_cast<int32_t>(again));
      }
      r = again;
    }
    if (r != CUDA_SUCCESS) {
      failed = r;
      return absl::UnknownError("reported below");
    }
    e.primary = context;
    ++e.live;
    return context;
  }();
  Emit(logs);
  if (failed != CUDA_SUCCESS) {
    return CuError(failed, absl::StrCat(what, ": retaining the device's primary context"),
                   "cuDevicePrimaryCtxRetain");
  }
  return result;
}

void ReleasePrimaryContext(CUdevice device) {
  std::vector<LogLine> logs;
  CUresult r = CUDA_SUCCESS;
  int ordinal = -1;
  {
    Table& t = Devices();
    std::lock_guard lock(t.mu);
    DeviceEntry* e = FindByDevice(t, device);
    if (e != nullptr) ordinal = e->ordinal;
    r = Api().cuDevicePrimaryCtxRelease(device);
    if (r != CUDA_SUCCESS) {
      // Once more: a retain left behind keeps the primary context (and all
      // it holds) alive for the life of the process.
      const CUresult again = Api().cuDevicePrimaryCtxRelease(device);
      if (again != CUDA_SUCCESS) {
        logs.push_back({VYRE_LOG_WARNING,
                        absl::StrFormat("cuDevicePrimaryCtxRelease returned %s, then %s, while "
                                        "releasing a context; its retain may leak",
                                        Described(r), Described(again))});
      } else if (!IsStickyResult(r)) {
        logs.push_back({VYRE_LOG_INFO,
                        absl::StrFormat("cuDevicePrimaryCtxRelease returned %s while releasing "
                                        "a context; released on the second try",
                                        Described(r))});
        r = CUDA_SUCCESS;
      }
    }
    if (e != nullptr && e->live > 0) {
      if (IsStickyResult(r) && MarkFaulted(*e, r)) logs.push_back(FaultRecordedLine(e->ordinal, r));
      if (--e->live == 0) {
        e->primary = nullptr;
        if (e->fault != CUDA_SUCCESS) {
          // The last vyre context of a faulted device is gone: reset, so the
          // next create gets a working primary context.
          CUresult reset = Api().cuDevicePrimaryCtxReset(device);
          if (reset == CUDA_SUCCESS) {
            logs.push_back({VYRE_LOG_INFO,
                            absl::StrFormat("%s: the last vyre context is destroyed; reset the "
                                            "primary context after the fault (%s)",
                                            DeviceName(e->ordinal), Described(e->fault))});
            ClearFault(*e);
          } else {
            logs.push_back(
                {VYRE_LOG_WARNING,
                 absl::StrFormat("%s: resetting the primary context after the fault (%s) "
                                 "failed: cuDevicePrimaryCtxReset returned %s; the next "
                                 "vyre_context_create retries",
                                 DeviceName(e->ordinal), Described(e->fault), Described(reset))});
          }
        }
      }
    }
  }
  // The context destroy that runs this returns a failure that stayed, or a
  // fault (release_report.h).
  if (r != CUDA_SUCCESS) ReleaseReport::NoteFailure("cuDevicePrimaryCtxRelease", r, ordinal);
  Emit(logs);
}

DeviceState QueryDevice(CUdevice device) {
  Table& t = Devices();
  std::lock_guard lock(t.mu);
  DeviceState state;
  if (const DeviceEntry* e = FindByDevice(t, device)) {
    state.fault = e->fault;
    state.live = e->live;
    state.ordinal = e->ordinal;
  }
  return state;
}

}  // namespace vyre::driver
