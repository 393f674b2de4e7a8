// Seeded randomized "torture" test of the public API against the fake driver.
//
// Runs thousands of random operations over a small population of live and
// dead objects (contexts, buffers, programs, pending dispatches and replays,
// graphs, sequences) with valid,
// stale, forged, wrong-type and 0 handles, malformed descriptors, out-of-range
// and overflowing offsets, bad enum values, odd launch shapes and pending
// handles used in any order. Every call is checked against the rules that
// hold for every function (status in range, vyre_last_error agrees, "Fix:" in
// every failure message), well-formed calls must succeed, and the test
// kernels' results (vyre_test_add_u32, vyre_test_inc_u32) are compared with a
// CPU model that also shadows the contents of every resident buffer. Graphs
// (host and resident vector adds and increments) are recorded, replayed with
// fresh or unchanged inputs, other element counts, parameter words and
// rebound ranges, synchronously and asynchronously, and destroyed under their
// replays; sequences of random fill, copy, upload, download and dispatch steps
// (with a repeated block) run eagerly and as graphs against the same model;
// buffers are freed under both (a replay or run then says STALE_HANDLE). At the
// end every object is destroyed and the fake driver's live counts (graphs and
// executable graphs included) and misuse counter must be back where they
// started.
//
// Every pointer passed points at real memory of at least the length claimed.
//
// Environment:
//   VYRE_TORTURE_SEED=<n>  reproduce a run (the seed is printed at start;
//                          fixed by default, "random" for a fresh one)
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
constexpr size_t kMaxGraphs = 10;
constexpr size_t kMaxSequences = 6;
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
  std::shared_ptr<std::vector<uint8_t>> memory;  // shared with a sequence's DOWNLOAD steps
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

// A resident byte range: buffer handle bits, offset, length.
struct Range {
  uint64_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// One step of a sequence as the model runs it.
struct SeqStepModel {
  vyre_step_kind kind = VYRE_STEP_FILL;
  Range dst;                                   // FILL, COPY, UPLOAD; DOWNLOAD: the source
  Range src;                                   // COPY
  uint8_t fill = 0;
  std::shared_ptr<std::vector<uint8_t>> host;  // UPLOAD source, DOWNLOAD destination
  KernelKind kernel = KernelKind::kOther;      // DISPATCH
  std::vector<Range> bindings;                 // DISPATCH: inc {data}; add {a, b, out}
  uint32_t n = 0;
  uint32_t iterations = 1;
};

// A sequence's steps in run order, shared by the sequence and its graphs.
struct SeqModel {
  uint64_t context = 0;
  std::vector<SeqStepModel> steps;
  std::vector<uint32_t> order;
  bool host_steps = false;
  // An unwaited asynchronous replay of one of its graphs, which writes the
  // DOWNLOAD memory when waited: runs and other replays leave the sequence
  // alone until then.
  uint64_t busy_pending = 0;
};

struct SequenceState {
  vyre_sequence handle{0};
  uint64_t context = 0;
  std::shared_ptr<SeqModel> model;
};

// A recorded graph: a vector add or increment over HOST or RESIDENT
// bindings, or a sequence.
struct GraphState {
  vyre_graph handle{0};
  uint64_t context = 0;
  std::shared_ptr<SeqModel> sequence;  // set for graphs recorded from sequences
  KernelKind kernel = KernelKind::kOther;
  bool host = false;
  std::vector<vyre_binding_decl> decls;
  uint64_t threads_per_block = 1;
  uint64_t recorded = 0;  // elements recorded (HOST lengths)
  uint64_t count = 0;     // element count of the next replay
  uint64_t capacity = 1;
  uint32_t param_n = 0;   // parameter word 0: elements the kernel touches
  uint32_t iterations = 1;
  std::vector<Range> bound;  // RESIDENT: the ranges bound now
  std::vector<std::vector<uint8_t>> last_inputs;  // HOST: the previous replay's inputs
  uint64_t pending = 0;  // HOST: an unwaited asynchronous replay holds the staging
};

struct Population {
  std::vector<uint64_t> contexts;
  std::vector<BufferState> buffers;
  std::vector<ProgramState> programs;
  std::vector<PendingState> pendings;
  std::vector<GraphState> graphs;
  std::vector<SequenceState> sequences;
  // Handles of destroyed objects, to be used again (they must be stale).
  std::vector<uint64_t> dead_contexts, dead_buffers, dead_programs, dead_pendings;
  std::vector<uint64_t> dead_graphs, dead_sequences;

  std::vector<uint64_t> LiveBits() const {
    std::vector<uint64_t> bits = contexts;
    for (const auto& b : buffers) bits.push_back(b.handle.bits);
    for (const auto& p : programs) bits.push_back(p.handle.bits);
    for (const auto& p : pendings) bits.push_back(p.handle.bits);
    for (const auto& g : graphs) bits.push_back(g.handle.bits);
    for (const auto& q : sequences) bits.push_back(q.handle.bits);
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
  kGraphRecord,
  kGraphReplay,
  kGraphReplayAsync,
  kGraphDestroy,
  kGraphQuery,
  kSequenceCreate,
  kSequenceRun,
  kSequenceRecord,
  kSequenceDestroy,
  kCount
};

const char* OpName(Op op) {
  static const char* const kNames[] = {
      "context_create", "context_destroy", "context_query", "buffer_alloc", "buffer_free",
      "buffer_info",    "upload",          "download",      "upload_ranges", "download_ranges",
      "program_create", "program_destroy", "dispatch",      "dispatch_async", "pending_poll",
      "pending_wait",   "pending_timing",  "pending_release", "last_error_probe",
      "graph_record",   "graph_replay",    "graph_replay_async", "graph_destroy",
      "graph_query",    "sequence_create", "sequence_run",  "sequence_record",
      "sequence_destroy"};
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
    4,   // graph_record
    8,   // graph_replay
    5,   // graph_replay_async
    2,   // graph_destroy
    3,   // graph_query
    3,   // sequence_create
    4,   // sequence_run
    2,   // sequence_record
    2,   // sequence_destroy
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
  void GraphRecord();
  void GraphReplay(bool async);
  void GraphDestroy();
  void GraphQuery();
  void SequenceCreate();
  void SequenceRun();
  void SequenceRecord();
  void SequenceDestroy();

  // --- helpers ---
  // Checks the rules every call obeys; returns the status.
  vyre_status Check(vyre_status status, const char* call);
  void Fail(const std::string& what);
  void ExpectStatus(vyre_status actual, vyre_status expected, const char* call);
  void ExpectNotOk(vyre_status actual, HandleChoice choice, const char* call);
  // The status of a call that was given a bad handle (choice != kValid) and
  // otherwise valid arguments: STALE_HANDLE for a stale one, INVALID_HANDLE
  // for 0 or another type's, either for forged bits (flipping a live
  // handle's bits may name a long-dead object).
  void ExpectHandleError(vyre_status actual, HandleChoice choice, const char* call);
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
  uint64_t PickGraphHandle(int* index, HandleChoice* choice);
  uint64_t PickSequenceHandle(int* index, HandleChoice* choice);

  uint64_t RandomOffset(uint64_t size);
  uint64_t RandomLength(uint64_t size, uint64_t offset);
  std::vector<uint8_t> RandomBytes(size_t n);

  void ForgetContext(uint64_t context);
  void ForgetBuffer(size_t index);
  void ForgetPending(size_t index);
  void ForgetGraph(size_t index);
  void ForgetSequence(size_t index);
  void CheckHostOutputs(const PendingState& pending, bool read_back, const char* call);
  // A pending replay was waited on or released: its graph and sequence are
  // free for other replays and runs.
  void PendingDone(uint64_t bits);

  // --- the model of resident buffers, for graphs and sequences ---
  BufferState* LiveBuffer(uint64_t bits);
  bool AllLive(const std::vector<Range>& ranges);
  // A random element-aligned range of `bytes` in a live buffer of `context`
  // (avoiding `avoid` when given); false when none fits.
  bool RandomRange(uint64_t context, uint64_t bytes, const std::vector<Range>& avoid, Range* out);
  void ModelInc(const Range& data, uint32_t n, uint32_t times);
  void ModelAdd(const Range& a, const Range& b, const Range& out, uint32_t n);
  // Runs a sequence's steps on the shadows; `downloads` receives what each
  // DOWNLOAD step's host memory holds afterwards (bytes and known flags).
  void ModelSequence(const SeqModel& model,
                     std::map<size_t, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>*
                         downloads);
  // Host memory of a sequence's DOWNLOAD steps as HostBindings to check.
  std::vector<HostBinding> SequenceOutputs(
      const SeqModel& model,
      const std::map<size_t, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>& downloads);
  uint64_t checked_graph_replays_ = 0;
  uint64_t checked_sequence_runs_ = 0;

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
  if (raw < VYRE_STATUS_OK || raw > VYRE_STATUS_DEVICE_FAULT) {
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
    ::testing::AssertionResult layout = MessageLayoutOk(error.message);
    if (!layout) Fail(std::string(call) + " " + StatusName(status) + ": " + layout.message());
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

void Torture::ExpectHandleError(vyre_status actual, HandleChoice choice, const char* call) {
  if (choice == HandleChoice::kForged) {
    if (actual != VYRE_STATUS_INVALID_HANDLE && actual != VYRE_STATUS_STALE_HANDLE) {
      Fail(std::string(call) + " returned " + StatusName(actual) + " for a forged handle");
    }
    return;
  }
  ExpectStatus(actual,
               choice == HandleChoice::kStale ? VYRE_STATUS_STALE_HANDLE
                                              : VYRE_STATUS_INVALID_HANDLE,
               call);
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

uint64_t Torture::PickGraphHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.graphs, pop_.dead_graphs, 0.85, index, choice);
}

uint64_t Torture::PickSequenceHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.sequences, pop_.dead_sequences, 0.85, index, choice);
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
  PendingDone(pop_.pendings[index].handle.bits);
  RememberDead(&pop_.dead_pendings, pop_.pendings[index].handle.bits, &rng_);
  pop_.pendings.erase(pop_.pendings.begin() + index);
}

void Torture::ForgetGraph(size_t index) {
  RememberDead(&pop_.dead_graphs, pop_.graphs[index].handle.bits, &rng_);
  pop_.graphs.erase(pop_.graphs.begin() + index);
}

void Torture::ForgetSequence(size_t index) {
  RememberDead(&pop_.dead_sequences, pop_.sequences[index].handle.bits, &rng_);
  pop_.sequences.erase(pop_.sequences.begin() + index);
}

void Torture::PendingDone(uint64_t bits) {
  for (GraphState& g : pop_.graphs) {
    if (g.pending == bits) g.pending = 0;
    if (g.sequence && g.sequence->busy_pending == bits) g.sequence->busy_pending = 0;
  }
  for (SequenceState& q : pop_.sequences) {
    if (q.model->busy_pending == bits) q.model->busy_pending = 0;
  }
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
  for (size_t i = pop_.graphs.size(); i-- > 0;) {
    if (pop_.graphs[i].context == context) ForgetGraph(i);
  }
  for (size_t i = pop_.sequences.size(); i-- > 0;) {
    if (pop_.sequences[i].context == context) ForgetSequence(i);
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

// `v1_size`: the struct's first released size; sizes from it up to sizeof(T)
// are older versions, accepted with the missing fields read as zero.
template <typename T>
void RandomizeStructSize(Rng* rng, WithTail<T>* d, bool* well_formed,
                         size_t v1_size = sizeof(T)) {
  std::memset(d->tail, 0, sizeof(d->tail));
  uint32_t size = sizeof(T);
  switch (rng->Below(20)) {
    case 0: size = 0; break;
    case 1: size = uint32_t(rng->Range(1, v1_size - 1)); break;
    case 4:
      if (v1_size < sizeof(T)) size = uint32_t(rng->Range(v1_size, sizeof(T) - 1));
      break;
    case 2: size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail))); break;  // zero tail: OK
    case 3:
      size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail)));
      d->tail[rng->Below(size - sizeof(T))] = 1;
      break;
    default: break;
  }
  const bool older_version = size >= v1_size && size < sizeof(T);
  const bool zero_tail = size > sizeof(T) && std::all_of(d->tail, d->tail + sizeof(d->tail),
                                                         [](uint8_t b) { return b == 0; });
  if (size != sizeof(T) && !older_version && !zero_tail) *well_formed = false;
  std::memcpy(&d->value, &size, sizeof(size));  // struct_size is the first member
}

// vyre_context_desc before the staging fields.
constexpr size_t kContextDescV1Size = offsetof(vyre_context_desc, staging_chunk_bytes);

void Torture::ContextCreate() {
  WithTail<vyre_context_desc> desc{VYRE_CONTEXT_DESC_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &desc, &well_formed, kContextDescV1Size);
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
        // A freed buffer a live pending dispatch, graph or sequence still
        // uses stays counted until that is done with it; so does a destroyed
        // graph a pending replay holds, and a destroyed sequence its graph
        // holds.
        uint64_t buffers = 0, pendings = 0, graphs = 0, sequences = 0, sequence_graphs = 0;
        for (const auto& b : pop_.buffers) buffers += b.context == context.bits;
        for (const auto& p : pop_.pendings) pendings += p.context == context.bits;
        for (const auto& g : pop_.graphs) {
          graphs += g.context == context.bits;
          sequence_graphs += g.context == context.bits && g.sequence != nullptr;
        }
        for (const auto& q : pop_.sequences) sequences += q.context == context.bits;
        const bool holders = pendings + graphs + sequences > 0;
        if (holders ? t.value.live_buffers < buffers : t.value.live_buffers != buffers) {
          Fail("telemetry live_buffers " + std::to_string(t.value.live_buffers) + ", expected " +
               std::to_string(buffers));
        }
        if (pendings == 0 ? t.value.live_graphs != graphs : t.value.live_graphs < graphs) {
          Fail("telemetry live_graphs " + std::to_string(t.value.live_graphs) + ", expected " +
               std::to_string(graphs));
        }
        if (pendings + sequence_graphs == 0 ? t.value.live_sequences != sequences
                                            : t.value.live_sequences < sequences) {
          Fail("telemetry live_sequences " + std::to_string(t.value.live_sequences) +
               ", expected " + std::to_string(sequences));
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
  PendingDone(p.handle.bits);  // a waited replay no longer holds its graph's staging
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
// The resident-buffer model shared by graphs and sequences
// ---------------------------------------------------------------------------

// A replay descriptor that owns its arrays.
struct ReplaySpecT {
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> param_words;
  uint64_t element_count = 0;
  uint32_t flags = 0;

  vyre_graph_replay_desc Desc() const {
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.flags = flags;
    desc.bindings = bindings.empty() ? nullptr : bindings.data();
    desc.binding_count = bindings.size();
    desc.param_words = param_words.empty() ? nullptr : param_words.data();
    desc.param_word_count = param_words.size();
    desc.element_count = element_count;
    return desc;
  }
};

// Readable memory for bindings whose data never matters.
const uint8_t* Scratch() {
  static const std::vector<uint8_t> scratch(64 * 1024 + 4096, 1);
  return scratch.data();
}

bool Overlap(const Range& a, const Range& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

uint64_t NextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

BufferState* Torture::LiveBuffer(uint64_t bits) {
  for (BufferState& b : pop_.buffers) {
    if (b.handle.bits == bits) return &b;
  }
  return nullptr;
}

bool Torture::AllLive(const std::vector<Range>& ranges) {
  for (const Range& r : ranges) {
    if (LiveBuffer(r.buffer) == nullptr) return false;
  }
  return true;
}

bool Torture::RandomRange(uint64_t context, uint64_t bytes, const std::vector<Range>& avoid,
                          Range* out) {
  std::vector<size_t> fits;
  for (size_t i = 0; i < pop_.buffers.size(); ++i) {
    if (pop_.buffers[i].context == context && pop_.buffers[i].bytes >= bytes) fits.push_back(i);
  }
  for (int attempt = 0; attempt < 4 && !fits.empty(); ++attempt) {
    const BufferState& b = pop_.buffers[rng_.Pick(fits)];
    Range r{b.handle.bits, 4 * rng_.Below((b.bytes - bytes) / 4 + 1), bytes};
    bool clear = true;
    for (const Range& a : avoid) clear = clear && !Overlap(a, r);
    if (clear) {
      *out = r;
      return true;
    }
  }
  return false;
}

void Torture::ModelInc(const Range& data, uint32_t n, uint32_t times) {
  BufferState& b = *LiveBuffer(data.buffer);
  for (uint64_t e = 0; e < n; ++e) {
    uint32_t v;
    std::memcpy(&v, &b.shadow[data.offset + 4 * e], 4);
    v += times;
    std::memcpy(&b.shadow[data.offset + 4 * e], &v, 4);
  }
}

void Torture::ModelAdd(const Range& a, const Range& b, const Range& out, uint32_t n) {
  const BufferState& ba = *LiveBuffer(a.buffer);
  const BufferState& bb = *LiveBuffer(b.buffer);
  std::vector<uint8_t> av(ba.shadow.begin() + a.offset, ba.shadow.begin() + a.offset + a.bytes);
  std::vector<uint8_t> ak(ba.known.begin() + a.offset, ba.known.begin() + a.offset + a.bytes);
  std::vector<uint8_t> bv(bb.shadow.begin() + b.offset, bb.shadow.begin() + b.offset + b.bytes);
  std::vector<uint8_t> bk(bb.known.begin() + b.offset, bb.known.begin() + b.offset + b.bytes);
  BufferState& bo = *LiveBuffer(out.buffer);
  // OUTPUT: zeroed, then n elements written.
  std::fill(bo.shadow.begin() + out.offset, bo.shadow.begin() + out.offset + out.bytes, 0);
  std::fill(bo.known.begin() + out.offset, bo.known.begin() + out.offset + out.bytes, 1);
  for (uint64_t e = 0; e < n; ++e) {
    uint32_t x, y;
    std::memcpy(&x, &av[4 * e], 4);
    std::memcpy(&y, &bv[4 * e], 4);
    uint32_t sum = x + y;
    std::memcpy(&bo.shadow[out.offset + 4 * e], &sum, 4);
    bool k = std::all_of(&ak[4 * e], &ak[4 * e] + 4, [](uint8_t v) { return v != 0; }) &&
             std::all_of(&bk[4 * e], &bk[4 * e] + 4, [](uint8_t v) { return v != 0; });
    std::fill(&bo.known[out.offset + 4 * e], &bo.known[out.offset + 4 * e] + 4, k ? 1 : 0);
  }
}

// Every range a sequence's steps touch.
std::vector<Range> SequenceRanges(const SeqModel& m) {
  std::vector<Range> ranges;
  for (const SeqStepModel& s : m.steps) {
    if (s.kind == VYRE_STEP_DISPATCH) {
      ranges.insert(ranges.end(), s.bindings.begin(), s.bindings.end());
    } else {
      ranges.push_back(s.dst);
      if (s.kind == VYRE_STEP_COPY) ranges.push_back(s.src);
    }
  }
  return ranges;
}

using Downloads = std::map<size_t, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>;

void Torture::ModelSequence(const SeqModel& m, Downloads* downloads) {
  for (uint32_t index : m.order) {
    const SeqStepModel& s = m.steps[index];
    switch (s.kind) {
      case VYRE_STEP_FILL: {
        BufferState& b = *LiveBuffer(s.dst.buffer);
        std::fill_n(b.shadow.begin() + s.dst.offset, s.dst.bytes, s.fill);
        std::fill_n(b.known.begin() + s.dst.offset, s.dst.bytes, 1);
        break;
      }
      case VYRE_STEP_COPY: {
        const BufferState& src = *LiveBuffer(s.src.buffer);
        std::vector<uint8_t> v(src.shadow.begin() + s.src.offset,
                               src.shadow.begin() + s.src.offset + s.src.bytes);
        std::vector<uint8_t> k(src.known.begin() + s.src.offset,
                               src.known.begin() + s.src.offset + s.src.bytes);
        BufferState& dst = *LiveBuffer(s.dst.buffer);
        std::copy(v.begin(), v.end(), dst.shadow.begin() + s.dst.offset);
        std::copy(k.begin(), k.end(), dst.known.begin() + s.dst.offset);
        break;
      }
      case VYRE_STEP_UPLOAD: {
        BufferState& b = *LiveBuffer(s.dst.buffer);
        std::copy(s.host->begin(), s.host->end(), b.shadow.begin() + s.dst.offset);
        std::fill_n(b.known.begin() + s.dst.offset, s.dst.bytes, 1);
        break;
      }
      case VYRE_STEP_DOWNLOAD: {
        const BufferState& b = *LiveBuffer(s.dst.buffer);
        (*downloads)[index] = {
            std::vector<uint8_t>(b.shadow.begin() + s.dst.offset,
                                 b.shadow.begin() + s.dst.offset + s.dst.bytes),
            std::vector<uint8_t>(b.known.begin() + s.dst.offset,
                                 b.known.begin() + s.dst.offset + s.dst.bytes)};
        break;
      }
      case VYRE_STEP_DISPATCH:
        if (s.kernel == KernelKind::kInc) {
          ModelInc(s.bindings[0], s.n, s.iterations);
        } else {
          ModelAdd(s.bindings[0], s.bindings[1], s.bindings[2], s.n);
        }
        break;
      default: break;
    }
  }
}

std::vector<HostBinding> Torture::SequenceOutputs(const SeqModel& m, const Downloads& downloads) {
  std::vector<HostBinding> out;
  for (const auto& [index, bytes] : downloads) {
    HostBinding h;
    h.memory = m.steps[index].host;
    h.before = *h.memory;
    h.expected = bytes.first;
    h.expected_known = bytes.second;
    h.written = true;
    out.push_back(std::move(h));
  }
  return out;
}

// Fresh UPLOAD data and poisoned DOWNLOAD memory before a run or replay.
void RefreshSequenceHost(const SeqModel& m, Rng* rng) {
  for (const SeqStepModel& s : m.steps) {
    if (s.kind == VYRE_STEP_UPLOAD) {
      for (size_t i = 0; i < s.host->size(); ++i) (*s.host)[i] = uint8_t(rng->Bits());
    } else if (s.kind == VYRE_STEP_DOWNLOAD) {
      std::fill(s.host->begin(), s.host->end(), kPoisonByte);
    }
  }
}

// ---------------------------------------------------------------------------
// Graphs
// ---------------------------------------------------------------------------

void Torture::GraphRecord() {
  if (pop_.graphs.size() >= kMaxGraphs) {
    GraphDestroy();
    return;
  }
  const char* call = "vyre_graph_record";
  int program_index;
  HandleChoice choice;
  vyre_program program{PickProgramHandle(&program_index, &choice)};
  const ProgramState* prog = program_index >= 0 ? &pop_.programs[size_t(program_index)] : nullptr;
  if (prog == nullptr || prog->kind == KernelKind::kOther) {
    // A host vector add's shape: refused for a bad handle; for a program of
    // random declarations only the rules every call obeys are checked, and
    // a graph it makes is destroyed at once.
    std::vector<uint8_t> a(64, 1), b(64, 2), out(64, 0);
    DispatchSpec spec;
    spec.bindings = {HostIn(a.data(), 64), HostIn(b.data(), 64), HostOut(out.data(), 64)};
    spec.param_words = {16};
    vyre_dispatch_desc desc = spec.Desc();
    vyre_graph graph{0};
    vyre_status s = Check(vyre_graph_record(program, &desc, &graph), call);
    ExpectNotOk(s, choice, call);
    if (choice == HandleChoice::kStale) ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, call);
    if (s == VYRE_STATUS_OK) {
      ExpectStatus(Check(vyre_graph_destroy(graph), "vyre_graph_destroy"), VYRE_STATUS_OK,
                   "vyre_graph_destroy");
    }
    return;
  }
  const bool add = prog->kind == KernelKind::kAdd;
  const size_t count = prog->decls.size();
  GraphState g;
  g.context = prog->context;
  g.kernel = prog->kind;
  g.decls = prog->decls;
  g.threads_per_block = uint64_t{prog->workgroup[0]} * prog->workgroup[1] * prog->workgroup[2];
  const uint64_t n = rng_.Chance(0.1) ? rng_.Range(1, 4096) : rng_.Range(1, 600);
  g.recorded = g.count = n;
  g.capacity = NextPow2(n);
  g.param_n = uint32_t(rng_.Chance(0.8) ? n : rng_.Range(1, n));
  g.iterations = uint32_t(rng_.Range(1, 3));
  const vyre_binding_decl& out_decl = prog->decls[add ? 2 : 0];
  const bool ranged = out_decl.output_offset != 0 || out_decl.output_length != 0;
  bool well_formed = true;
  if (ranged && (!InRange(out_decl.output_offset, out_decl.output_length, n * 4) ||
                 (out_decl.output_length == 0 && out_decl.output_offset >= n * 4))) {
    well_formed = false;
  }
  // Resident graphs use ranges of exactly n elements, the output disjoint
  // from the inputs (the model does not follow aliasing).
  g.host = ranged || rng_.Chance(0.5);
  std::vector<vyre_dispatch_binding> bindings(count);
  PendingState host;  // the host memory, checked to be untouched by recording
  if (!g.host) {
    std::vector<Range> ranges;
    for (size_t i = 0; i < count && !g.host; ++i) {
      Range r;
      std::vector<Range> avoid = add && i == 2 ? ranges : std::vector<Range>{};
      if (!RandomRange(g.context, n * 4, avoid, &r)) g.host = true;
      ranges.push_back(r);
    }
    if (!g.host) {
      g.bound = ranges;
      for (size_t i = 0; i < count; ++i) {
        bindings[i] = Resident(vyre_buffer{ranges[i].buffer}, ranges[i].offset, ranges[i].bytes);
      }
    }
  }
  if (g.host) {
    for (size_t i = 0; i < count; ++i) {
      host.host.emplace_back();
      HostBinding& h = host.host.back();
      h.memory = std::make_shared<std::vector<uint8_t>>(RandomBytes(n * 4));
      const uint32_t role = RoleOf(prog->decls[i]);
      if (role == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
      h.before = *h.memory;
      if (role == VYRE_ROLE_INPUT) bindings[i] = HostIn(h.memory->data(), n * 4);
      if (role == VYRE_ROLE_OUTPUT) bindings[i] = HostOut(h.memory->data(), n * 4);
      if (role == VYRE_ROLE_INPUT_OUTPUT) bindings[i] = HostInOut(h.memory->data(), n * 4);
    }
  }
  DispatchSpec spec;
  spec.bindings = bindings;
  spec.param_words = {g.param_n};
  spec.fixpoint_iterations = g.iterations;
  WithTail<vyre_dispatch_desc> desc{spec.Desc(), {}};
  // At most one malformation, with its exact status.
  vyre_status expected = VYRE_STATUS_OK;
  bool null_out = false, null_desc = false;
  if (well_formed && rng_.Chance(0.15)) {
    switch (rng_.Below(8)) {
      case 0: null_out = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
      case 1: null_desc = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
      case 2:
        desc.value.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
        expected = VYRE_STATUS_INVALID_ARGUMENT;
        break;
      case 3: desc.value.binding_count = count - 1; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
      case 4: desc.value.struct_size = 0; expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE; break;
      case 5: desc.value.fixpoint_iterations = 0; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
      case 6:
        if (!g.host && !pop_.dead_buffers.empty()) {
          spec.bindings[0].buffer.bits = rng_.Pick(pop_.dead_buffers);
          expected = VYRE_STATUS_STALE_HANDLE;
        }
        break;
      default:
        if (!g.host) {
          spec.bindings[0].offset = UINT64_MAX - 4 * rng_.Below(4);
          expected = VYRE_STATUS_OUT_OF_RANGE;
        }
        break;
    }
  }
  vyre_graph out{0};
  vyre_status s = Check(vyre_graph_record(program, null_desc ? nullptr : &desc.value,
                                          null_out ? nullptr : &out),
                        call);
  ExpectNotOk(s, choice, call);
  if (well_formed) ExpectStatus(s, expected, call);
  if (!well_formed && s == VYRE_STATUS_OK) Fail("vyre_graph_record accepted a malformed dispatch");
  // Recording launches nothing: host memory is untouched.
  CheckHostOutputs(host, false, call);
  if (s != VYRE_STATUS_OK) return;
  if (!well_formed || expected != VYRE_STATUS_OK) {
    Check(vyre_graph_destroy(out), "vyre_graph_destroy");
    return;
  }
  g.handle = out;
  pop_.graphs.push_back(std::move(g));
}

void Torture::GraphReplay(bool async) {
  const char* call = async ? "vyre_graph_replay_async" : "vyre_graph_replay";
  if (async && pop_.pendings.size() >= kMaxPendings) {
    PendingRelease();
    return;
  }
  int index;
  HandleChoice choice;
  vyre_graph graph{PickGraphHandle(&index, &choice)};
  vyre_pending out{0};
  bool null_out = async && rng_.Chance(0.02);
  auto invoke = [&](const vyre_graph_replay_desc* desc) {
    vyre_timing timing = VYRE_TIMING_INIT;
    return async ? Check(vyre_graph_replay_async(graph, desc, null_out ? nullptr : &out), call)
                 : Check(vyre_graph_replay(graph, desc, rng_.Chance(0.3) ? &timing : nullptr),
                         call);
  };
  if (choice != HandleChoice::kValid) {
    vyre_status s = invoke(nullptr);
    ExpectNotOk(s, choice, call);
    if (!null_out) ExpectHandleError(s, choice, call);
    return;
  }
  GraphState& g = pop_.graphs[size_t(index)];

  // --- a graph recorded from a sequence ---
  if (g.sequence) {
    SeqModel& m = *g.sequence;
    if (m.host_steps && m.busy_pending != 0) {
      if (g.pending != 0) {
        ExpectStatus(invoke(nullptr),
                     null_out ? VYRE_STATUS_INVALID_ARGUMENT : VYRE_STATUS_INVALID_STATE, call);
      }
      return;  // another replay's read-back owns the host memory until then
    }
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    vyre_status expected = VYRE_STATUS_OK;
    if (rng_.Chance(0.1)) {
      desc.element_count = 1 + rng_.Below(8);  // sequence graphs take none
      expected = VYRE_STATUS_INVALID_ARGUMENT;
    } else if (!AllLive(SequenceRanges(m))) {
      expected = VYRE_STATUS_STALE_HANDLE;
    }
    if (rng_.Chance(0.3)) desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
    if (null_out) expected = VYRE_STATUS_INVALID_ARGUMENT;
    RefreshSequenceHost(m, &rng_);
    PendingState pending;
    for (const SeqStepModel& st : m.steps) {
      if (st.kind != VYRE_STEP_DOWNLOAD) continue;
      HostBinding h;
      h.memory = st.host;
      h.before = *st.host;
      pending.host.push_back(std::move(h));
    }
    vyre_status s = invoke(rng_.Chance(0.5) && desc.flags == 0 && expected == VYRE_STATUS_OK
                               ? nullptr
                               : &desc);
    ExpectStatus(s, expected, call);
    if (s != VYRE_STATUS_OK) {
      CheckHostOutputs(pending, false, call);  // nothing written
      return;
    }
    Downloads downloads;
    ModelSequence(m, &downloads);
    pending.host = SequenceOutputs(m, downloads);
    for (HostBinding& h : pending.host) h.before.assign(h.memory->size(), kPoisonByte);
    pending.check_results = true;
    ++checked_sequence_runs_;
    if (!async) {
      CheckHostOutputs(pending, true, call);
      return;
    }
    pending.handle = out;
    pending.context = g.context;
    if (m.host_steps) {
      m.busy_pending = out.bits;
      g.pending = out.bits;
    }
    pop_.pendings.push_back(std::move(pending));
    return;
  }

  // --- a recorded dispatch ---
  const bool add = g.kernel == KernelKind::kAdd;
  const size_t count = g.decls.size();
  const size_t out_index = add ? 2 : 0;
  uint64_t elements = g.count;
  uint32_t param_n = g.param_n;
  bool set_count = false, set_words = false, rebind = false;
  if (rng_.Chance(0.25)) {
    // A HOST binding recorded with the element count never grows.
    elements = rng_.Range(1, g.host ? g.recorded : g.capacity);
    set_count = true;
  }
  std::vector<Range> bound = g.bound;
  if (!g.host) {
    bool need = false;
    for (const Range& r : bound) need = need || r.bytes < elements * 4;
    if (need || rng_.Chance(0.3) || (!AllLive(bound) && rng_.Chance(0.5))) {
      const uint64_t length = elements * 4 + 4 * rng_.Below(8);
      std::vector<Range> ranges;
      bool found = true;
      for (size_t i = 0; i < count && found; ++i) {
        Range r;
        std::vector<Range> avoid = add && i == 2 ? ranges : std::vector<Range>{};
        found = RandomRange(g.context, length, avoid, &r);
        ranges.push_back(r);
      }
      if (found) {
        bound = ranges;
        rebind = true;
      } else if (need) {
        elements = g.count;
        set_count = false;
      }
    }
  }
  // The parameter word never exceeds the element count or a binding's
  // elements, so the kernel stays inside every bound range.
  uint64_t limit = elements;
  if (g.host) limit = std::min(limit, g.recorded);
  for (const Range& r : bound) limit = std::min(limit, r.bytes / 4);
  if (param_n > limit || rng_.Chance(0.2)) {
    param_n = uint32_t(rng_.Range(1, limit));
    set_words = true;
  }

  // Bindings: HOST data of the recorded lengths (sometimes the previous
  // replay's inputs again), or the resident ranges.
  PendingState pending;
  pending.host.reserve(count);
  std::vector<vyre_dispatch_binding> bindings(count);
  std::vector<std::vector<uint8_t>> inputs(count);
  const bool same_inputs = g.host && !g.last_inputs.empty() && rng_.Chance(0.3);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t role = RoleOf(g.decls[i]);
    if (g.host) {
      const uint64_t bytes = g.recorded * 4;
      pending.host.emplace_back();
      HostBinding& h = pending.host.back();
      h.memory = std::make_shared<std::vector<uint8_t>>(
          same_inputs ? g.last_inputs[i] : RandomBytes(bytes));
      if (role == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
      inputs[i] = *h.memory;
      h.before = *h.memory;
      h.written = role != VYRE_ROLE_INPUT;
      if (role == VYRE_ROLE_INPUT) bindings[i] = HostIn(h.memory->data(), bytes);
      if (role == VYRE_ROLE_OUTPUT) bindings[i] = HostOut(h.memory->data(), bytes);
      if (role == VYRE_ROLE_INPUT_OUTPUT) bindings[i] = HostInOut(h.memory->data(), bytes);
    } else {
      bindings[i] = Resident(vyre_buffer{bound[i].buffer}, bound[i].offset, bound[i].bytes);
    }
  }
  ReplaySpecT spec;
  spec.bindings = bindings;
  const bool pass_bindings = g.host || rebind || (AllLive(bound) && rng_.Chance(0.2));
  if (!pass_bindings) spec.bindings.clear();
  if (set_count || rng_.Chance(0.1)) spec.element_count = elements;
  if (set_words || rng_.Chance(0.1)) spec.param_words = {param_n};
  if (rng_.Chance(0.2)) spec.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  WithTail<vyre_graph_replay_desc> desc{spec.Desc(), {}};

  // The unwaited asynchronous replay of a HOST graph holds its staging.
  if (g.host && g.pending != 0) {
    ExpectStatus(invoke(&desc.value),
                 null_out ? VYRE_STATUS_INVALID_ARGUMENT : VYRE_STATUS_INVALID_STATE, call);
    CheckHostOutputs(pending, false, call);
    return;
  }
  vyre_status expected = VYRE_STATUS_OK;
  bool null_desc = false;
  if (rng_.Chance(0.15)) {
    std::vector<uint64_t> live_of_context;
    for (const auto& b : pop_.buffers) {
      if (b.context == g.context) live_of_context.push_back(b.handle.bits);
    }
    switch (rng_.Below(9)) {
      case 0:
        if (g.host) {
          spec.bindings[rng_.Below(count)].host_bytes -= 4;
          expected = VYRE_STATUS_SHAPE_MISMATCH;
        }
        break;
      case 8:
        // More elements than a HOST binding recorded with the count holds.
        if (g.host && g.recorded < g.capacity) {
          spec.element_count = rng_.Range(g.recorded + 1, g.capacity);
          expected = VYRE_STATUS_SHAPE_MISMATCH;
        }
        break;
      case 1:
        if (!spec.bindings.empty()) {
          spec.bindings.push_back(spec.bindings.back());
          expected = VYRE_STATUS_SHAPE_MISMATCH;
        }
        break;
      case 2:
        spec.element_count = g.capacity + rng_.Range(1, 1000);
        expected = VYRE_STATUS_LIMIT_EXCEEDED;
        break;
      case 3:
        // Binding 0 with the other source.
        if (!spec.bindings.empty() && !live_of_context.empty()) {
          spec.bindings[0] = g.host ? Resident(vyre_buffer{rng_.Pick(live_of_context)})
                                    : HostIn(Scratch(), 4);
          expected = VYRE_STATUS_SHAPE_MISMATCH;
        }
        break;
      case 4:
        desc.value.struct_size = uint32_t(rng_.Below(sizeof(vyre_graph_replay_desc)));
        expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
        break;
      case 5:
        desc.value.flags |= 1u << rng_.Range(2, 31);
        expected = VYRE_STATUS_INVALID_ARGUMENT;
        break;
      case 6:
        if (g.host) {
          null_desc = true;
          expected = VYRE_STATUS_INVALID_ARGUMENT;
        } else if (!pop_.dead_buffers.empty()) {
          spec.bindings = bindings;
          spec.bindings[0].buffer.bits = rng_.Pick(pop_.dead_buffers);
          expected = VYRE_STATUS_STALE_HANDLE;
        }
        break;
      default:
        if (!g.host && !live_of_context.empty()) {
          spec.bindings = bindings;
          spec.bindings[0] = Resident(vyre_buffer{rng_.Pick(live_of_context)},
                                      UINT64_MAX - 4 * rng_.Below(4), 4);
          expected = VYRE_STATUS_OUT_OF_RANGE;
        }
        break;
    }
    if (expected != VYRE_STATUS_OK && expected != VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE) {
      const uint32_t size = desc.value.struct_size;
      const uint32_t flags = desc.value.flags;
      desc.value = spec.Desc();
      desc.value.struct_size = size;
      desc.value.flags = flags;
    }
  }
  if (expected == VYRE_STATUS_OK && !g.host && !pass_bindings && !AllLive(bound)) {
    expected = VYRE_STATUS_STALE_HANDLE;  // a freed buffer, not rebound
  }
  if (null_out && expected == VYRE_STATUS_OK) expected = VYRE_STATUS_INVALID_ARGUMENT;
  vyre_status s = invoke(null_desc ? nullptr : &desc.value);
  if (null_out && s == VYRE_STATUS_OK) Fail("vyre_graph_replay_async accepted a NULL out");
  if (!null_out) ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK || expected != VYRE_STATUS_OK) {
    CheckHostOutputs(pending, false, call);  // a refused replay writes nothing
    return;
  }

  // The model: param_n elements of the kernel, OUTPUT zeroed first.
  if (g.host) {
    std::vector<uint8_t> result(g.recorded * 4, 0);
    if (add) {
      for (uint64_t e = 0; e < param_n; ++e) {
        uint32_t x, y;
        std::memcpy(&x, &inputs[0][4 * e], 4);
        std::memcpy(&y, &inputs[1][4 * e], 4);
        uint32_t sum = x + y;
        std::memcpy(&result[4 * e], &sum, 4);
      }
    } else {
      result = inputs[0];
      for (uint64_t e = 0; e < param_n; ++e) {
        uint32_t x;
        std::memcpy(&x, &result[4 * e], 4);
        x += g.iterations;
        std::memcpy(&result[4 * e], &x, 4);
      }
    }
    HostBinding& h = pending.host[out_index];
    const vyre_binding_decl& d = g.decls[out_index];
    const uint64_t length = d.output_length ? d.output_length : g.recorded * 4 - d.output_offset;
    h.expected = h.before;
    h.expected_known.assign(h.before.size(), 1);
    for (uint64_t i = d.output_offset; i < d.output_offset + length; ++i) h.expected[i] = result[i];
    pending.check_results = true;
    g.last_inputs = inputs;
  } else {
    if (add) {
      ModelAdd(bound[0], bound[1], bound[2], param_n);
    } else {
      ModelInc(bound[0], param_n, g.iterations);
    }
  }
  ++checked_graph_replays_;
  g.count = elements;
  g.param_n = param_n;
  if (rebind) g.bound = bound;
  if (!async) {
    CheckHostOutputs(pending, true, call);
    return;
  }
  pending.handle = out;
  pending.context = g.context;
  if (g.host) g.pending = out.bits;
  pop_.pendings.push_back(std::move(pending));
}

void Torture::GraphDestroy() {
  int index;
  HandleChoice choice;
  vyre_graph graph{PickGraphHandle(&index, &choice)};
  vyre_status s = Check(vyre_graph_destroy(graph), "vyre_graph_destroy");
  ExpectNotOk(s, choice, "vyre_graph_destroy");
  if (choice == HandleChoice::kStale) {
    ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy");
  }
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_destroy");
  // A pending replay keeps the graph until it is waited on or released.
  ForgetGraph(size_t(index));
}

void Torture::GraphQuery() {
  int index;
  HandleChoice choice;
  vyre_graph graph{PickGraphHandle(&index, &choice)};
  WithTail<vyre_graph_info> info{VYRE_GRAPH_INFO_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &info, &well_formed);
  // An output struct: a larger one with a non-zero tail is fine too.
  well_formed = well_formed || info.value.struct_size > sizeof(vyre_graph_info);
  vyre_status s = Check(vyre_graph_info_get(graph, &info.value), "vyre_graph_info_get");
  ExpectNotOk(s, choice, "vyre_graph_info_get");
  if (choice != HandleChoice::kValid) {
    ExpectHandleError(s, choice, "vyre_graph_info_get");
    return;
  }
  if (!well_formed) {
    ExpectStatus(s, VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_info_get");
    return;
  }
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_info_get");
  const GraphState& g = pop_.graphs[size_t(index)];
  const vyre_graph_info& i = info.value;
  if (s == VYRE_STATUS_OK) {
    bool right = i.context.bits == g.context && i.node_count >= 1 &&
                 i.from_sequence == (g.sequence ? 1u : 0u);
    if (!g.sequence) {
      right = right && i.element_count == g.count && i.capacity_elements == g.capacity &&
              i.kernel_node_count == g.iterations;
    }
    if (!right) {
      Fail("vyre_graph_info_get: node_count " + std::to_string(i.node_count) + ", element_count " +
           std::to_string(i.element_count) + " (expected " + std::to_string(g.count) +
           "), capacity " + std::to_string(i.capacity_elements) + " (expected " +
           std::to_string(g.capacity) + ")");
    }
  }
  const uint64_t nodes = i.node_count;
  // Node kinds and kernel node updates; an index past the end sometimes.
  uint64_t node = rng_.Below(nodes + 2);
  if (rng_.Chance(0.05)) node = UINT64_MAX - rng_.Below(4);
  vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
  s = Check(vyre_graph_node_kind_get(graph, node, &kind), "vyre_graph_node_kind_get");
  if (node >= nodes) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_graph_node_kind_get");
  } else {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_node_kind_get");
    if (kind != VYRE_GRAPH_NODE_KERNEL && kind != VYRE_GRAPH_NODE_MEMCPY &&
        kind != VYRE_GRAPH_NODE_MEMSET) {
      Fail("vyre_graph_node_kind_get: node " + std::to_string(node) + " has kind " +
           std::to_string(int(kind)));
    }
  }
  if (rng_.Chance(0.3)) {
    s = Check(vyre_graph_node_kind_get(graph, 0, nullptr), "vyre_graph_node_kind_get");
    ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_node_kind_get(NULL)");
  }
  if (!rng_.Chance(0.5)) return;
  // A grid at least as large as any derived one (every binding holds at most
  // 16384 elements): the model's results stay the same.
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  if (rng_.Chance(0.3)) update.flags |= VYRE_KERNEL_NODE_UPDATE_SCALARS;  // the kernels read none
  update.grid[0] = uint32_t(16384 * rng_.Range(1, 4));
  update.grid[1] = update.grid[2] = 1;
  vyre_status expected = VYRE_STATUS_OK;
  if (node >= nodes) {
    expected = VYRE_STATUS_OUT_OF_RANGE;
  } else if (kind != VYRE_GRAPH_NODE_KERNEL) {
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  } else if (rng_.Chance(0.1)) {
    update.flags = 0;
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  } else if (rng_.Chance(0.1)) {
    update.grid[1] = 0;
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  }
  s = Check(vyre_graph_kernel_node_update(graph, node, &update), "vyre_graph_kernel_node_update");
  ExpectStatus(s, expected, "vyre_graph_kernel_node_update");
}

// ---------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------

void Torture::SequenceCreate() {
  if (pop_.sequences.size() >= kMaxSequences) {
    SequenceDestroy();
    return;
  }
  const char* call = "vyre_sequence_create";
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  if (choice != HandleChoice::kValid) {
    vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
    step.bytes = 4;
    vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
    desc.steps = &step;
    desc.step_count = 1;
    vyre_sequence out{0};
    vyre_status s = Check(vyre_sequence_create(context, &desc, &out), call);
    ExpectNotOk(s, choice, call);
    ExpectHandleError(s, choice, call);
    return;
  }
  std::vector<size_t> buffers;
  for (size_t i = 0; i < pop_.buffers.size(); ++i) {
    if (pop_.buffers[i].context == context.bits) buffers.push_back(i);
  }
  if (buffers.empty()) return;
  std::vector<const ProgramState*> programs;
  for (const ProgramState& p : pop_.programs) {
    if (p.context != context.bits) continue;
    if (p.kind == KernelKind::kInc) programs.push_back(&p);
    if (p.kind == KernelKind::kAdd && p.decls[2].output_offset == 0 &&
        p.decls[2].output_length == 0) {
      programs.push_back(&p);
    }
  }
  auto model = std::make_shared<SeqModel>();
  model->context = context.bits;
  std::vector<vyre_sequence_step> steps;
  std::vector<std::unique_ptr<DispatchSpec>> specs;
  std::vector<std::unique_ptr<vyre_dispatch_desc>> descs;
  // A random byte range of a buffer of the context.
  auto byte_range = [&](uint64_t max_bytes) {
    const BufferState& b = pop_.buffers[rng_.Pick(buffers)];
    Range r{b.handle.bits, rng_.Below(b.bytes), 0};
    r.bytes = rng_.Range(1, std::min(b.bytes - r.offset, max_bytes));
    return r;
  };
  const size_t count = size_t(rng_.Range(1, 10));
  while (steps.size() < count) {
    SeqStepModel m;
    vyre_sequence_step st = VYRE_SEQUENCE_STEP_INIT;
    const uint64_t pick = rng_.Below(programs.empty() ? 4 : 6);
    if (pick == 0) {
      m.kind = VYRE_STEP_FILL;
      m.dst = byte_range(8192);
      m.fill = uint8_t(rng_.Bits());
      st.fill_byte = m.fill;
    } else if (pick == 1) {
      m.kind = VYRE_STEP_COPY;
      m.src = byte_range(8192);
      const BufferState* d = &pop_.buffers[rng_.Pick(buffers)];
      if (d->bytes < m.src.bytes) continue;
      m.dst = Range{d->handle.bits, rng_.Below(d->bytes - m.src.bytes + 1), m.src.bytes};
      if (Overlap(m.src, m.dst)) continue;  // refused; not what this step tests
      st.src_buffer.bits = m.src.buffer;
      st.src_offset = m.src.offset;
    } else if (pick == 2 || pick == 3) {
      m.kind = pick == 2 ? VYRE_STEP_UPLOAD : VYRE_STEP_DOWNLOAD;
      m.dst = byte_range(4096);
      m.host = std::make_shared<std::vector<uint8_t>>(m.dst.bytes, kPoisonByte);
      st.host_src = m.host->data();
      st.host_dst = m.host->data();
      model->host_steps = true;
    } else {
      m.kind = VYRE_STEP_DISPATCH;
      const ProgramState& p = *rng_.Pick(programs);
      m.kernel = p.kind;
      const uint64_t elements = rng_.Range(1, 600);
      bool found = true;
      for (size_t i = 0; i < p.decls.size() && found; ++i) {
        Range r;
        std::vector<Range> avoid = i == 2 ? m.bindings : std::vector<Range>{};
        found = RandomRange(context.bits, elements * 4, avoid, &r);
        m.bindings.push_back(r);
      }
      if (!found) continue;
      m.n = uint32_t(rng_.Range(1, elements));
      m.iterations = uint32_t(rng_.Range(1, 3));
      specs.push_back(std::make_unique<DispatchSpec>());
      DispatchSpec& d = *specs.back();
      for (const Range& r : m.bindings) {
        d.bindings.push_back(Resident(vyre_buffer{r.buffer}, r.offset, r.bytes));
      }
      d.param_words = {m.n};
      d.fixpoint_iterations = m.iterations;
      descs.push_back(std::make_unique<vyre_dispatch_desc>(d.Desc()));
      st.program = p.handle;
      st.dispatch = descs.back().get();
    }
    st.kind = m.kind;
    if (m.kind != VYRE_STEP_DISPATCH) {
      st.buffer.bits = m.dst.buffer;
      st.offset = m.dst.offset;
      st.bytes = m.dst.bytes;
    }
    steps.push_back(st);
    model->steps.push_back(std::move(m));
  }
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = steps.data();
  desc.step_count = steps.size();
  if (rng_.Chance(0.4)) {
    desc.repeat_first = rng_.Below(count);
    desc.repeat_step_count = rng_.Range(1, count - desc.repeat_first);
    desc.repeat_count = uint32_t(rng_.Range(1, 4));
  }
  // At most one malformation, with its exact status.
  vyre_status expected = VYRE_STATUS_OK;
  bool null_out = false;
  if (rng_.Chance(0.15)) {
    const size_t victim = rng_.Below(count);
    switch (rng_.Below(7)) {
      case 0: desc.step_count = 0; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
      case 1:
        if (desc.repeat_step_count > 0) {
          desc.repeat_count = 0;
          expected = VYRE_STATUS_INVALID_ARGUMENT;
        }
        break;
      case 2:
        if (!pop_.dead_buffers.empty() && steps[victim].kind != VYRE_STEP_DISPATCH) {
          steps[victim].buffer.bits = rng_.Pick(pop_.dead_buffers);
          expected = VYRE_STATUS_STALE_HANDLE;
        }
        break;
      case 3:
        if (steps[victim].kind == VYRE_STEP_DISPATCH) {
          vyre_dispatch_desc* d = const_cast<vyre_dispatch_desc*>(steps[victim].dispatch);
          if (rng_.Chance(0.5)) {
            d->flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
          } else {
            // A HOST binding: sequence steps bind resident buffers only.
            auto* b = const_cast<vyre_dispatch_binding*>(d->bindings);
            const Range& r = model->steps[victim].bindings[0];
            b[0] = HostIn(Scratch(), r.bytes);
            b[0].host_output = const_cast<uint8_t*>(Scratch());  // never written: refused
          }
          expected = VYRE_STATUS_INVALID_ARGUMENT;
        }
        break;
      case 4:
        if (steps[victim].kind != VYRE_STEP_DISPATCH) {
          const BufferState* b = LiveBuffer(steps[victim].buffer.bits);
          steps[victim].bytes = b->bytes - steps[victim].offset + rng_.Range(1, 64);
          expected = VYRE_STATUS_OUT_OF_RANGE;
        }
        break;
      case 5:
        steps[0].struct_size = uint32_t(rng_.Below(sizeof(vyre_sequence_step)));
        expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
        break;
      default: null_out = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
    }
  }
  vyre_sequence out{0};
  vyre_status s = Check(vyre_sequence_create(context, &desc, null_out ? nullptr : &out), call);
  ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK) return;
  if (expected != VYRE_STATUS_OK) {
    Check(vyre_sequence_destroy(out), "vyre_sequence_destroy");
    return;
  }
  for (size_t i = 0; i < desc.repeat_first; ++i) model->order.push_back(uint32_t(i));
  for (uint32_t r = 0; r < desc.repeat_count; ++r) {
    for (size_t i = 0; i < desc.repeat_step_count; ++i) {
      model->order.push_back(uint32_t(desc.repeat_first + i));
    }
  }
  for (size_t i = desc.repeat_first + desc.repeat_step_count; i < count; ++i) {
    model->order.push_back(uint32_t(i));
  }
  pop_.sequences.push_back(SequenceState{out, context.bits, std::move(model)});
}

void Torture::SequenceRun() {
  const char* call = "vyre_sequence_run";
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  WithTail<vyre_timing> timing{VYRE_TIMING_INIT, {}};
  bool well_formed = true;
  if (rng_.Chance(0.3)) RandomizeStructSize(&rng_, &timing, &well_formed);
  well_formed = well_formed || timing.value.struct_size > sizeof(vyre_timing);
  vyre_timing* timing_ptr = rng_.Chance(0.5) ? &timing.value : nullptr;
  if (choice != HandleChoice::kValid) {
    vyre_status s = Check(vyre_sequence_run(sequence, timing_ptr), call);
    ExpectNotOk(s, choice, call);
    ExpectHandleError(s, choice, call);
    return;
  }
  SeqModel& m = *pop_.sequences[size_t(index)].model;
  if (m.host_steps && m.busy_pending != 0) return;  // a replay's read-back owns the host memory
  vyre_status expected = VYRE_STATUS_OK;
  if (timing_ptr != nullptr && !well_formed) expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
  else if (!AllLive(SequenceRanges(m))) expected = VYRE_STATUS_STALE_HANDLE;
  RefreshSequenceHost(m, &rng_);
  PendingState before;
  for (const SeqStepModel& st : m.steps) {
    if (st.kind != VYRE_STEP_DOWNLOAD) continue;
    HostBinding h;
    h.memory = st.host;
    h.before = *st.host;
    before.host.push_back(std::move(h));
  }
  vyre_status s = Check(vyre_sequence_run(sequence, timing_ptr), call);
  ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK) {
    CheckHostOutputs(before, false, call);
    return;
  }
  Downloads downloads;
  ModelSequence(m, &downloads);
  PendingState result;
  result.host = SequenceOutputs(m, downloads);
  result.check_results = true;
  CheckHostOutputs(result, true, call);
  ++checked_sequence_runs_;
}

void Torture::SequenceRecord() {
  const char* call = "vyre_sequence_record";
  if (pop_.graphs.size() >= kMaxGraphs) {
    GraphDestroy();
    return;
  }
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  bool null_out = rng_.Chance(0.03);
  vyre_graph out{0};
  vyre_status s = Check(vyre_sequence_record(sequence, null_out ? nullptr : &out), call);
  ExpectNotOk(s, choice, call);
  if (null_out) {
    ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, call);
    return;
  }
  if (choice != HandleChoice::kValid) {
    ExpectHandleError(s, choice, call);
    return;
  }
  const SequenceState& q = pop_.sequences[size_t(index)];
  ExpectStatus(s, AllLive(SequenceRanges(*q.model)) ? VYRE_STATUS_OK : VYRE_STATUS_STALE_HANDLE,
               call);
  if (s != VYRE_STATUS_OK) return;
  GraphState g;
  g.handle = out;
  g.context = q.context;
  g.sequence = q.model;
  pop_.graphs.push_back(std::move(g));
}

void Torture::SequenceDestroy() {
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  vyre_status s = Check(vyre_sequence_destroy(sequence), "vyre_sequence_destroy");
  ExpectNotOk(s, choice, "vyre_sequence_destroy");
  if (choice == HandleChoice::kStale) {
    ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, "vyre_sequence_destroy");
  }
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_sequence_destroy");
  // Its graphs keep running it (and keep its model).
  ForgetSequence(size_t(index));
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
      case Op::kGraphRecord: GraphRecord(); break;
      case Op::kGraphReplay: GraphReplay(false); break;
      case Op::kGraphReplayAsync: GraphReplay(true); break;
      case Op::kGraphDestroy: GraphDestroy(); break;
      case Op::kGraphQuery: GraphQuery(); break;
      case Op::kSequenceCreate: SequenceCreate(); break;
      case Op::kSequenceRun: SequenceRun(); break;
      case Op::kSequenceRecord: SequenceRecord(); break;
      case Op::kSequenceDestroy: SequenceDestroy(); break;
      case Op::kCount: break;
    }
  }
}

void Torture::DestroyEverything() {
  // Destroy some graphs and sequences explicitly, leave the rest to context
  // destroy.
  for (size_t i = pop_.graphs.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_graph_destroy(pop_.graphs[i].handle), "vyre_graph_destroy"),
                   VYRE_STATUS_OK, "vyre_graph_destroy (teardown)");
      ForgetGraph(i);
    }
  }
  for (size_t i = pop_.sequences.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_sequence_destroy(pop_.sequences[i].handle), "vyre_sequence_destroy"),
                   VYRE_STATUS_OK, "vyre_sequence_destroy (teardown)");
      ForgetSequence(i);
    }
  }
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
  for (uint64_t bits : pop_.dead_graphs) {
    ExpectStatus(Check(vyre_graph_destroy(vyre_graph{bits}), "vyre_graph_destroy"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy (dead)");
  }
  for (uint64_t bits : pop_.dead_sequences) {
    ExpectStatus(Check(vyre_sequence_run(vyre_sequence{bits}, nullptr), "vyre_sequence_run"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_sequence_run (dead)");
  }
}

void Torture::PrintSummary() const {
  std::printf("[torture] %d operations, %" PRIu64 " dispatches checked against the CPU model, %" PRIu64
              " host output elements compared\n",
              op_index_, checked_dispatches_, checked_elements_);
  std::printf("[torture] %" PRIu64 " graph replays and %" PRIu64
              " sequence runs/replays checked against the CPU model\n",
              checked_graph_replays_, checked_sequence_runs_);
  for (const auto& [call, statuses] : histogram_) {
    std::printf("[torture]   %-30s", call.c_str());
    for (const auto& [name, count] : statuses) {
      std::printf(" %s=%d", name.c_str() + std::strlen("VYRE_STATUS_"), count);
    }
    std::printf("\n");
  }
}

// A fixed seed by default, so CI is reproducible; VYRE_TORTURE_SEED=<n>
// replays a run and VYRE_TORTURE_SEED=random explores new ones.
uint64_t SeedFromEnvironment() {
  constexpr uint64_t kDefaultSeed = 0x5EED2026112300ull;
  const char* text = std::getenv("VYRE_TORTURE_SEED");
  if (text == nullptr || *text == '\0') return kDefaultSeed;
  if (std::strcmp(text, "random") == 0) {
    std::random_device device;
    return (uint64_t{device()} << 32) | device();
  }
  return std::strtoull(text, nullptr, 0);
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
  EXPECT_EQ(after.graphs_live, before.graphs_live);
  EXPECT_EQ(after.graph_execs_live, before.graph_execs_live);
}

}  // namespace
}  // namespace vyre_test
