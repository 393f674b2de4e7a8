// The torture test's model: its randomness, the live and dead objects it
// holds, and the CPU shadows of resident buffers, pending host memory,
// graphs and sequences.
#ifndef VYRE_TESTS_UNIT_TORTURE_MODEL_H_
#define VYRE_TESTS_UNIT_TORTURE_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_test {
namespace torture {

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

void RememberDead(std::vector<uint64_t>* dead, uint64_t bits, Rng* rng);

// How a handle argument was chosen; only kValid may succeed.
enum class HandleChoice { kValid, kStale, kForged, kWrongType, kZero };

const char* ChoiceName(HandleChoice c);

// ---------------------------------------------------------------------------
// Sequences on the model
// ---------------------------------------------------------------------------

// What each DOWNLOAD step's host memory holds after a run (bytes and known
// flags), by step index.
using Downloads = std::map<size_t, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>;

bool Overlap(const Range& a, const Range& b);
// Every range a sequence's steps touch.
std::vector<Range> SequenceRanges(const SeqModel& m);
// Fresh UPLOAD data and poisoned DOWNLOAD memory before a run or replay.
void RefreshSequenceHost(const SeqModel& m, Rng* rng);

}  // namespace torture
}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_TORTURE_MODEL_H_
