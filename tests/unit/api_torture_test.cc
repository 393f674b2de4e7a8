// Seeded randomized "torture" test of the public API against the fake driver.
//
// Runs thousands of random operations over a small population of live and
// dead objects (contexts, buffers, programs, pending dispatches) with valid,
// stale, forged, wrong-type and 0 handles, malformed descriptors, out-of-range
// and overflowing offsets, bad enum values, odd launch shapes and pending
// handles used in any order. Every call is checked against the rules that
// hold for every function (status in range, vyre_last_error agrees, "Fix:" in
// every failure message), well-formed calls must succeed, and the test
// kernels' results (vyre_test_add_u32, vyre_test_inc_u32) are compared with a
// CPU model that also shadows the contents of every resident buffer. At the
// end every object is destroyed and the fake driver's live counts and misuse
// counter must be back where they started.
//
// Every pointer passed points at real memory of at least the length claimed.
//
// Environment:
//   VYRE_TORTURE_SEED=<n>  reproduce a run (the seed is printed at start)
//   VYRE_TORTURE_OPS=<n>   operations to run (default 20000)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr uint8_t kPoisonByte = 0xA5;
constexpr size_t kMaxContexts = 3;
constexpr size_t kMaxBuffers = 16;
constexpr size_t kMaxPrograms = 10;
constexpr size_t kMaxPendings = 12;
constexpr size_t kMaxDead = 64;
constexpr uint64_t kMaxBufferBytes = 64 * 1024;

// ---------------------------------------------------------------------------
// Randomness
// ---------------------------------------------------------------------------

struct Rng {
  explicit Rng(uint64_t seed) : engine(seed) {}
  uint64_t Bits() { return engine(); }
  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine); }
  // Uniform in [lo, hi].
  uint64_t Range(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(engine);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(engine); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) { return v[Below(v.size())]; }
  std::mt19937_64 engine;
};

// ---------------------------------------------------------------------------
// Population
// ---------------------------------------------------------------------------

// A resident buffer with a shadow of its contents: known[i] says whether the
// test knows byte i (fresh allocations are uninitialised).
struct BufferState {
  vyre_buffer handle{0};
  uint64_t context = 0;
  uint64_t bytes = 0;
  std::vector<uint8_t> shadow;
  std::vector<uint8_t> known;
};

enum class KernelKind { kAdd, kInc, kOther };

struct ProgramState {
  vyre_program handle{0};
  uint64_t context = 0;
  KernelKind kind = KernelKind::kOther;
  std::vector<vyre_binding_decl> decls;
  uint32_t workgroup[3] = {1, 1, 1};
};

// Host memory a pending dispatch borrows, and what its host outputs must hold
// after a successful wait (expected_known marks the bytes the model knows).
struct HostBinding {
  std::unique_ptr<std::vector<uint8_t>> memory;
  std::vector<uint8_t> before;         // contents at submission (no read-back)
  std::vector<uint8_t> expected;       // contents after read-back
  std::vector<uint8_t> expected_known;
  bool written = false;                // an output role: read back on wait
};

struct PendingState {
  vyre_pending handle{0};
  uint64_t context = 0;
  bool waited = false;
  bool check_results = false;
  std::vector<HostBinding> host;
};

struct Population {
  std::vector<uint64_t> contexts;
  std::vector<BufferState> buffers;
  std::vector<ProgramState> programs;
  std::vector<PendingState> pendings;
  // Handles of destroyed objects, to be used again (they must be stale).
  std::vector<uint64_t> dead_contexts, dead_buffers, dead_programs, dead_pendings;

  std::vector<uint64_t> LiveBits() const {
    std::vector<uint64_t> bits = contexts;
    for (const auto& b : buffers) bits.push_back(b.handle.bits);
    for (const auto& p : programs) bits.push_back(p.handle.bits);
    for (const auto& p : pendings) bits.push_back(p.handle.bits);
    return bits;
  }
};

void RememberDead(std::vector<uint64_t>* dead, uint64_t bits, Rng* rng) {
  if (dead->size() < kMaxDead) {
    dead->push_back(bits);
  } else {
    (*dead)[rng->Below(dead->size())] = bits;
  }
}

// How a handle argument was chosen; only kValid may succeed.
enum class HandleChoice { kValid, kStale, kForged, kWrongType, kZero };

const char* ChoiceName(HandleChoice c) {
  switch (c) {
    case HandleChoice::kValid: return "valid";
    case HandleChoice::kStale: return "stale";
    case HandleChoice::kForged: return "forged";
    case HandleChoice::kWrongType: return "wrong-type";
    case HandleChoice::kZero: return "zero";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

enum class Op {
  kContextCreate,
  kContextDestroy,
  kContextQuery,
  kBufferAlloc,
  kBufferFree,
  kBufferInfo,
  kUpload,
  kDownload,
  kUploadRanges,
  kDownloadRanges,
  kProgramCreate,
  kProgramDestroy,
  kDispatch,
  kDispatchAsync,
  kPendingPoll,
  kPendingWait,
  kPendingTiming,
  kPendingRelease,
  kLastErrorProbe,
  kCount
};

const char* OpName(Op op) {
  static const char* const kNames[] = {
      "context_create", "context_destroy", "context_query", "buffer_alloc", "buffer_free",
      "buffer_info",    "upload",          "download",      "upload_ranges", "download_ranges",
      "program_create", "program_destroy", "dispatch",      "dispatch_async", "pending_poll",
      "pending_wait",   "pending_timing",  "pending_release", "last_error_probe"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Op::kCount), "names");
  return kNames[size_t(op)];
}

// Relative frequencies of the operations.
constexpr std::array<int, size_t(Op::kCount)> kWeights = {
    2,   // context_create
    1,   // context_destroy
    3,   // context_query
    8,   // buffer_alloc
    5,   // buffer_free
    3,   // buffer_info
    10,  // upload
    10,  // download
    5,   // upload_ranges
    5,   // download_ranges
    5,   // program_create
    2,   // program_destroy
    12,  // dispatch
    10,  // dispatch_async
    5,   // pending_poll
    8,   // pending_wait
    4,   // pending_timing
    6,   // pending_release
    2,   // last_error_probe
};

class Torture {
 public:
  explicit Torture(uint64_t seed) : rng_(seed), seed_(seed) {}

  void Run(int operations);
  void DestroyEverything();
  bool failed() const { return failures_ > 0; }
  void PrintSummary() const;

 private:
  // --- one function per operation ---
  void ContextCreate();
  void ContextDestroy();
  void ContextQuery();
  void BufferAlloc();
  void BufferFree();
  void BufferInfo();
  void Upload();
  void Download();
  void UploadRanges();
  void DownloadRanges();
  void ProgramCreate();
  void ProgramDestroy();
  void DispatchOp(bool async);
  void PendingPoll();
  void PendingWait();
  void PendingTiming();
  void PendingRelease();
  void LastErrorProbe();

  // --- helpers ---
  // Checks the rules every call obeys; returns the status.
  vyre_status Check(vyre_status status, const char* call);
  void Fail(const std::string& what);
  void ExpectStatus(vyre_status actual, vyre_status expected, const char* call);
  void ExpectNotOk(vyre_status actual, HandleChoice choice, const char* call);
  // Checks a ranged upload/download's status against what its arguments
  // call for; true when it succeeded and its data should be checked.
  bool RangesCallAsExpected(vyre_status actual, HandleChoice choice, bool null_pointer,
                            bool all_in_range, const char* call);

  // Picks a handle of a kind: `live` are the valid ones, `dead` stale ones.
  uint64_t PickHandle(const std::vector<uint64_t>& live, const std::vector<uint64_t>& dead,
                      HandleChoice* choice, double valid_bias = 0.8);
  int PickIndex(size_t size) { return size == 0 ? -1 : int(rng_.Below(size)); }
  template <typename Object>
  uint64_t PickFrom(const std::vector<Object>& objects, const std::vector<uint64_t>& dead,
                    double valid_bias, int* index, HandleChoice* choice);
  uint64_t PickBufferHandle(int* index, HandleChoice* choice);
  uint64_t PickProgramHandle(int* index, HandleChoice* choice);
  uint64_t PickPendingHandle(int* index, HandleChoice* choice);
  uint64_t PickContextHandle(HandleChoice* choice);

  uint64_t RandomOffset(uint64_t size);
  uint64_t RandomLength(uint64_t size, uint64_t offset);
  std::vector<uint8_t> RandomBytes(size_t n);

  void ForgetContext(uint64_t context);
  void ForgetBuffer(size_t index);
  void ForgetPending(size_t index);
  void CheckHostOutputs(const PendingState& pending, bool read_back, const char* call);

  Rng rng_;
  uint64_t seed_;
  int op_index_ = 0;
  Op current_op_ = Op::kContextCreate;
  int failures_ = 0;
  Population pop_;
  std::map<std::string, std::map<std::string, int>> histogram_;
  uint64_t checked_elements_ = 0;
  uint64_t checked_dispatches_ = 0;
};

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

void Torture::Fail(const std::string& what) {
  ++failures_;
  if (failures_ <= 20) {
    ADD_FAILURE() << "op #" << op_index_ << " (" << OpName(current_op_) << "), seed " << seed_
                  << ": " << what;
  }
}

vyre_status Torture::Check(vyre_status status, const char* call) {
  histogram_[call][vyre_status_name(status)]++;
  int32_t raw = static_cast<int32_t>(status);
  if (raw < VYRE_STATUS_OK || raw > VYRE_STATUS_INTERNAL) {
    Fail(std::string(call) + " returned status " + std::to_string(raw) + ", outside the enum");
  }
  if (status == VYRE_STATUS_INTERNAL) Fail(std::string(call) + " returned INTERNAL");
  LastError error = ReadLastError();
  if (status == VYRE_STATUS_OK) {
    if (error.status != VYRE_STATUS_OK || !error.message.empty()) {
      Fail(std::string(call) + " returned OK but vyre_last_error says " +
           StatusName(error.status) + " \"" + error.message + "\"");
    }
  } else {
    if (error.status != status) {
      Fail(std::string(call) + " returned " + StatusName(status) + " but vyre_last_error says " +
           StatusName(error.status) + " \"" + error.message + "\"");
    }
    if (error.message.empty() || error.message.find("Fix:") == std::string::npos) {
      Fail(std::string(call) + " " + StatusName(status) + " message lacks \"Fix:\": \"" +
           error.message + "\"");
    }
  }
  return status;
}

void Torture::ExpectStatus(vyre_status actual, vyre_status expected, const char* call) {
  if (actual != expected) {
    Fail(std::string(call) + " returned " + StatusName(actual) + ", expected " +
         StatusName(expected) + ": \"" + LastErrorMessage() + "\"");
  }
}

void Torture::ExpectNotOk(vyre_status actual, HandleChoice choice, const char* call) {
  if (choice != HandleChoice::kValid && actual == VYRE_STATUS_OK) {
    Fail(std::string(call) + " accepted a " + ChoiceName(choice) + " handle");
  }
}

bool Torture::RangesCallAsExpected(vyre_status actual, HandleChoice choice, bool null_pointer,
                                   bool all_in_range, const char* call) {
  ExpectNotOk(actual, choice, call);
  if (choice != HandleChoice::kValid) return false;
  if (null_pointer) {
    if (actual == VYRE_STATUS_OK) Fail(std::string(call) + " accepted a NULL pointer");
    return false;
  }
  if (!all_in_range) {
    ExpectStatus(actual, VYRE_STATUS_OUT_OF_RANGE, call);
    return false;
  }
  ExpectStatus(actual, VYRE_STATUS_OK, call);
  return actual == VYRE_STATUS_OK;
}

// ---------------------------------------------------------------------------
// Choosing arguments
// ---------------------------------------------------------------------------

uint64_t Torture::PickHandle(const std::vector<uint64_t>& live, const std::vector<uint64_t>& dead,
                             HandleChoice* choice, double valid_bias) {
  if (!live.empty() && rng_.Chance(valid_bias)) {
    *choice = HandleChoice::kValid;
    return rng_.Pick(live);
  }
  switch (rng_.Below(4)) {
    case 0:
      if (!dead.empty()) {
        *choice = HandleChoice::kStale;
        return rng_.Pick(dead);
      }
      break;
    case 1: {
      std::vector<uint64_t> others = pop_.LiveBits();
      others.erase(std::remove_if(others.begin(), others.end(),
                                  [&](uint64_t b) {
                                    return std::find(live.begin(), live.end(), b) != live.end();
                                  }),
                   others.end());
      if (!others.empty()) {
        *choice = HandleChoice::kWrongType;
        return rng_.Pick(others);
      }
      break;
    }
    case 2: {
      // Forged: random bits, or a live handle with a few bits flipped.
      uint64_t bits = rng_.Bits();
      if (!live.empty() && rng_.Chance(0.5)) bits = rng_.Pick(live) ^ (uint64_t{1} << rng_.Below(64));
      std::vector<uint64_t> all = pop_.LiveBits();
      if (bits != 0 && std::find(all.begin(), all.end(), bits) == all.end() &&
          std::find(dead.begin(), dead.end(), bits) == dead.end()) {
        *choice = HandleChoice::kForged;
        return bits;
      }
      break;
    }
    default:
      break;
  }
  *choice = HandleChoice::kZero;
  return 0;
}

uint64_t Torture::PickContextHandle(HandleChoice* choice) {
  return PickHandle(pop_.contexts, pop_.dead_contexts, choice, 0.9);
}

// Picks a handle from a population of objects with a `.handle`; *index is
// the picked object's position when the choice is a valid handle, else -1.
template <typename Object>
uint64_t Torture::PickFrom(const std::vector<Object>& objects, const std::vector<uint64_t>& dead,
                           double valid_bias, int* index, HandleChoice* choice) {
  std::vector<uint64_t> live;
  for (const Object& object : objects) live.push_back(object.handle.bits);
  uint64_t bits = PickHandle(live, dead, choice, valid_bias);
  *index = -1;
  if (*choice == HandleChoice::kValid) {
    *index = int(std::find(live.begin(), live.end(), bits) - live.begin());
  }
  return bits;
}

uint64_t Torture::PickBufferHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.buffers, pop_.dead_buffers, 0.85, index, choice);
}

uint64_t Torture::PickProgramHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.programs, pop_.dead_programs, 0.9, index, choice);
}

uint64_t Torture::PickPendingHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.pendings, pop_.dead_pendings, 0.85, index, choice);
}

// Mostly inside [0, size], sometimes just past it, sometimes near UINT64_MAX.
uint64_t Torture::RandomOffset(uint64_t size) {
  switch (rng_.Below(10)) {
    case 0: return size;
    case 1: return size + rng_.Range(1, 64);
    case 2: return UINT64_MAX - rng_.Below(64);
    case 3: return 0;
    default: return rng_.Range(0, size);
  }
}

// A length to copy at `offset`: mostly fitting, sometimes past the end (the
// host side is always allocated to the full length, at most 2x kMaxBufferBytes).
uint64_t Torture::RandomLength(uint64_t size, uint64_t offset) {
  uint64_t room = offset <= size ? size - offset : 0;
  switch (rng_.Below(10)) {
    case 0: return 0;
    case 1: return room + rng_.Range(1, 16);
    case 2: return rng_.Range(1, kMaxBufferBytes);
    default: return room == 0 ? 0 : rng_.Range(1, room);
  }
}

std::vector<uint8_t> Torture::RandomBytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t bits = rng_.Bits();
    std::memcpy(v.data() + i, &bits, std::min<size_t>(8, n - i));
  }
  return v;
}

bool InRange(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// ---------------------------------------------------------------------------
// Bookkeeping when objects die
// ---------------------------------------------------------------------------

void Torture::ForgetBuffer(size_t index) {
  RememberDead(&pop_.dead_buffers, pop_.buffers[index].handle.bits, &rng_);
  pop_.buffers.erase(pop_.buffers.begin() + index);
}

void Torture::ForgetPending(size_t index) {
  RememberDead(&pop_.dead_pendings, pop_.pendings[index].handle.bits, &rng_);
  pop_.pendings.erase(pop_.pendings.begin() + index);
}

// Everything a destroyed context owned becomes stale.
void Torture::ForgetContext(uint64_t context) {
  pop_.contexts.erase(std::find(pop_.contexts.begin(), pop_.contexts.end(), context));
  RememberDead(&pop_.dead_contexts, context, &rng_);
  for (size_t i = pop_.buffers.size(); i-- > 0;) {
    if (pop_.buffers[i].context == context) ForgetBuffer(i);
  }
  for (size_t i = pop_.programs.size(); i-- > 0;) {
    if (pop_.programs[i].context == context) {
      RememberDead(&pop_.dead_programs, pop_.programs[i].handle.bits, &rng_);
      pop_.programs.erase(pop_.programs.begin() + i);
    }
  }
  for (size_t i = pop_.pendings.size(); i-- > 0;) {
    if (pop_.pendings[i].context == context) {
      // Destroying the context released it without a read-back.
      if (!pop_.pendings[i].waited) {
        CheckHostOutputs(pop_.pendings[i], false, "vyre_context_destroy");
      }
      ForgetPending(i);
    }
  }
}

// ---------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------

// A descriptor followed by a tail, so struct_size may claim more than the
// library knows and still point at real memory.
template <typename T>
struct WithTail {
  T value;
  uint8_t tail[32];
};

template <typename T>
void RandomizeStructSize(Rng* rng, WithTail<T>* d, bool* well_formed) {
  std::memset(d->tail, 0, sizeof(d->tail));
  uint32_t size = sizeof(T);
  switch (rng->Below(20)) {
    case 0: size = 0; break;
    case 1: size = uint32_t(rng->Range(1, sizeof(T) - 1)); break;
    case 2: size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail))); break;  // zero tail: OK
    case 3:
      size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail)));
      d->tail[rng->Below(size - sizeof(T))] = 1;
      break;
    default: break;
  }
  if (size != sizeof(T) && !(size > sizeof(T) && std::all_of(d->tail, d->tail + sizeof(d->tail),
                                                             [](uint8_t b) { return b == 0; }))) {
    *well_formed = false;
  }
  std::memcpy(&d->value, &size, sizeof(size));  // struct_size is the first member
}

void Torture::ContextCreate() {
  WithTail<vyre_context_desc> desc{VYRE_CONTEXT_DESC_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &desc, &well_formed);
  if (rng_.Chance(0.1)) {
    desc.value.device_ordinal = uint32_t(rng_.Range(1, 5));
    well_formed = false;
  }
  if (rng_.Chance(0.2)) desc.value.transient_pool_limit_bytes = rng_.Below(1 << 20);
  if (rng_.Chance(0.2)) desc.value.pinned_pool_limit_bytes = rng_.Below(1 << 20);
  bool null_desc = rng_.Chance(0.05);
  bool null_out = rng_.Chance(0.05);
  if (null_desc || null_out) well_formed = false;
  if (well_formed && pop_.contexts.size() >= kMaxContexts) return;  // keep 1-3 alive
  vyre_context out{0};
  vyre_status s = Check(vyre_context_create(null_desc ? nullptr : &desc.value,
                                            null_out ? nullptr : &out),
                        "vyre_context_create");
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_create");
  if (s == VYRE_STATUS_OK) {
    if (!well_formed) Fail("vyre_context_create accepted a malformed call");
    if (null_out) return;
    pop_.contexts.push_back(out.bits);
  }
}

void Torture::ContextDestroy() {
  HandleChoice choice;
  uint64_t bits = PickContextHandle(&choice);
  if (choice == HandleChoice::kValid && pop_.contexts.size() <= 1) return;  // keep one
  vyre_status s = Check(vyre_context_destroy(vyre_context{bits}), "vyre_context_destroy");
  ExpectNotOk(s, choice, "vyre_context_destroy");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_destroy");
    ForgetContext(bits);
  }
}

void Torture::ContextQuery() {
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  vyre_status s = VYRE_STATUS_OK;
  bool well_formed = choice == HandleChoice::kValid;
  const char* call = "";
  switch (rng_.Below(4)) {
    case 0: {
      WithTail<vyre_telemetry> t{VYRE_TELEMETRY_INIT, {}};
      RandomizeStructSize(&rng_, &t, &well_formed);
      call = "vyre_context_telemetry";
      s = Check(vyre_context_telemetry(context, &t.value), call);
      if (s == VYRE_STATUS_OK && well_formed && t.value.struct_size == sizeof(vyre_telemetry)) {
        // A freed buffer a live pending dispatch still uses stays counted
        // until that dispatch is seen to complete.
        uint64_t buffers = 0, pendings = 0;
        for (const auto& b : pop_.buffers) buffers += b.context == context.bits;
        for (const auto& p : pop_.pendings) pendings += p.context == context.bits;
        if (pendings == 0 ? t.value.live_buffers != buffers : t.value.live_buffers < buffers) {
          Fail("telemetry live_buffers " + std::to_string(t.value.live_buffers) + ", expected " +
               std::to_string(buffers));
        }
      }
      break;
    }
    case 1: {
      WithTail<vyre_device_info> info{VYRE_DEVICE_INFO_INIT, {}};
      RandomizeStructSize(&rng_, &info, &well_formed);
      call = "vyre_context_device_info";
      s = Check(vyre_context_device_info(context, &info.value), call);
      break;
    }
    case 2:
      call = "vyre_context_trim";
      s = Check(vyre_context_trim(context), call);
      break;
    default: {
      call = "vyre_context_telemetry(NULL)";
      s = Check(vyre_context_telemetry(context, nullptr), call);
      if (s == VYRE_STATUS_OK) Fail("vyre_context_telemetry accepted a NULL out");
      return;
    }
  }
  ExpectNotOk(s, choice, call);
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, call);
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

void Torture::BufferAlloc() {
  if (pop_.buffers.size() >= kMaxBuffers) {
    BufferFree();
    return;
  }
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  uint64_t bytes = rng_.Range(1, kMaxBufferBytes);
  bool huge = false;
  switch (rng_.Below(30)) {
    case 0: bytes = 0; break;
    case 1: bytes = UINT64_MAX - rng_.Below(4096); huge = true; break;
    case 2: bytes = uint64_t{1} << rng_.Range(31, 62); huge = true; break;
    case 3: bytes = rng_.Range(1, 64); break;
    default: break;
  }
  bool null_out = rng_.Chance(0.03);
  vyre_buffer out{0};
  vyre_status s = Check(vyre_buffer_alloc(context, bytes, null_out ? nullptr : &out),
                        "vyre_buffer_alloc");
  ExpectNotOk(s, choice, "vyre_buffer_alloc");
  if (choice == HandleChoice::kValid && !null_out) {
    if (bytes == 0) ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, "vyre_buffer_alloc(0)");
    if (huge && s == VYRE_STATUS_OK) Fail("allocated " + std::to_string(bytes) + " bytes");
    if (bytes != 0 && !huge) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_alloc");
  }
  if (s == VYRE_STATUS_OK) {
    if (null_out) {
      Fail("vyre_buffer_alloc accepted a NULL out");
      return;
    }
    BufferState b;
    b.handle = out;
    b.context = context.bits;
    b.bytes = bytes;
    b.shadow.assign(bytes, 0);
    b.known.assign(bytes, 0);
    pop_.buffers.push_back(std::move(b));
  }
}

void Torture::BufferFree() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  vyre_status s = Check(vyre_buffer_free(buffer), "vyre_buffer_free");
  ExpectNotOk(s, choice, "vyre_buffer_free");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_free");
    ForgetBuffer(size_t(index));
  }
}

void Torture::BufferInfo() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  WithTail<vyre_buffer_info> info{VYRE_BUFFER_INFO_INIT, {}};
  bool well_formed = choice == HandleChoice::kValid;
  RandomizeStructSize(&rng_, &info, &well_formed);
  vyre_status s = Check(vyre_buffer_info_get(buffer, &info.value), "vyre_buffer_info_get");
  ExpectNotOk(s, choice, "vyre_buffer_info_get");
  if (well_formed) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_info_get");
    const BufferState& b = pop_.buffers[size_t(index)];
    if (s == VYRE_STATUS_OK && (info.value.bytes != b.bytes || info.value.context.bits != b.context ||
                                info.value.device_pointer == 0)) {
      Fail("vyre_buffer_info_get reports " + std::to_string(info.value.bytes) + " bytes, expected " +
           std::to_string(b.bytes));
    }
  }
}

void Torture::Upload() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  uint64_t offset = RandomOffset(size);
  uint64_t bytes = RandomLength(size, offset);
  std::vector<uint8_t> data = RandomBytes(bytes);
  bool null_src = rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_upload(buffer, offset, null_src ? nullptr : data.data(), bytes),
                        "vyre_buffer_upload");
  ExpectNotOk(s, choice, "vyre_buffer_upload");
  if (choice != HandleChoice::kValid) return;
  if (null_src && bytes > 0) {
    if (s == VYRE_STATUS_OK) Fail("vyre_buffer_upload accepted a NULL src");
    return;
  }
  if (!InRange(offset, bytes, size)) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_upload");
    return;
  }
  if (!null_src) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_upload");
  if (s == VYRE_STATUS_OK && !null_src) {
    BufferState& b = pop_.buffers[size_t(index)];
    std::copy(data.begin(), data.end(), b.shadow.begin() + offset);
    std::fill(b.known.begin() + offset, b.known.begin() + offset + bytes, 1);
  }
}

// Compares downloaded bytes with the shadow where the shadow is known.
bool SameAsShadow(const BufferState& b, uint64_t offset, const uint8_t* data, uint64_t bytes,
                  std::string* why) {
  for (uint64_t i = 0; i < bytes; ++i) {
    if (b.known[offset + i] && b.shadow[offset + i] != data[i]) {
      *why = "byte " + std::to_string(offset + i) + " of a " + std::to_string(b.bytes) +
             "-byte buffer is " + std::to_string(data[i]) + ", expected " +
             std::to_string(b.shadow[offset + i]);
      return false;
    }
  }
  return true;
}

void Torture::Download() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  uint64_t offset = RandomOffset(size);
  uint64_t bytes = RandomLength(size, offset);
  std::vector<uint8_t> data(bytes, kPoisonByte);
  bool null_dst = rng_.Chance(0.03);
  vyre_status s =
      Check(vyre_buffer_download(buffer, offset, null_dst ? nullptr : data.data(), bytes),
            "vyre_buffer_download");
  ExpectNotOk(s, choice, "vyre_buffer_download");
  if (choice != HandleChoice::kValid) return;
  if (null_dst && bytes > 0) {
    if (s == VYRE_STATUS_OK) Fail("vyre_buffer_download accepted a NULL dst");
    return;
  }
  if (!InRange(offset, bytes, size)) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_download");
    return;
  }
  if (!null_dst) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_download");
  std::string why;
  if (s == VYRE_STATUS_OK && !null_dst &&
      !SameAsShadow(pop_.buffers[size_t(index)], offset, data.data(), bytes, &why)) {
    Fail("vyre_buffer_download: " + why);
  }
}

void Torture::UploadRanges() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  size_t count = size_t(rng_.Below(5));
  std::vector<std::vector<uint8_t>> data(count);
  std::vector<vyre_upload_range> ranges(count);
  bool all_in_range = true;
  bool null_src = false;
  for (size_t i = 0; i < count; ++i) {
    ranges[i].offset = RandomOffset(size);
    ranges[i].bytes = rng_.Chance(0.8) ? std::min<uint64_t>(RandomLength(size, ranges[i].offset), 8192)
                                       : RandomLength(size, ranges[i].offset);
    data[i] = RandomBytes(ranges[i].bytes);
    ranges[i].src = data[i].data();
    if (rng_.Chance(0.02)) {
      ranges[i].src = nullptr;
      null_src |= ranges[i].bytes > 0;
    }
    all_in_range &= InRange(ranges[i].offset, ranges[i].bytes, size);
  }
  bool null_ranges = count > 0 && rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_upload_ranges(buffer, null_ranges ? nullptr : ranges.data(),
                                                  count),
                        "vyre_buffer_upload_ranges");
  if (!RangesCallAsExpected(s, choice, null_ranges || null_src, all_in_range,
                            "vyre_buffer_upload_ranges")) {
    return;
  }
  BufferState& b = pop_.buffers[size_t(index)];
  for (size_t i = 0; i < count; ++i) {
    std::copy(data[i].begin(), data[i].end(), b.shadow.begin() + ranges[i].offset);
    std::fill(b.known.begin() + ranges[i].offset,
              b.known.begin() + ranges[i].offset + ranges[i].bytes, 1);
  }
  // Overlapping ranges: which one lands last is not promised.
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = i + 1; j < count; ++j) {
      uint64_t lo = std::max(ranges[i].offset, ranges[j].offset);
      uint64_t hi = std::min(ranges[i].offset + ranges[i].bytes, ranges[j].offset + ranges[j].bytes);
      if (lo < hi) std::fill(b.known.begin() + lo, b.known.begin() + hi, 0);
    }
  }
}

void Torture::DownloadRanges() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  size_t count = size_t(rng_.Below(5));
  std::vector<std::vector<uint8_t>> data(count);
  std::vector<vyre_download_range> ranges(count);
  bool all_in_range = true;
  bool null_dst = false;
  for (size_t i = 0; i < count; ++i) {
    ranges[i].offset = RandomOffset(size);
    ranges[i].bytes = rng_.Chance(0.8) ? std::min<uint64_t>(RandomLength(size, ranges[i].offset), 8192)
                                       : RandomLength(size, ranges[i].offset);
    data[i].assign(ranges[i].bytes, kPoisonByte);
    ranges[i].dst = data[i].data();
    if (rng_.Chance(0.02)) {
      ranges[i].dst = nullptr;
      null_dst |= ranges[i].bytes > 0;
    }
    all_in_range &= InRange(ranges[i].offset, ranges[i].bytes, size);
  }
  bool null_ranges = count > 0 && rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_download_ranges(buffer, null_ranges ? nullptr : ranges.data(),
                                                    count),
                        "vyre_buffer_download_ranges");
  if (!RangesCallAsExpected(s, choice, null_ranges || null_dst, all_in_range,
                            "vyre_buffer_download_ranges")) {
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    std::string why;
    if (!SameAsShadow(pop_.buffers[size_t(index)], ranges[i].offset, data[i].data(),
                      ranges[i].bytes, &why)) {
      Fail("vyre_buffer_download_ranges range " + std::to_string(i) + ": " + why);
      return;
    }
  }
}

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------

// An enum field set to any 32-bit pattern (0, 7, 0xFFFFFFFF, ...) by memcpy.
template <typename E>
void SetRawEnum(E* field, uint32_t raw) {
  static_assert(sizeof(E) == sizeof(uint32_t), "enums are 32-bit");
  std::memcpy(field, &raw, sizeof(raw));
}

// Reads a role without loading an out-of-range enum value (UBSan -fsanitize=enum).
uint32_t RoleOf(const vyre_binding_decl& d) {
  uint32_t raw;
  std::memcpy(&raw, &d.role, sizeof(raw));
  return raw;
}

uint32_t RandomBadEnum(Rng* rng) {
  static const std::vector<uint32_t> kBad = {0, 5, 7, 99, 0x7FFFFFFF, 0x80000000u, 0xFFFFFFFFu};
  return rng->Pick(kBad);
}

void Torture::ProgramCreate() {
  if (pop_.programs.size() >= kMaxPrograms) {
    ProgramDestroy();
    return;
  }
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  ProgramSpec spec;
  KernelKind kind = KernelKind::kOther;
  bool well_formed = true;
  switch (rng_.Below(6)) {
    case 0:
    case 1:
      spec = AddSpec();
      kind = KernelKind::kAdd;
      if (rng_.Chance(0.3)) {  // read back only part of `out`
        spec.bindings[2].output_offset = 4 * rng_.Below(64);
        spec.bindings[2].output_length = 4 * rng_.Below(64);
      }
      break;
    case 2:
      spec = IncSpec();
      kind = KernelKind::kInc;
      break;
    default: {
      // Random declarations on a kernel that touches nothing (the fake runs
      // vyre_test_noop_out_u32 as a no-op), so any binding set is harmless.
      spec = NoopOutSpec();
      spec.bindings.clear();
      size_t count = size_t(rng_.Below(5));
      for (size_t i = 0; i < count; ++i) {
        vyre_binding_decl d = VYRE_BINDING_DECL_INIT;
        if (rng_.Chance(0.85)) {
          SetRawEnum(&d.role, uint32_t(rng_.Range(1, 4)));
        } else {
          SetRawEnum(&d.role, RandomBadEnum(&rng_));
          well_formed = false;
        }
        static const std::vector<uint32_t> kSizes = {0, 1, 4, 4, 8};
        d.element_size = rng_.Pick(kSizes);
        if (d.element_size == 0) well_formed = false;
        d.name = rng_.Chance(0.5) ? "torture" : nullptr;
        if (rng_.Chance(0.3)) d.element_count = rng_.Below(300);
        if (rng_.Chance(0.2)) d.output_offset = rng_.Below(512);
        if (rng_.Chance(0.2)) d.output_length = rng_.Below(512);
        if (RoleOf(d) == VYRE_ROLE_SHARED && d.element_count * d.element_size > 48 * 1024) {
          well_formed = false;
        }
        spec.bindings.push_back(d);
      }
      if (rng_.Chance(0.2)) {
        // An explicit parameter list, sometimes with bad kinds or indices.
        size_t params = size_t(rng_.Below(4));
        for (size_t i = 0; i < params; ++i) {
          vyre_kernel_param p{};
          SetRawEnum(&p.kind, rng_.Chance(0.8) ? uint32_t(rng_.Range(1, 5)) : RandomBadEnum(&rng_));
          p.index = uint32_t(rng_.Chance(0.8) ? rng_.Below(4) : rng_.Bits());
          spec.params.push_back(p);
        }
        well_formed = false;  // indices may be out of range
      }
      break;
    }
  }
  // Workgroup, shared memory, entry and code variations.
  if (rng_.Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kShapes = {
        {0, 1, 1}, {1, 1, 1}, {32, 0, 0}, {1024, 1, 1}, {1025, 1, 1}, {512, 2, 1},
        {1024, 2, 1}, {1, 1, 65}, {64, 4, 4}, {UINT32_MAX, 1, 1}, {7, 3, 0}};
    const auto& shape = rng_.Pick(kShapes);
    std::copy(shape.begin(), shape.end(), spec.workgroup);
    uint64_t threads = uint64_t{shape[0]} * (shape[1] ? shape[1] : 1) * (shape[2] ? shape[2] : 1);
    if (shape[0] == 0 || shape[0] > 1024 || shape[1] > 1024 || shape[2] > 64 || threads > 1024) {
      well_formed = false;
    }
  }
  if (rng_.Chance(0.05)) {
    spec.shared_memory_bytes = uint32_t(rng_.Chance(0.5) ? rng_.Below(1024) : rng_.Range(49153, 1 << 20));
    if (spec.shared_memory_bytes > 48 * 1024) well_formed = false;
  }
  std::string entry = spec.entry;
  const char* entry_ptr = entry.c_str();
  switch (rng_.Below(25)) {
    case 0: entry_ptr = nullptr; well_formed = false; break;
    case 1: entry = "vyre_no_such_kernel"; entry_ptr = entry.c_str(); well_formed = false; break;
    case 2: entry = ""; entry_ptr = entry.c_str(); well_formed = false; break;
    default: break;
  }
  vyre_program_desc desc = spec.Desc();
  desc.entry = entry_ptr;
  std::string garbage = "this is not PTX";
  switch (rng_.Below(25)) {
    case 0: desc.code = nullptr; well_formed = false; break;
    case 1: desc.code = garbage.data(); desc.code_size = garbage.size(); well_formed = false; break;
    case 2: SetRawEnum(&desc.code_kind, RandomBadEnum(&rng_)); well_formed = false; break;
    case 3:
      SetRawEnum(&desc.code_kind, VYRE_CODE_BINARY);
      desc.code = garbage.data();
      desc.code_size = garbage.size();
      well_formed = false;
      break;
    default: break;
  }
  // Bindings: NULL with a count, or strided by an unusual struct_size
  // (backed by enough zeroed memory for the stride).
  std::vector<uint8_t> strided;
  if (!spec.bindings.empty()) {
    switch (rng_.Below(20)) {
      case 0: desc.bindings = nullptr; well_formed = false; break;
      case 1:
      case 2: {
        uint32_t stride = sizeof(vyre_binding_decl) + 8 * uint32_t(rng_.Range(1, 4));
        bool dirty = rng_.Chance(0.3);
        strided.assign(stride * spec.bindings.size(), 0);
        for (size_t i = 0; i < spec.bindings.size(); ++i) {
          vyre_binding_decl d = spec.bindings[i];
          d.struct_size = stride;
          std::memcpy(strided.data() + i * stride, &d, sizeof(d));
          if (dirty) strided[i * stride + sizeof(d)] = 1;
        }
        if (dirty) well_formed = false;
        desc.bindings = reinterpret_cast<const vyre_binding_decl*>(strided.data());
        break;
      }
      case 3: spec.bindings[0].struct_size = 8; desc = spec.Desc(); desc.entry = entry_ptr;
              well_formed = false; break;
      default: break;
    }
  }
  WithTail<vyre_program_desc> outer{desc, {}};
  RandomizeStructSize(&rng_, &outer, &well_formed);
  bool null_out = rng_.Chance(0.03);
  bool null_desc = rng_.Chance(0.03);
  if (null_out || null_desc || choice != HandleChoice::kValid) well_formed = false;
  vyre_program out{0};
  vyre_status s = Check(vyre_program_create(context, null_desc ? nullptr : &outer.value,
                                            null_out ? nullptr : &out),
                        "vyre_program_create");
  ExpectNotOk(s, choice, "vyre_program_create");
  if (well_formed && kind != KernelKind::kOther) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_program_create");
  }
  if (s != VYRE_STATUS_OK) return;
  if (null_out || null_desc) {
    Fail("vyre_program_create accepted a NULL pointer");
    return;
  }
  ProgramState p;
  p.handle = out;
  p.context = context.bits;
  p.kind = kind;
  p.decls = spec.bindings;
  p.workgroup[0] = spec.workgroup[0];
  p.workgroup[1] = spec.workgroup[1] ? spec.workgroup[1] : 1;
  p.workgroup[2] = spec.workgroup[2] ? spec.workgroup[2] : 1;
  pop_.programs.push_back(std::move(p));
}

void Torture::ProgramDestroy() {
  int index;
  HandleChoice choice;
  vyre_program program{PickProgramHandle(&index, &choice)};
  vyre_status s = Check(vyre_program_destroy(program), "vyre_program_destroy");
  ExpectNotOk(s, choice, "vyre_program_destroy");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_program_destroy");
    RememberDead(&pop_.dead_programs, program.bits, &rng_);
    pop_.programs.erase(pop_.programs.begin() + index);
  }
}

// ---------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------

// One dispatch binding as the model sees it.
struct BoundModel {
  bool host = true;
  int buffer_index = -1;      // resident: index into pop_.buffers
  uint64_t offset = 0;        // resident: byte offset in the buffer
  uint64_t bytes = 0;         // bound length
  bool valid = true;          // the binding is well-formed for its declaration
  HostBinding* host_binding = nullptr;
};

void Torture::DispatchOp(bool async) {
  const char* call = async ? "vyre_dispatch_async" : "vyre_dispatch";
  if (async && pop_.pendings.size() >= kMaxPendings) {
    PendingRelease();
    return;
  }
  int program_index;
  HandleChoice choice;
  vyre_program program{PickProgramHandle(&program_index, &choice)};
  const ProgramState* prog = program_index >= 0 ? &pop_.programs[size_t(program_index)] : nullptr;
  bool well_formed = prog != nullptr;
  bool known_kernel = prog != nullptr && prog->kind != KernelKind::kOther;

  // Bindings: one per declaration (sometimes a wrong count).
  std::vector<vyre_binding_decl> decls;
  if (prog != nullptr) {
    decls = prog->decls;
  } else {
    for (size_t i = rng_.Below(4); i > 0; --i) decls.push_back(VYRE_BINDING_DECL_INIT);
  }
  // A common element count keeps the known kernels' bindings consistent.
  uint64_t elements = rng_.Chance(0.1) ? rng_.Range(1, 16384) : rng_.Range(1, 600);
  PendingState pending;
  pending.host.reserve(decls.size());
  std::vector<BoundModel> model(decls.size());
  std::vector<vyre_dispatch_binding> bindings(decls.size());
  for (size_t i = 0; i < decls.size(); ++i) {
    const vyre_binding_decl& d = decls[i];
    uint32_t esize = d.element_size ? d.element_size : 1;
    uint64_t bytes = d.element_count ? d.element_count * esize : elements * esize;
    if (!known_kernel && rng_.Chance(0.5)) bytes = rng_.Range(1, 2048);
    if (rng_.Chance(0.05)) {
      bytes = bytes + rng_.Range(1, 3);  // not a multiple of the element size
      if (esize > 1) well_formed = false;
    }
    vyre_dispatch_binding& b = bindings[i];
    b = VYRE_DISPATCH_BINDING_INIT;
    BoundModel& m = model[i];
    // Resident when a buffer of this program's context can hold the binding.
    std::vector<int> fits;
    for (size_t k = 0; k < pop_.buffers.size(); ++k) {
      if (prog != nullptr && pop_.buffers[k].context == prog->context &&
          pop_.buffers[k].bytes >= bytes) {
        fits.push_back(int(k));
      }
    }
    uint64_t pick = rng_.Below(20);
    if (pick < 7 && !pop_.buffers.empty()) {
      // Resident: a fitting buffer, or any buffer with a random range.
      b.source = VYRE_SOURCE_RESIDENT;
      m.host = false;
      if (!fits.empty() && rng_.Chance(0.85)) {
        m.buffer_index = rng_.Pick(fits);
        const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
        m.offset = esize * rng_.Below((buf.bytes - bytes) / esize + 1);
        m.bytes = bytes;
        b.buffer = buf.handle;
        b.offset = m.offset;
        b.length = (m.offset + bytes == buf.bytes && rng_.Chance(0.5)) ? 0 : bytes;
      } else {
        m.buffer_index = int(rng_.Below(pop_.buffers.size()));
        const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
        b.buffer = buf.handle;
        b.offset = RandomOffset(buf.bytes);
        // Element-aligned for the known kernels: a misaligned u32 pointer is
        // the caller's bug (a real GPU faults), not something to test here.
        if (prog != nullptr && prog->kind != KernelKind::kOther) b.offset &= ~uint64_t{3};
        b.length = rng_.Chance(0.2) ? 0 : RandomLength(buf.bytes, b.offset);
        if (rng_.Chance(0.05)) b.length = UINT64_MAX - rng_.Below(16);
        m.offset = b.offset;
        m.bytes = b.length == 0 && b.offset <= buf.bytes ? buf.bytes - b.offset : b.length;
        well_formed = false;
        known_kernel = false;  // the model does not follow odd resident ranges
      }
      if (prog == nullptr || pop_.buffers[size_t(m.buffer_index)].context != prog->context) {
        well_formed = false;  // another context's buffer: INVALID_ARGUMENT
      }
      if (rng_.Chance(0.03)) {  // a stale or forged buffer
        HandleChoice bc;
        int unused;
        b.buffer.bits = PickBufferHandle(&unused, &bc);
        if (bc != HandleChoice::kValid) {
          well_formed = false;
          m.buffer_index = -1;
        } else {
          b.buffer = pop_.buffers[size_t(m.buffer_index)].handle;
        }
      }
    } else if (pick < 19) {
      // Host: memory sized to host_bytes, poisoned outputs.
      b.source = VYRE_SOURCE_HOST;
      m.bytes = bytes;
      pending.host.emplace_back();
      HostBinding& h = pending.host.back();
      h.memory = std::make_unique<std::vector<uint8_t>>(RandomBytes(bytes));
      h.written = RoleOf(d) == VYRE_ROLE_OUTPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT;
      bool reads = RoleOf(d) == VYRE_ROLE_INPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT;
      if (RoleOf(d) == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
      h.before = *h.memory;
      b.host_bytes = bytes;
      b.host_input = (reads || rng_.Chance(0.3)) ? h.memory->data() : nullptr;
      b.host_output = (h.written || rng_.Chance(0.3)) ? h.memory->data() : nullptr;
      if (rng_.Chance(0.03)) {
        b.host_input = nullptr;
        if (reads) well_formed = false;
      }
      if (rng_.Chance(0.03)) {
        b.host_output = nullptr;
        if (h.written) {
          well_formed = false;
          h.written = false;
        }
      }
      if (rng_.Chance(0.03)) {
        b.host_bytes = 0;
        well_formed = false;
      }
      m.host_binding = &h;
    } else {
      SetRawEnum(&b.source, RandomBadEnum(&rng_));
      well_formed = false;
      known_kernel = false;
    }
    // Declared element counts and output ranges of random programs.
    if (d.element_count != 0 && m.bytes != d.element_count * esize) well_formed = false;
    if ((RoleOf(d) == VYRE_ROLE_OUTPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT) &&
        !InRange(d.output_offset, d.output_length, m.bytes)) {
      well_formed = false;
    }
    if (RoleOf(d) == VYRE_ROLE_OUTPUT && d.output_length == 0 && d.output_offset >= m.bytes) {
      well_formed = false;
    }
  }

  // Parameter words: for the known kernels n never exceeds the bound
  // elements (a kernel reading past its buffers is the caller's bug).
  uint64_t min_elements = UINT64_MAX;
  for (const auto& m : model) min_elements = std::min(min_elements, m.bytes / 4);
  if (model.empty()) min_elements = 0;
  std::vector<uint32_t> params(rng_.Below(6));
  for (auto& w : params) w = uint32_t(rng_.Bits());
  if (known_kernel || (prog != nullptr && prog->kind != KernelKind::kOther)) {
    if (params.empty() && rng_.Chance(0.8)) params.push_back(0);
    if (!params.empty()) {
      params[0] = uint32_t(rng_.Chance(0.7) ? min_elements : rng_.Range(0, min_elements));
    }
  }
  std::vector<uint64_t> scalars(rng_.Below(3));
  for (auto& v : scalars) v = rng_.Bits();

  WithTail<vyre_dispatch_desc> desc{VYRE_DISPATCH_DESC_INIT, {}};
  desc.value.bindings = bindings.data();
  desc.value.binding_count = bindings.size();
  desc.value.param_words = params.data();
  desc.value.param_word_count = params.size();
  desc.value.scalars = scalars.data();
  desc.value.scalar_count = scalars.size();
  desc.value.fixpoint_iterations = uint32_t(rng_.Range(1, 3));
  if (rng_.Chance(0.05)) {
    desc.value.fixpoint_iterations = 0;
    well_formed = false;
  }
  if (rng_.Chance(0.2)) desc.value.flags |= VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  if (rng_.Chance(0.05)) desc.value.flags |= VYRE_DISPATCH_FLAG_COOPERATIVE;
  if (rng_.Chance(0.05)) {
    desc.value.flags |= uint32_t(1u << rng_.Range(2, 31));
    well_formed = false;  // unknown bits: rejecting them is allowed
  }
  if (rng_.Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kBlocks = {
        {0, 0, 0}, {1, 1, 1}, {32, 1, 1}, {256, 0, 0}, {1024, 1, 1}, {1025, 1, 1},
        {0, 4, 1}, {64, 32, 1}, {1, 1, 65}, {UINT32_MAX, 1, 1}};
    const auto& blk = rng_.Pick(kBlocks);
    std::copy(blk.begin(), blk.end(), desc.value.block);
    well_formed = false;
  }
  if (rng_.Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kGrids = {
        {1, 1, 1}, {0, 2, 1}, {3, 0, 0}, {2147483647u, 1, 1}, {2147483647u, 65535, 65535},
        {1, 65536, 1}, {UINT32_MAX, 1, 1}, {5, 2, 2}};
    const auto& g = rng_.Pick(kGrids);
    std::copy(g.begin(), g.end(), desc.value.grid);
    well_formed = false;
  }
  if (rng_.Chance(0.05)) {
    desc.value.element_count = rng_.Chance(0.5) ? rng_.Below(1000) : rng_.Bits();
    well_formed = false;
  }
  if (rng_.Chance(0.05)) {
    desc.value.shared_memory_bytes = uint32_t(rng_.Chance(0.5) ? rng_.Below(4096) : rng_.Bits());
    well_formed = false;
  }
  if (rng_.Chance(0.03)) {  // a wrong binding count
    desc.value.binding_count = bindings.empty() ? 1 : bindings.size() - 1;
    if (bindings.empty()) desc.value.bindings = nullptr;
    well_formed = false;
  }
  if (rng_.Chance(0.03)) {
    desc.value.param_words = nullptr;
    if (!params.empty()) well_formed = false;
  }
  RandomizeStructSize(&rng_, &desc, &well_formed);
  bool null_desc = rng_.Chance(0.02);
  bool null_out = rng_.Chance(0.02);
  if (null_desc || null_out) well_formed = false;
  if (prog != nullptr && prog->kind == KernelKind::kOther) well_formed = false;
  // Resident bindings of the known kernels must not overlap an output
  // (the model does not follow aliasing).
  for (size_t i = 0; i < model.size() && known_kernel; ++i) {
    for (size_t j = i + 1; j < model.size(); ++j) {
      if (!model[i].host && !model[j].host && model[i].buffer_index == model[j].buffer_index &&
          model[i].offset < model[j].offset + model[j].bytes &&
          model[j].offset < model[i].offset + model[i].bytes) {
        known_kernel = false;
      }
    }
  }

  // Launch shape as the engine derives it: threads that run, for the model.
  uint64_t threads = 0;
  if (prog != nullptr) {
    uint32_t block[3];
    if (desc.value.block[0] == 0 && desc.value.block[1] == 0 && desc.value.block[2] == 0) {
      std::copy(prog->workgroup, prog->workgroup + 3, block);
    } else {
      block[0] = desc.value.block[0];
      block[1] = desc.value.block[1] ? desc.value.block[1] : 1;
      block[2] = desc.value.block[2] ? desc.value.block[2] : 1;
    }
    uint64_t block_threads = uint64_t{block[0]} * block[1] * block[2];
    uint64_t grid_threads;
    if (desc.value.grid[0] == 0 && desc.value.grid[1] == 0 && desc.value.grid[2] == 0) {
      uint64_t ec = desc.value.element_count;
      if (ec == 0) {
        for (size_t i = 0; i < model.size(); ++i) {
          uint32_t esize = decls[i].element_size ? decls[i].element_size : 1;
          ec = std::max(ec, model[i].bytes / esize);
        }
      }
      uint64_t blocks = block_threads == 0 ? 0 : (ec == 0 ? 1 : (ec + block_threads - 1) / block_threads);
      grid_threads = blocks;
    } else {
      grid_threads = uint64_t{desc.value.grid[0]} * (desc.value.grid[1] ? desc.value.grid[1] : 1) *
                     (desc.value.grid[2] ? desc.value.grid[2] : 1);
    }
    threads = grid_threads * block_threads;  // < 2^31 * 2^32 * 2^32 may wrap; capped below
    if (grid_threads != 0 && threads / grid_threads != block_threads) threads = UINT64_MAX;
  }
  uint64_t n = params.empty() || desc.value.param_words == nullptr ? 0 : params[0];
  uint64_t n_eff = std::min(n, threads);
  uint32_t iterations = desc.value.fixpoint_iterations;

  vyre_pending out{0};
  vyre_timing timing = VYRE_TIMING_INIT;
  const vyre_dispatch_desc* desc_ptr = null_desc ? nullptr : &desc.value;
  vyre_status s;
  if (async) {
    s = Check(vyre_dispatch_async(program, desc_ptr, null_out ? nullptr : &out), call);
  } else {
    s = Check(vyre_dispatch(program, desc_ptr, rng_.Chance(0.5) ? &timing : nullptr), call);
  }
  ExpectNotOk(s, choice, call);
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, call);
  if (s != VYRE_STATUS_OK && (null_desc || null_out)) {
    // fine
  } else if (s == VYRE_STATUS_OK && (null_desc || (async && null_out))) {
    Fail(std::string(call) + " accepted a NULL pointer");
    return;
  }

  // Resident outputs: on failure their contents are unknown (maybe zeroed).
  if (s != VYRE_STATUS_OK || !known_kernel) {
    for (size_t i = 0; i < model.size(); ++i) {
      const BoundModel& m = model[i];
      bool writes = RoleOf(decls[i]) == VYRE_ROLE_OUTPUT || RoleOf(decls[i]) == VYRE_ROLE_INPUT_OUTPUT;
      if (!m.host && m.buffer_index >= 0 && writes) {
        BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
        if (m.offset < buf.bytes) {
          uint64_t end = m.bytes > buf.bytes - m.offset ? buf.bytes : m.offset + m.bytes;
          std::fill(buf.known.begin() + m.offset, buf.known.begin() + end, 0);
        }
      }
    }
    if (s != VYRE_STATUS_OK) return;
  }

  // The model of the known kernels: device bytes of each binding after the
  // dispatch, and whether each is known.
  if (known_kernel) {
    auto input = [&](size_t i, std::vector<uint8_t>* bytes, std::vector<uint8_t>* known) {
      const BoundModel& m = model[i];
      if (m.host) {
        *bytes = m.host_binding->before;
        known->assign(bytes->size(), 1);
      } else {
        const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
        bytes->assign(buf.shadow.begin() + m.offset, buf.shadow.begin() + m.offset + m.bytes);
        known->assign(buf.known.begin() + m.offset, buf.known.begin() + m.offset + m.bytes);
      }
    };
    size_t out_index = prog->kind == KernelKind::kAdd ? 2 : 0;
    std::vector<uint8_t> result, result_known;
    if (prog->kind == KernelKind::kAdd) {
      std::vector<uint8_t> a, ak, b, bk;
      input(0, &a, &ak);
      input(1, &b, &bk);
      result.assign(model[2].bytes, 0);  // OUTPUT is zeroed before launch
      result_known.assign(model[2].bytes, 1);
      for (uint64_t e = 0; e < n_eff; ++e) {
        uint32_t x, y;
        std::memcpy(&x, &a[e * 4], 4);
        std::memcpy(&y, &b[e * 4], 4);
        uint32_t sum = x + y;
        std::memcpy(&result[e * 4], &sum, 4);
        bool k = std::all_of(&ak[e * 4], &ak[e * 4] + 4, [](uint8_t v) { return v != 0; }) &&
                 std::all_of(&bk[e * 4], &bk[e * 4] + 4, [](uint8_t v) { return v != 0; });
        std::fill(&result_known[e * 4], &result_known[e * 4] + 4, k ? 1 : 0);
      }
    } else {
      input(0, &result, &result_known);
      for (uint64_t e = 0; e < n_eff; ++e) {
        uint32_t x;
        std::memcpy(&x, &result[e * 4], 4);
        x += iterations;
        std::memcpy(&result[e * 4], &x, 4);
      }
    }
    const BoundModel& m = model[out_index];
    const vyre_binding_decl& d = decls[out_index];
    if (m.host) {
      HostBinding& h = *m.host_binding;
      uint64_t length = d.output_length ? d.output_length : m.bytes - d.output_offset;
      h.expected = h.before;
      h.expected_known.assign(m.bytes, 1);
      for (uint64_t i = d.output_offset; i < d.output_offset + length; ++i) {
        h.expected[i] = result[i];
        h.expected_known[i] = result_known[i];
      }
    } else {
      BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
      std::copy(result.begin(), result.end(), buf.shadow.begin() + m.offset);
      std::copy(result_known.begin(), result_known.end(), buf.known.begin() + m.offset);
    }
    pending.check_results = true;
    ++checked_dispatches_;
  }
  if (!async) {
    CheckHostOutputs(pending, true, call);
    return;
  }
  if (null_out) return;
  pending.handle = out;
  pending.context = prog != nullptr ? prog->context : 0;
  pop_.pendings.push_back(std::move(pending));
}

// After a read-back, host outputs hold the model's bytes; without one they
// are untouched.
void Torture::CheckHostOutputs(const PendingState& pending, bool read_back, const char* call) {
  for (const HostBinding& h : pending.host) {
    const std::vector<uint8_t>& actual = *h.memory;
    if (!read_back || !h.written) {
      if (actual != h.before) {
        Fail(std::string(call) + ": host memory changed without a read-back into it");
        return;
      }
      continue;
    }
    if (!pending.check_results || h.expected.empty()) continue;
    for (size_t i = 0; i < actual.size(); ++i) {
      if (h.expected_known[i] && actual[i] != h.expected[i]) {
        Fail(std::string(call) + ": host output byte " + std::to_string(i) + " of " +
             std::to_string(actual.size()) + " is " + std::to_string(actual[i]) + ", expected " +
             std::to_string(h.expected[i]));
        return;
      }
    }
    checked_elements_ += actual.size() / 4;
  }
}

// ---------------------------------------------------------------------------
// Pending dispatches
// ---------------------------------------------------------------------------

void Torture::PendingPoll() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  vyre_status s = Check(vyre_pending_poll(pending), "vyre_pending_poll");
  ExpectNotOk(s, choice, "vyre_pending_poll");
  if (choice == HandleChoice::kValid && s != VYRE_STATUS_OK && s != VYRE_STATUS_NOT_READY) {
    Fail("vyre_pending_poll of a live dispatch returned " + StatusName(s));
  }
}

void Torture::PendingWait() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  static const std::vector<uint64_t> kTimeouts = {0, 1, 1000, 1000000, VYRE_WAIT_FOREVER};
  uint64_t timeout = rng_.Pick(kTimeouts);
  vyre_status s = Check(vyre_pending_wait(pending, timeout), "vyre_pending_wait");
  ExpectNotOk(s, choice, "vyre_pending_wait");
  if (choice != HandleChoice::kValid) return;
  PendingState& p = pop_.pendings[size_t(index)];
  if (p.waited) {
    ExpectStatus(s, VYRE_STATUS_INVALID_STATE, "vyre_pending_wait (second)");
    return;
  }
  if (s == VYRE_STATUS_TIMEOUT && timeout != VYRE_WAIT_FOREVER) return;  // still waitable
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_wait");
  p.waited = true;
  if (s == VYRE_STATUS_OK) CheckHostOutputs(p, true, "vyre_pending_wait");
}

void Torture::PendingTiming() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  WithTail<vyre_timing> timing{VYRE_TIMING_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &timing, &well_formed);
  bool null_out = rng_.Chance(0.05);
  vyre_status s = Check(vyre_pending_timing(pending, null_out ? nullptr : &timing.value),
                        "vyre_pending_timing");
  ExpectNotOk(s, choice, "vyre_pending_timing");
  if (choice != HandleChoice::kValid) return;
  if (null_out) {
    if (s == VYRE_STATUS_OK) Fail("vyre_pending_timing accepted a NULL out");
    return;
  }
  const PendingState& p = pop_.pendings[size_t(index)];
  if (!p.waited) {
    if (s == VYRE_STATUS_OK) Fail("vyre_pending_timing before the wait returned OK");
    return;
  }
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_timing");
}

void Torture::PendingRelease() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  vyre_status s = Check(vyre_pending_release(pending), "vyre_pending_release");
  ExpectNotOk(s, choice, "vyre_pending_release");
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_release");
  PendingState& p = pop_.pendings[size_t(index)];
  if (!p.waited) CheckHostOutputs(p, false, "vyre_pending_release");
  ForgetPending(size_t(index));
}

void Torture::LastErrorProbe() {
  // Truncating reads of the last error must stay NUL-terminated.
  vyre_status before = vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr);
  size_t capacity = size_t(rng_.Below(12));
  std::vector<char> text(capacity + 1, '#');
  size_t length = 0;
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu = 0;
  vyre_status r = vyre_last_error(&status, &cu, capacity ? text.data() : nullptr, capacity, &length);
  if (r != before || status != before) Fail("vyre_last_error changed between reads");
  if (capacity > 0 && std::memchr(text.data(), '\0', capacity) == nullptr) {
    Fail("vyre_last_error left a truncated message unterminated");
  }
  if (text[capacity] != '#') Fail("vyre_last_error wrote past message_capacity");
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

void Torture::Run(int operations) {
  int total_weight = 0;
  for (int w : kWeights) total_weight += w;
  for (op_index_ = 0; op_index_ < operations && failures_ < 20; ++op_index_) {
    if (pop_.contexts.empty()) {
      current_op_ = Op::kContextCreate;
      vyre_context c{0};
      vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
      vyre_status s = Check(vyre_context_create(&desc, &c), "vyre_context_create");
      ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_create");
      if (s != VYRE_STATUS_OK) return;
      pop_.contexts.push_back(c.bits);
    }
    int r = int(rng_.Below(uint64_t(total_weight)));
    size_t op = 0;
    while (r >= kWeights[op]) r -= kWeights[op++];
    current_op_ = Op(op);
    switch (current_op_) {
      case Op::kContextCreate: ContextCreate(); break;
      case Op::kContextDestroy: ContextDestroy(); break;
      case Op::kContextQuery: ContextQuery(); break;
      case Op::kBufferAlloc: BufferAlloc(); break;
      case Op::kBufferFree: BufferFree(); break;
      case Op::kBufferInfo: BufferInfo(); break;
      case Op::kUpload: Upload(); break;
      case Op::kDownload: Download(); break;
      case Op::kUploadRanges: UploadRanges(); break;
      case Op::kDownloadRanges: DownloadRanges(); break;
      case Op::kProgramCreate: ProgramCreate(); break;
      case Op::kProgramDestroy: ProgramDestroy(); break;
      case Op::kDispatch: DispatchOp(false); break;
      case Op::kDispatchAsync: DispatchOp(true); break;
      case Op::kPendingPoll: PendingPoll(); break;
      case Op::kPendingWait: PendingWait(); break;
      case Op::kPendingTiming: PendingTiming(); break;
      case Op::kPendingRelease: PendingRelease(); break;
      case Op::kLastErrorProbe: LastErrorProbe(); break;
      case Op::kCount: break;
    }
  }
}

void Torture::DestroyEverything() {
  // Release some pendings explicitly, leave the rest to context destroy.
  for (size_t i = pop_.pendings.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_pending_release(pop_.pendings[i].handle), "vyre_pending_release"),
                   VYRE_STATUS_OK, "vyre_pending_release (teardown)");
      if (!pop_.pendings[i].waited) {
        CheckHostOutputs(pop_.pendings[i], false, "vyre_pending_release (teardown)");
      }
      ForgetPending(i);
    }
  }
  while (!pop_.contexts.empty()) {
    uint64_t context = pop_.contexts.back();
    ExpectStatus(Check(vyre_context_destroy(vyre_context{context}), "vyre_context_destroy"),
                 VYRE_STATUS_OK, "vyre_context_destroy (teardown)");
    ForgetContext(context);
  }
  // Every handle ever made is dead now.
  for (uint64_t bits : pop_.dead_buffers) {
    ExpectStatus(Check(vyre_buffer_free(vyre_buffer{bits}), "vyre_buffer_free"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_buffer_free (dead)");
  }
  for (uint64_t bits : pop_.dead_pendings) {
    ExpectStatus(Check(vyre_pending_release(vyre_pending{bits}), "vyre_pending_release"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_pending_release (dead)");
  }
}

void Torture::PrintSummary() const {
  std::printf("[torture] %d operations, %" PRIu64 " dispatches checked against the CPU model, %" PRIu64
              " host output elements compared\n",
              op_index_, checked_dispatches_, checked_elements_);
  for (const auto& [call, statuses] : histogram_) {
    std::printf("[torture]   %-30s", call.c_str());
    for (const auto& [name, count] : statuses) {
      std::printf(" %s=%d", name.c_str() + std::strlen("VYRE_STATUS_"), count);
    }
    std::printf("\n");
  }
}

uint64_t SeedFromEnvironment() {
  const char* text = std::getenv("VYRE_TORTURE_SEED");
  if (text != nullptr && *text != '\0') return std::strtoull(text, nullptr, 0);
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

int OperationsFromEnvironment() {
  const char* text = std::getenv("VYRE_TORTURE_OPS");
  return text != nullptr && *text != '\0' ? std::atoi(text) : 20000;
}

TEST(ApiTortureTest, RandomOperationsKeepEveryInvariant) {
  ASSERT_TRUE(FakeCuda::Available())
      << "VYRE_CUDA_DRIVER_LIBRARY must name the fake driver (run through ctest)";
  uint64_t seed = SeedFromEnvironment();
  int operations = OperationsFromEnvironment();
  std::printf("[torture] seed %" PRIu64 " (rerun with VYRE_TORTURE_SEED=%" PRIu64 "), %d operations\n",
              seed, seed, operations);
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE("VYRE_TORTURE_SEED=" + std::to_string(seed));

  fake_cuda_stats before = FakeCuda::Stats();
  auto start = std::chrono::steady_clock::now();
  Torture torture(seed);
  torture.Run(operations);
  torture.DestroyEverything();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  torture.PrintSummary();
  std::printf("[torture] %.2f s\n", seconds);

  fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.misuse_errors, before.misuse_errors)
      << "the engine made driver calls a real driver rejects (see 'fake cuda: MISUSE' above)";
  EXPECT_EQ(after.hold_timeouts, before.hold_timeouts);
  EXPECT_EQ(after.device_allocations_live, before.device_allocations_live);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);
  EXPECT_EQ(after.pinned_allocations_live, before.pinned_allocations_live);
  EXPECT_EQ(after.pinned_bytes_live, before.pinned_bytes_live);
  EXPECT_EQ(after.modules_live, before.modules_live);
  EXPECT_EQ(after.streams_live, before.streams_live);
  EXPECT_EQ(after.events_live, before.events_live);
  EXPECT_EQ(after.primary_context_retains, before.primary_context_retains);
}

}  // namespace
}  // namespace vyre_test
