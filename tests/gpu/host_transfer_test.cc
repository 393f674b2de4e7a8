// Host data at PCIe speed on a real GPU (issue 7): host (pageable) bindings,
// vyre_buffer_upload/download and their _ranges variants over 256 KiB go
// through the context's ring of pinned chunks; memory from vyre_host_alloc or
// vyre_host_register is copied by DMA in place.
//
// Every test uses fresh random non-zero data, poisons every output before the
// call and compares every element (or byte) with a CPU reference or a host
// model of the buffer. Sizes sit around the thresholds of the pipeline
// (src/runtime/staging_ring.h): the 256 KiB limit of the single-copy path, the
// piece size clamp(bytes / 4 rounded up to 64 KiB, 256 KiB, chunk) and the
// chunk size (default 8 MiB x 4 chunks), with the default ring and with small
// rings that wrap many times per transfer. Without a GPU every test skips
// (VYRE_CUDA_REQUIRE_GPU=1: fails).
//
// Names: cases of 2^26 and 2^28 bytes carry "2p26" / "2p28" and the 150
// large steady-state transfers "Large", so scripts/gpu-suite.sh --sanitize
// leaves them out of its compute-sanitizer run (hours at memcheck's speed).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * kKiB;
// Host bindings and copies up to this size take the single-copy path.
constexpr uint64_t kSingleCopyLimit = 256 * kKiB;
constexpr uint64_t kPageBytes = 4096;
constexpr uint8_t kPoisonByte = 0xFF;

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string SizeName(uint64_t bytes) {
  // 2^26 and larger powers of two read "2p26", "2p28": scripts/gpu-suite.sh
  // leaves those out of its compute-sanitizer run by name.
  for (int log2 = 26; log2 < 63; ++log2) {
    if (bytes == uint64_t{1} << log2) return "2p" + std::to_string(log2);
  }
  // Exact, and readable around the thresholds: "8MiB_plus_4", "256KiB_minus_4".
  const uint64_t units[] = {kMiB, kKiB};
  const char* names[] = {"MiB", "KiB"};
  for (int u = 0; u < 2; ++u) {
    const uint64_t unit = units[u];
    const uint64_t nearest = (bytes + unit / 2) / unit;
    if (nearest == 0) continue;
    const int64_t delta = static_cast<int64_t>(bytes) - static_cast<int64_t>(nearest * unit);
    if (delta > -1024 && delta < 1024) {
      std::string name = std::to_string(nearest) + names[u];
      if (delta > 0) name += "_plus_" + std::to_string(delta);
      if (delta < 0) name += "_minus_" + std::to_string(-delta);
      return name;
    }
  }
  return std::to_string(bytes) + "B";
}

// --- Staging rings -----------------------------------------------------------------

enum class Ring {
  kDefault,  // 4 x 8 MiB chunks, min(4, cores) threads (the descriptor's zeros)
  kSmall,    // 3 x 64 KiB chunks, 3 threads: 64 KiB pieces, the ring wraps constantly
  kTiny,     // 2 x 256 KiB chunks, 1 thread: the fewest chunks, only the caller copies
};

struct RingConfig {
  const char* name;
  uint64_t chunk_bytes;
  uint32_t chunk_count;
  uint32_t threads;
};

RingConfig ConfigOf(Ring ring) {
  switch (ring) {
    case Ring::kDefault: return {"DefaultRing", 0, 0, 0};
    case Ring::kSmall: return {"Small64KiBx3Ring", 64 * kKiB, 3, 3};
    case Ring::kTiny: return {"Tiny256KiBx2Ring1Thread", 256 * kKiB, 2, 1};
  }
  return {"Unknown", 0, 0, 0};
}

::testing::AssertionResult CreateContextWith(uint64_t chunk_bytes, uint32_t chunk_count,
                                             uint32_t threads, ContextHandle* out) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = 0;
  desc.staging_chunk_bytes = chunk_bytes;
  desc.staging_chunk_count = chunk_count;
  desc.staging_threads = threads;
  return StatusIs(vyre_context_create(&desc, out->out()), VYRE_STATUS_OK,
                  "vyre_context_create (staging ring)");
}

// gtest prints parameters by name.
void PrintTo(Ring ring, std::ostream* os) { *os << ConfigOf(ring).name; }

enum class Mode { kSync, kAsync };

const char* ModeName(Mode mode) { return mode == Mode::kSync ? "Sync" : "Async"; }
void PrintTo(Mode mode, std::ostream* os) { *os << ModeName(mode); }

// --- Data and checks -------------------------------------------------------------------

// Random bytes that are never 0 (an unwritten zeroed byte shows) nor 0xFF (the
// poison, so a byte never copied shows).
std::vector<uint8_t> RandomBytes(RandomSource& rng, size_t count) {
  std::vector<uint8_t> bytes(count);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const uint64_t bits = rng.engine()();
    std::memcpy(&bytes[i], &bits, 8);
  }
  for (; i < count; ++i) bytes[i] = static_cast<uint8_t>(rng.engine()());
  for (uint8_t& byte : bytes) {
    if (byte == 0 || byte == kPoisonByte) byte = 0x5A;
  }
  return bytes;
}

// Compares `count` bytes; names the first few differing offsets.
::testing::AssertionResult BytesEqual(const uint8_t* actual, const uint8_t* expected,
                                      size_t count, const std::string& what) {
  if (std::memcmp(actual, expected, count) == 0) return ::testing::AssertionSuccess();
  constexpr size_t kShown = 5;
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < count; ++i) {
    if (actual[i] != expected[i]) {
      if (mismatches < kShown) {
        first << "\n  [" << i << "] got 0x" << std::hex << unsigned{actual[i]} << " want 0x"
              << unsigned{expected[i]} << std::dec;
      }
      ++mismatches;
    }
  }
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << count
                                       << " bytes differ; first:" << first.str();
}

// out[i] == a[i] + b[i] for every i < n (a fast loop: sizes reach 2^26).
::testing::AssertionResult SumsMatch(const uint32_t* out, const uint32_t* a, const uint32_t* b,
                                     size_t n, const std::string& what) {
  constexpr size_t kShown = 5;
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t want = a[i] + b[i];
    if (out[i] != want) {
      if (mismatches < kShown) {
        first << "\n  [" << i << "] got 0x" << std::hex << out[i] << " want 0x" << want
              << std::dec;
      }
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << n
                                       << " elements differ from a + b; first:" << first.str();
}

std::vector<vyre_binding_decl> AddDecls() {
  return {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
          Decl(VYRE_ROLE_OUTPUT, 4, "out")};
}

::testing::AssertionResult CreateAdd(vyre_context context, ProgramHandle* out) {
  return CreateTestProgram(context, "vyre_test_add_u32", AddDecls(), 256, out);
}

// Runs `bindings` through `program` with parameter word n: vyre_dispatch, or
// vyre_dispatch_async + `after_enqueue` + wait + release.
::testing::AssertionResult RunDispatch(vyre_program program,
                                       const std::vector<vyre_dispatch_binding>& bindings,
                                       uint32_t n, Mode mode,
                                       const std::function<void()>& after_enqueue = {}) {
  const std::vector<uint32_t> params = {n};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  if (mode == Mode::kSync) {
    return StatusIs(vyre_dispatch(program, &desc, nullptr), VYRE_STATUS_OK, "vyre_dispatch");
  }
  PendingHandle pending;
  ::testing::AssertionResult enqueued = StatusIs(
      vyre_dispatch_async(program, &desc, pending.out()), VYRE_STATUS_OK, "vyre_dispatch_async");
  if (!enqueued) return enqueued;
  if (after_enqueue) after_enqueue();
  ::testing::AssertionResult waited =
      StatusIs(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER), VYRE_STATUS_OK,
               "vyre_pending_wait");
  if (!waited) return waited;
  return StatusIs(vyre_pending_release(pending.release()), VYRE_STATUS_OK,
                  "vyre_pending_release");
}

// Telemetry differences of one call.
struct Moved {
  uint64_t h2d_ops, h2d_bytes, d2h_ops, d2h_bytes;
};

Moved Delta(const vyre_telemetry& before, const vyre_telemetry& after) {
  return {after.h2d_operations - before.h2d_operations, after.h2d_bytes - before.h2d_bytes,
          after.d2h_operations - before.d2h_operations, after.d2h_bytes - before.d2h_bytes};
}

// --- Pinned host memory -------------------------------------------------------------------

enum class HostKind {
  kAllocated,   // vyre_host_alloc
  kRegistered,  // std::aligned_alloc + vyre_host_register
};

const char* HostKindName(HostKind kind) {
  return kind == HostKind::kAllocated ? "HostAlloc" : "HostRegister";
}
void PrintTo(HostKind kind, std::ostream* os) { *os << HostKindName(kind); }

// Page-locked memory the library knows, released (vyre_host_free, or
// vyre_host_unregister + free) when the block goes. Declare blocks after the
// context they are made on, so they are released first.
class PinnedBlock {
 public:
  PinnedBlock() = default;
  ~PinnedBlock() { Reset(); }
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;

  // `bytes` of `kind` memory on `context`. Registered memory is a page-aligned
  // allocation of whole pages, all of it registered (`register_bytes`, when
  // not 0, registers only that prefix).
  ::testing::AssertionResult Make(vyre_context context, HostKind kind, uint64_t bytes,
                                  uint64_t register_bytes = 0) {
    Reset();
    kind_ = kind;
    bytes_ = bytes;
    if (kind == HostKind::kAllocated) {
      void* pointer = nullptr;
      ::testing::AssertionResult made =
          StatusIs(vyre_host_alloc(context, bytes, &pointer), VYRE_STATUS_OK, "vyre_host_alloc");
      if (!made) return made;
      if (pointer == nullptr || reinterpret_cast<uintptr_t>(pointer) % kPageBytes != 0) {
        return ::testing::AssertionFailure()
               << "vyre_host_alloc returned " << pointer << ", not 4 KiB aligned";
      }
      data_ = static_cast<uint8_t*>(pointer);
      library_owned_ = true;
      return ::testing::AssertionSuccess();
    }
    const uint64_t rounded = RoundUp(bytes, kPageBytes);
    backing_ = std::aligned_alloc(kPageBytes, rounded);
    if (backing_ == nullptr) {
      return ::testing::AssertionFailure() << "aligned_alloc of " << rounded << " bytes failed";
    }
    data_ = static_cast<uint8_t*>(backing_);
    const uint64_t registered = register_bytes ? register_bytes : rounded;
    ::testing::AssertionResult made = StatusIs(vyre_host_register(context, data_, registered),
                                               VYRE_STATUS_OK, "vyre_host_register");
    if (!made) {
      std::free(backing_);
      backing_ = nullptr;
      data_ = nullptr;
      return made;
    }
    library_owned_ = true;
    return ::testing::AssertionSuccess();
  }

  // vyre_host_free / vyre_host_unregister now (the status is the caller's to
  // check); the block no longer releases it. Registered memory stays
  // allocated until the block goes.
  vyre_status ReleaseToLibrary() {
    const vyre_status status =
        kind_ == HostKind::kAllocated ? vyre_host_free(data_) : vyre_host_unregister(data_);
    if (status == VYRE_STATUS_OK) {
      library_owned_ = false;
      if (kind_ == HostKind::kAllocated) data_ = nullptr;
    }
    return status;
  }

  void Reset() {
    if (library_owned_) {
      EXPECT_VYRE_OK(ReleaseToLibrary()) << "releasing a pinned block";
    }
    library_owned_ = false;
    std::free(backing_);
    backing_ = nullptr;
    data_ = nullptr;
  }

  uint8_t* bytes() const { return data_; }
  uint32_t* u32() const { return reinterpret_cast<uint32_t*>(data_); }
  uint64_t size() const { return bytes_; }

 private:
  HostKind kind_ = HostKind::kAllocated;
  uint64_t bytes_ = 0;
  uint8_t* data_ = nullptr;
  void* backing_ = nullptr;  // registered memory: ours to free
  bool library_owned_ = false;
};

void FillRandomU32(RandomSource& rng, uint32_t* out, size_t count) {
  const std::vector<uint32_t> values = rng.NonZeroU32(count);
  std::memcpy(out, values.data(), count * sizeof(uint32_t));
}

void PoisonU32(uint32_t* out, size_t count) { std::fill(out, out + count, kPoisonU32); }

// --- The fixture -------------------------------------------------------------------------

class HostTransferTest : public GpuTest {
 protected:
  // The fixture's context for the default ring; otherwise a context of the
  // test's own with that ring (made once per test).
  ::testing::AssertionResult ContextFor(Ring ring, vyre_context* out) {
    if (ring == Ring::kDefault) {
      *out = context();
      return ::testing::AssertionSuccess();
    }
    if (!ring_context_.valid() || ring_ != ring) {
      const RingConfig config = ConfigOf(ring);
      ::testing::AssertionResult made = CreateContextWith(
          config.chunk_bytes, config.chunk_count, config.threads, &ring_context_);
      if (!made) return made;
      ring_ = ring;
    }
    *out = ring_context_.get();
    return ::testing::AssertionSuccess();
  }

 private:
  ContextHandle ring_context_;
  Ring ring_ = Ring::kDefault;
};

// ---------------------------------------------------------------------------------------
// Host dispatch at sizes around every threshold
// ---------------------------------------------------------------------------------------

// Bytes per binding (all multiples of the 4-byte element).
const uint64_t kSizes[] = {
    kSingleCopyLimit - 4,  // the last single-copy size
    kSingleCopyLimit,      // still single-copy (the limit is inclusive)
    kSingleCopyLimit + 4,  // the first ring size: one 256 KiB piece and 4 bytes
    1 * kMiB + 4,          // pieces of 320 KiB (default ring): 3 full and a short one
    8 * kMiB - 4,          // 4 pieces of 2 MiB, the last 4 bytes short
    8 * kMiB,              // one default chunk exactly
    8 * kMiB + 4,          // just past it: the last piece is 4 bytes
    32 * kMiB,             // the default ring exactly (4 chunks of 8 MiB)
    32 * kMiB + 4,         // the ring wraps for a 4-byte fifth piece
    uint64_t{1} << 26,     // 64 MiB: the ring cycles twice
};

class HostDispatchSizeTest
    : public HostTransferTest,
      public ::testing::WithParamInterface<std::tuple<uint64_t, Ring, Mode>> {};

TEST_P(HostDispatchSizeTest, VectorAddEveryElementMatchesCpu) {
  const uint64_t bytes = std::get<0>(GetParam());
  const Ring ring = std::get<1>(GetParam());
  const Mode mode = std::get<2>(GetParam());
  const size_t n = bytes / sizeof(uint32_t);
  vyre_context ctx{};
  ASSERT_TRUE(ContextFor(ring, &ctx));
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(ctx, &add));

  std::vector<uint32_t> a = rng().NonZeroU32(n);
  std::vector<uint32_t> b = rng().NonZeroU32(n);
  const std::vector<uint32_t> a0 = a, b0 = b;  // the reference
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a.data(), bytes), HostIn(b.data(), bytes), HostOut(out.data(), bytes)};

  const vyre_telemetry before = Telemetry(ctx);
  // Asynchronous: host inputs are copied before vyre_dispatch_async returns,
  // so overwriting them at once must not change the result.
  ASSERT_TRUE(RunDispatch(add.get(), bindings, static_cast<uint32_t>(n), mode, [&] {
    std::fill(a.begin(), a.end(), 0x13579BDFu);
    std::fill(b.begin(), b.end(), 0x02468ACEu);
  }));
  const vyre_telemetry after = Telemetry(ctx);
  EXPECT_TRUE(SumsMatch(out.data(), a0.data(), b0.data(), n, "host dispatch"));

  const Moved moved = Delta(before, after);
  EXPECT_GE(moved.h2d_bytes, 2 * bytes) << "both inputs reach the device";
  EXPECT_GE(moved.d2h_bytes, bytes) << "the output comes back";
  EXPECT_EQ(after.dispatches - before.dispatches, 1u);
  EXPECT_EQ(after.live_pendings, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    AroundThresholds, HostDispatchSizeTest,
    ::testing::Combine(::testing::ValuesIn(kSizes),
                       ::testing::Values(Ring::kDefault, Ring::kSmall, Ring::kTiny),
                       ::testing::Values(Mode::kSync, Mode::kAsync)),
    [](const ::testing::TestParamInfo<std::tuple<uint64_t, Ring, Mode>>& info) {
      return SizeName(std::get<0>(info.param)) + "_" + ConfigOf(std::get<1>(info.param)).name +
             "_" + ModeName(std::get<2>(info.param));
    });

// An INPUT_OUTPUT host binding goes down and comes back through the ring,
// from and into the same array.
TEST_F(HostTransferTest, HostInputOutputThroughTheRing) {
  for (const Ring ring : {Ring::kDefault, Ring::kSmall, Ring::kTiny}) {
    vyre_context ctx{};
    ASSERT_TRUE(ContextFor(ring, &ctx));
    ProgramHandle inc;
    ASSERT_TRUE(CreateTestProgram(ctx, "vyre_test_inc_u32",
                                  {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &inc));
    for (const uint64_t bytes : {kSingleCopyLimit + 4, 8 * kMiB + 4, 32 * kMiB + 4}) {
      for (const Mode mode : {Mode::kSync, Mode::kAsync}) {
        SCOPED_TRACE(std::string(ConfigOf(ring).name) + " " + SizeName(bytes) + " " +
                     ModeName(mode));
        const size_t n = bytes / 4;
        const std::vector<uint32_t> initial = rng().NonZeroU32(n);
        std::vector<uint32_t> data = initial;
        ASSERT_TRUE(RunDispatch(inc.get(), {HostInOut(data.data(), bytes)},
                                static_cast<uint32_t>(n), mode));
        EXPECT_TRUE(AllElementsEqual(data, [&](size_t i) { return initial[i] + 1u; },
                                     "data + 1"));
      }
    }
  }
}

// Only the declared read-back range of a large host output is written, in
// pageable (through the ring) and pinned (in place) memory; the rest keeps
// the caller's bytes.
TEST_F(HostTransferTest, OutputReadBackRangeThroughTheRing) {
  const uint64_t bytes = 8 * kMiB + 4;
  const size_t n = bytes / 4;
  const uint64_t range_offset = 4 * 12345;          // element 12345
  const uint64_t range_length = 3 * kMiB + 4 * 7;   // over several pieces
  std::vector<vyre_binding_decl> decls = AddDecls();
  decls[2].output_offset = range_offset;
  decls[2].output_length = range_length;
  const size_t first = range_offset / 4, last = (range_offset + range_length) / 4;

  for (const Ring ring : {Ring::kDefault, Ring::kSmall}) {
    vyre_context ctx{};
    ASSERT_TRUE(ContextFor(ring, &ctx));
    ProgramHandle add;
    ASSERT_TRUE(CreateTestProgram(ctx, "vyre_test_add_u32", decls, 256, &add));
    const std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n);
    for (const bool pinned_out : {false, true}) {
      for (const Mode mode : {Mode::kSync, Mode::kAsync}) {
        SCOPED_TRACE(std::string(ConfigOf(ring).name) + (pinned_out ? " pinned" : " pageable") +
                     " output, " + ModeName(mode));
        std::vector<uint32_t> pageable;
        PinnedBlock pinned;
        uint32_t* out = nullptr;
        if (pinned_out) {
          ASSERT_TRUE(pinned.Make(ctx, HostKind::kAllocated, bytes));
          out = pinned.u32();
        } else {
          pageable.assign(n, kPoisonU32);
          out = pageable.data();
        }
        PoisonU32(out, n);
        ASSERT_TRUE(RunDispatch(
            add.get(), {HostIn(a.data(), bytes), HostIn(b.data(), bytes), HostOut(out, bytes)},
            static_cast<uint32_t>(n), mode));
        size_t wrong = 0;
        size_t first_wrong = n;
        for (size_t i = 0; i < n; ++i) {
          const uint32_t want = (i >= first && i < last) ? a[i] + b[i] : kPoisonU32;
          if (out[i] != want) {
            if (wrong++ == 0) first_wrong = i;
          }
        }
        EXPECT_EQ(wrong, 0u) << "first wrong element " << first_wrong << " (read-back range ["
                             << first << ", " << last << "))";
      }
    }
  }
}

// 2^28 bytes per binding: 768 MiB of host data each way and on the device.
class HugeHostDispatchTest : public HostTransferTest,
                             public ::testing::WithParamInterface<std::tuple<Ring, Mode>> {};

TEST_P(HugeHostDispatchTest, Bytes2p28PerBinding) {
  const Ring ring = std::get<0>(GetParam());
  const Mode mode = std::get<1>(GetParam());
  constexpr uint64_t kBytes = uint64_t{1} << 28;
  constexpr size_t kCount = kBytes / sizeof(uint32_t);
  // The three bindings live in one device slab; leave room for the context,
  // the module and the pools.
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(context(), &info));
  const uint64_t needed = 3 * kBytes + 512 * kMiB;
  if (info.total_memory_bytes < needed) {
    VYRE_GPU_SKIP_OR_FAIL(std::string(info.name) + " has " +
                          std::to_string(info.total_memory_bytes >> 20) +
                          " MiB of device memory; 3 bindings of 256 MiB need about " +
                          std::to_string(needed >> 20) + " MiB");
  }
  vyre_context ctx{};
  ASSERT_TRUE(ContextFor(ring, &ctx));
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(ctx, &add));

  const std::vector<uint32_t> a = rng().NonZeroU32(kCount);
  const std::vector<uint32_t> b = rng().NonZeroU32(kCount);
  std::vector<uint32_t> out(kCount, kPoisonU32);
  ASSERT_TRUE(RunDispatch(add.get(),
                          {HostIn(a.data(), kBytes), HostIn(b.data(), kBytes),
                           HostOut(out.data(), kBytes)},
                          static_cast<uint32_t>(kCount), mode));
  EXPECT_TRUE(SumsMatch(out.data(), a.data(), b.data(), kCount, "2^28-byte host dispatch"));

  // The same bytes through vyre_buffer_upload / vyre_buffer_download.
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(ctx, kBytes, buffer.out()));
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, a.data(), kBytes));
  PoisonU32(out.data(), kCount);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, out.data(), kBytes));
  EXPECT_TRUE(BytesEqual(reinterpret_cast<const uint8_t*>(out.data()),
                         reinterpret_cast<const uint8_t*>(a.data()), kBytes,
                         "2^28-byte upload then download"));
}

INSTANTIATE_TEST_SUITE_P(
    Rings, HugeHostDispatchTest,
    ::testing::Combine(::testing::Values(Ring::kDefault, Ring::kSmall),
                       ::testing::Values(Mode::kSync, Mode::kAsync)),
    [](const ::testing::TestParamInfo<std::tuple<Ring, Mode>>& info) {
      return std::string(ConfigOf(std::get<0>(info.param)).name) + "_" +
             ModeName(std::get<1>(info.param));
    });

// ---------------------------------------------------------------------------------------
// vyre_buffer_upload / download and the _ranges variants against a host model
// ---------------------------------------------------------------------------------------

class BufferTransferTest : public HostTransferTest,
                           public ::testing::WithParamInterface<std::tuple<uint64_t, Ring>> {
 protected:
  // Downloads [offset, offset + bytes) into poisoned memory and compares it
  // with the model.
  ::testing::AssertionResult DownloadMatchesModel(vyre_buffer buffer,
                                                  const std::vector<uint8_t>& model,
                                                  uint64_t offset, uint64_t bytes,
                                                  const std::string& what) {
    std::vector<uint8_t> got(bytes, kPoisonByte);
    ::testing::AssertionResult downloaded =
        StatusIs(vyre_buffer_download(buffer, offset, got.data(), bytes), VYRE_STATUS_OK,
                 "vyre_buffer_download");
    if (!downloaded) return downloaded;
    return BytesEqual(got.data(), model.data() + offset, bytes,
                      what + " [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ")");
  }
};

// A random length in [1, limit], about half of them at least 256 KiB when the
// limit allows (the ring path), the rest anywhere.
uint64_t RandomLength(RandomSource& rng, uint64_t limit) {
  if (limit <= 1) return limit;
  if (limit > kSingleCopyLimit && rng.Below(2) == 0) {
    return kSingleCopyLimit + 1 + rng.Below(limit - kSingleCopyLimit);
  }
  return 1 + rng.Below(limit);
}

TEST_P(BufferTransferTest, UploadAndDownloadAtRandomOffsets) {
  const uint64_t bytes = std::get<0>(GetParam());
  const Ring ring = std::get<1>(GetParam());
  vyre_context ctx{};
  ASSERT_TRUE(ContextFor(ring, &ctx));
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(ctx, bytes, buffer.out()));

  // The whole buffer at once.
  std::vector<uint8_t> model = RandomBytes(rng(), bytes);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, model.data(), bytes));
  ASSERT_TRUE(DownloadMatchesModel(buffer.get(), model, 0, bytes, "whole buffer"));

  // Random (unaligned) ranges: upload, then download another random range.
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t offset = rng().Below(bytes);
    const uint64_t length = RandomLength(rng(), bytes - offset);
    const std::vector<uint8_t> piece = RandomBytes(rng(), length);
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), offset, piece.data(), length))
        << "round " << round << ": [" << offset << ", +" << length << ")";
    std::memcpy(model.data() + offset, piece.data(), length);
    ASSERT_TRUE(DownloadMatchesModel(buffer.get(), model, offset, length, "the range uploaded"));
    const uint64_t read_offset = rng().Below(bytes);
    const uint64_t read_length = RandomLength(rng(), bytes - read_offset);
    ASSERT_TRUE(DownloadMatchesModel(buffer.get(), model, read_offset, read_length,
                                     "a random range"));
  }
  // Nothing outside the ranges changed.
  ASSERT_TRUE(DownloadMatchesModel(buffer.get(), model, 0, bytes, "whole buffer at the end"));
}

// `count` disjoint ranges inside [0, bytes), in random order, some of them
// possibly empty.
std::vector<std::pair<uint64_t, uint64_t>> RandomDisjointRanges(RandomSource& rng,
                                                                 uint64_t bytes, size_t count) {
  std::vector<uint64_t> cuts(2 * count);
  for (uint64_t& cut : cuts) cut = rng.Below(bytes + 1);
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (offset, length)
  for (size_t i = 0; i < count; ++i) {
    ranges.emplace_back(cuts[2 * i], cuts[2 * i + 1] - cuts[2 * i]);
  }
  std::shuffle(ranges.begin(), ranges.end(), rng.engine());
  return ranges;
}

TEST_P(BufferTransferTest, UploadRangesAndDownloadRanges) {
  const uint64_t bytes = std::get<0>(GetParam());
  const Ring ring = std::get<1>(GetParam());
  vyre_context ctx{};
  ASSERT_TRUE(ContextFor(ring, &ctx));
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(ctx, bytes, buffer.out()));
  std::vector<uint8_t> model = RandomBytes(rng(), bytes);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, model.data(), bytes));

  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const size_t count = 1 + rng().Below(6);
    // Upload: each range from its own host array, plus an empty range.
    const auto up = RandomDisjointRanges(rng(), bytes, count);
    std::vector<std::vector<uint8_t>> sources;
    std::vector<vyre_upload_range> upload;
    for (const auto& [offset, length] : up) {
      sources.push_back(RandomBytes(rng(), length));
      upload.push_back({offset, length, sources.back().data()});
    }
    const uint8_t unused = 0x5A;
    upload.push_back({rng().Below(bytes + 1), 0, &unused});
    ASSERT_VYRE_OK(vyre_buffer_upload_ranges(buffer.get(), upload.data(), upload.size()));
    for (size_t i = 0; i < up.size(); ++i) {
      std::memcpy(model.data() + up[i].first, sources[i].data(), up[i].second);
    }
    // Download other ranges (disjoint host arrays; the device ranges may overlap).
    const auto down_a = RandomDisjointRanges(rng(), bytes, 1 + rng().Below(3));
    const auto down_b = RandomDisjointRanges(rng(), bytes, 1 + rng().Below(3));
    std::vector<std::pair<uint64_t, uint64_t>> down = down_a;
    down.insert(down.end(), down_b.begin(), down_b.end());
    down.insert(down.end(), up.begin(), up.end());  // and what was just uploaded
    std::vector<std::vector<uint8_t>> targets;
    std::vector<vyre_download_range> download;
    for (const auto& [offset, length] : down) {
      targets.emplace_back(length, kPoisonByte);
    }
    for (size_t i = 0; i < down.size(); ++i) {
      download.push_back({down[i].first, down[i].second, targets[i].data()});
    }
    ASSERT_VYRE_OK(
        vyre_buffer_download_ranges(buffer.get(), download.data(), download.size()));
    for (size_t i = 0; i < down.size(); ++i) {
      EXPECT_TRUE(BytesEqual(targets[i].data(), model.data() + down[i].first, down[i].second,
                             "download range " + std::to_string(i) + " [" +
                                 std::to_string(down[i].first) + ", +" +
                                 std::to_string(down[i].second) + ")"));
    }
  }
  ASSERT_TRUE(DownloadMatchesModel(buffer.get(), model, 0, bytes, "whole buffer at the end"));
}

INSTANTIATE_TEST_SUITE_P(
    AroundThresholds, BufferTransferTest,
    ::testing::Combine(::testing::ValuesIn(kSizes),
                       ::testing::Values(Ring::kDefault, Ring::kSmall, Ring::kTiny)),
    [](const ::testing::TestParamInfo<std::tuple<uint64_t, Ring>>& info) {
      return SizeName(std::get<0>(info.param)) + "_" + ConfigOf(std::get<1>(info.param)).name;
    });

// ---------------------------------------------------------------------------------------
// Pinned and registered host memory
// ---------------------------------------------------------------------------------------

// 4 MiB + 4 per binding: through the default ring that is 4 pieces per
// binding (1 MiB + 64 KiB each), so a pageable binding costs several copies
// where a pinned one costs one.
constexpr uint64_t kPinnedBytes = 4 * kMiB + 4;
constexpr size_t kPinnedCount = kPinnedBytes / 4;

class PinnedDispatchTest : public HostTransferTest,
                           public ::testing::WithParamInterface<std::tuple<HostKind, Mode>> {};

TEST_P(PinnedDispatchTest, PinnedBindingsAreOneDmaEach) {
  const HostKind kind = std::get<0>(GetParam());
  const Mode mode = std::get<1>(GetParam());
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(context(), &add));
  const uint32_t n = static_cast<uint32_t>(kPinnedCount);

  // Pageable first: it also leaves the parameter words cached, so the counts
  // below are the bindings' copies alone.
  std::vector<uint32_t> a = rng().NonZeroU32(kPinnedCount), b = rng().NonZeroU32(kPinnedCount);
  std::vector<uint32_t> out(kPinnedCount, kPoisonU32);
  const std::vector<vyre_dispatch_binding> pageable = {HostIn(a.data(), kPinnedBytes),
                                                       HostIn(b.data(), kPinnedBytes),
                                                       HostOut(out.data(), kPinnedBytes)};
  ASSERT_TRUE(RunDispatch(add.get(), pageable, n, mode));
  ASSERT_TRUE(SumsMatch(out.data(), a.data(), b.data(), kPinnedCount, "pageable (warm-up)"));
  PoisonU32(out.data(), kPinnedCount);
  vyre_telemetry before = Telemetry(context());
  ASSERT_TRUE(RunDispatch(add.get(), pageable, n, mode));
  const Moved pageable_moved = Delta(before, Telemetry(context()));
  EXPECT_TRUE(SumsMatch(out.data(), a.data(), b.data(), kPinnedCount, "pageable"));

  PinnedBlock pa, pb, pout;
  ASSERT_TRUE(pa.Make(context(), kind, kPinnedBytes));
  ASSERT_TRUE(pb.Make(context(), kind, kPinnedBytes));
  ASSERT_TRUE(pout.Make(context(), kind, kPinnedBytes));
  FillRandomU32(rng(), pa.u32(), kPinnedCount);
  FillRandomU32(rng(), pb.u32(), kPinnedCount);
  PoisonU32(pout.u32(), kPinnedCount);
  const std::vector<vyre_dispatch_binding> pinned = {HostIn(pa.u32(), kPinnedBytes),
                                                     HostIn(pb.u32(), kPinnedBytes),
                                                     HostOut(pout.u32(), kPinnedBytes)};
  before = Telemetry(context());
  ASSERT_TRUE(RunDispatch(add.get(), pinned, n, mode));
  const vyre_telemetry after = Telemetry(context());
  const Moved pinned_moved = Delta(before, after);
  EXPECT_TRUE(SumsMatch(pout.u32(), pa.u32(), pb.u32(), kPinnedCount, "pinned"));

  EXPECT_EQ(pinned_moved.h2d_ops, 2u) << "one DMA per pinned input";
  EXPECT_EQ(pinned_moved.d2h_ops, 1u) << "one DMA for the pinned output";
  EXPECT_EQ(pinned_moved.h2d_bytes, 2 * kPinnedBytes);
  EXPECT_EQ(pinned_moved.d2h_bytes, kPinnedBytes);
  EXPECT_GE(pageable_moved.h2d_ops, 4u) << "pageable inputs go through the ring in pieces";
  EXPECT_GE(pageable_moved.d2h_ops, 2u) << "a pageable output comes back in pieces";
  EXPECT_EQ(pageable_moved.h2d_bytes, 2 * kPinnedBytes);
  EXPECT_EQ(pageable_moved.d2h_bytes, kPinnedBytes);
  EXPECT_EQ(after.live_pendings, 0u);

  // Again with new data in the same memory: nothing was left stale.
  FillRandomU32(rng(), pa.u32(), kPinnedCount);
  FillRandomU32(rng(), pb.u32(), kPinnedCount);
  PoisonU32(pout.u32(), kPinnedCount);
  ASSERT_TRUE(RunDispatch(add.get(), pinned, n, mode));
  EXPECT_TRUE(SumsMatch(pout.u32(), pa.u32(), pb.u32(), kPinnedCount, "pinned, second time"));
}

// Pinned and pageable bindings in one dispatch, both ways round; and three
// bindings inside one pinned region.
TEST_P(PinnedDispatchTest, MixedAndSharedRegions) {
  const HostKind kind = std::get<0>(GetParam());
  const Mode mode = std::get<1>(GetParam());
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(context(), &add));
  const uint32_t n = static_cast<uint32_t>(kPinnedCount);
  std::vector<uint32_t> warm_a = rng().NonZeroU32(kPinnedCount), warm_b = warm_a;
  std::vector<uint32_t> warm_out(kPinnedCount);
  ASSERT_TRUE(RunDispatch(add.get(),
                          {HostIn(warm_a.data(), kPinnedBytes), HostIn(warm_b.data(), kPinnedBytes),
                           HostOut(warm_out.data(), kPinnedBytes)},
                          n, mode));  // caches the parameter words

  PinnedBlock p1, p2;
  ASSERT_TRUE(p1.Make(context(), kind, kPinnedBytes));
  ASSERT_TRUE(p2.Make(context(), kind, kPinnedBytes));
  std::vector<uint32_t> q1 = rng().NonZeroU32(kPinnedCount);
  std::vector<uint32_t> q2(kPinnedCount, kPoisonU32);

  {
    SCOPED_TRACE("a pinned, b pageable, out pinned");
    FillRandomU32(rng(), p1.u32(), kPinnedCount);
    PoisonU32(p2.u32(), kPinnedCount);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_TRUE(RunDispatch(add.get(),
                            {HostIn(p1.u32(), kPinnedBytes), HostIn(q1.data(), kPinnedBytes),
                             HostOut(p2.u32(), kPinnedBytes)},
                            n, mode));
    const Moved moved = Delta(before, Telemetry(context()));
    EXPECT_TRUE(SumsMatch(p2.u32(), p1.u32(), q1.data(), kPinnedCount, "mixed"));
    EXPECT_GE(moved.h2d_ops, 1u + 2u) << "a: one DMA; b: pieces";
    EXPECT_EQ(moved.d2h_ops, 1u) << "out: one DMA";
  }
  {
    SCOPED_TRACE("a pageable, b pinned, out pageable");
    FillRandomU32(rng(), p1.u32(), kPinnedCount);
    const std::vector<uint32_t> q1_new = rng().NonZeroU32(kPinnedCount);
    q1 = q1_new;
    ASSERT_TRUE(RunDispatch(add.get(),
                            {HostIn(q1.data(), kPinnedBytes), HostIn(p1.u32(), kPinnedBytes),
                             HostOut(q2.data(), kPinnedBytes)},
                            n, mode));
    EXPECT_TRUE(SumsMatch(q2.data(), q1.data(), p1.u32(), kPinnedCount, "mixed"));
  }
  {
    SCOPED_TRACE("a, b and out inside one pinned region, at unaligned-to-page offsets");
    const uint64_t stride = kPinnedBytes + 256 + 4;
    PinnedBlock region;
    ASSERT_TRUE(region.Make(context(), kind, 64 + 3 * stride));
    uint32_t* ra = reinterpret_cast<uint32_t*>(region.bytes() + 64);
    uint32_t* rb = reinterpret_cast<uint32_t*>(region.bytes() + 64 + stride);
    uint32_t* rout = reinterpret_cast<uint32_t*>(region.bytes() + 64 + 2 * stride);
    FillRandomU32(rng(), ra, kPinnedCount);
    FillRandomU32(rng(), rb, kPinnedCount);
    PoisonU32(rout, kPinnedCount);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_TRUE(RunDispatch(
        add.get(),
        {HostIn(ra, kPinnedBytes), HostIn(rb, kPinnedBytes), HostOut(rout, kPinnedBytes)}, n,
        mode));
    const Moved moved = Delta(before, Telemetry(context()));
    EXPECT_TRUE(SumsMatch(rout, ra, rb, kPinnedCount, "one region"));
    EXPECT_EQ(moved.h2d_ops, 2u);
    EXPECT_EQ(moved.d2h_ops, 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PinnedDispatchTest,
    ::testing::Combine(::testing::Values(HostKind::kAllocated, HostKind::kRegistered),
                       ::testing::Values(Mode::kSync, Mode::kAsync)),
    [](const ::testing::TestParamInfo<std::tuple<HostKind, Mode>>& info) {
      return std::string(HostKindName(std::get<0>(info.param))) + "_" +
             ModeName(std::get<1>(info.param));
    });

// A binding that starts in registered memory but runs past its end is not
// "inside" it: it is staged through the ring, and still right.
TEST_F(HostTransferTest, BindingRunningPastARegisteredRangeIsStaged) {
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(context(), &add));
  const uint64_t bytes = 4 * kMiB;  // whole pages
  const size_t n = bytes / 4;
  PinnedBlock half_registered;
  ASSERT_TRUE(half_registered.Make(context(), HostKind::kRegistered, bytes, bytes / 2));
  FillRandomU32(rng(), half_registered.u32(), n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(half_registered.u32(), bytes), HostIn(b.data(), bytes), HostOut(out.data(), bytes)};
  ASSERT_TRUE(RunDispatch(add.get(), bindings, static_cast<uint32_t>(n), Mode::kSync));
  PoisonU32(out.data(), n);
  const vyre_telemetry before = Telemetry(context());
  ASSERT_TRUE(RunDispatch(add.get(), bindings, static_cast<uint32_t>(n), Mode::kSync));
  const Moved moved = Delta(before, Telemetry(context()));
  EXPECT_TRUE(SumsMatch(out.data(), half_registered.u32(), b.data(), n, "half-registered a"));
  EXPECT_GE(moved.h2d_ops, 4u) << "both inputs staged in pieces";

  // Uploads likewise.
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), bytes, buffer.out()));
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, half_registered.bytes(), bytes));
  std::vector<uint8_t> got(bytes, kPoisonByte);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, got.data(), bytes));
  EXPECT_TRUE(BytesEqual(got.data(), half_registered.bytes(), bytes, "half-registered upload"));
}

class PinnedBufferTest : public HostTransferTest,
                         public ::testing::WithParamInterface<HostKind> {};

// Uploads from and downloads into pinned memory are one DMA per range, for
// whole buffers, offsets and ranges; small ones (single-copy path) are right too.
TEST_P(PinnedBufferTest, UploadsAndDownloadsAreOneDmaPerRange) {
  const HostKind kind = GetParam();
  const uint64_t bytes = 16 * kMiB + 12;
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), bytes, buffer.out()));
  PinnedBlock source, target;
  ASSERT_TRUE(source.Make(context(), kind, bytes));
  ASSERT_TRUE(target.Make(context(), kind, bytes));
  const std::vector<uint8_t> data = RandomBytes(rng(), bytes);
  std::memcpy(source.bytes(), data.data(), bytes);
  std::vector<uint8_t> model = data;

  {
    SCOPED_TRACE("whole buffer");
    vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, source.bytes(), bytes));
    Moved moved = Delta(before, Telemetry(context()));
    EXPECT_EQ(moved.h2d_ops, 1u);
    EXPECT_EQ(moved.h2d_bytes, bytes);
    std::memset(target.bytes(), kPoisonByte, bytes);
    before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, target.bytes(), bytes));
    moved = Delta(before, Telemetry(context()));
    EXPECT_EQ(moved.d2h_ops, 1u);
    EXPECT_EQ(moved.d2h_bytes, bytes);
    EXPECT_TRUE(BytesEqual(target.bytes(), model.data(), bytes, "pinned round trip"));
  }
  {
    SCOPED_TRACE("pageable, for comparison");
    std::vector<uint8_t> got(bytes, kPoisonByte);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, got.data(), bytes));
    const Moved moved = Delta(before, Telemetry(context()));
    EXPECT_GE(moved.d2h_ops, 2u) << "a pageable download goes through the ring in pieces";
    EXPECT_TRUE(BytesEqual(got.data(), model.data(), bytes, "pageable download"));
  }
  {
    SCOPED_TRACE("random offsets, from and into the middle of the pinned memory");
    for (int round = 0; round < 6; ++round) {
      const uint64_t offset = rng().Below(bytes);
      const uint64_t length = RandomLength(rng(), bytes - offset);
      const uint64_t host_at = rng().Below(bytes - length + 1);
      const std::vector<uint8_t> piece = RandomBytes(rng(), length);
      std::memcpy(source.bytes() + host_at, piece.data(), length);
      vyre_telemetry before = Telemetry(context());
      ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), offset, source.bytes() + host_at, length));
      Moved moved = Delta(before, Telemetry(context()));
      EXPECT_EQ(moved.h2d_ops, 1u) << "[" << offset << ", +" << length << ")";
      std::memcpy(model.data() + offset, piece.data(), length);

      const uint64_t read_offset = rng().Below(bytes);
      const uint64_t read_length = RandomLength(rng(), bytes - read_offset);
      const uint64_t read_at = rng().Below(bytes - read_length + 1);
      std::memset(target.bytes(), kPoisonByte, bytes);
      before = Telemetry(context());
      ASSERT_VYRE_OK(
          vyre_buffer_download(buffer.get(), read_offset, target.bytes() + read_at, read_length));
      moved = Delta(before, Telemetry(context()));
      EXPECT_EQ(moved.d2h_ops, 1u) << "[" << read_offset << ", +" << read_length << ")";
      EXPECT_TRUE(BytesEqual(target.bytes() + read_at, model.data() + read_offset, read_length,
                             "pinned range"));
      // Nothing written outside the range.
      const bool outside_clean =
          std::all_of(target.bytes(), target.bytes() + read_at,
                      [](uint8_t x) { return x == kPoisonByte; }) &&
          std::all_of(target.bytes() + read_at + read_length, target.bytes() + bytes,
                      [](uint8_t x) { return x == kPoisonByte; });
      EXPECT_TRUE(outside_clean) << "a download wrote outside its range";
    }
  }
  {
    SCOPED_TRACE("ranges in pinned memory");
    const auto ranges = RandomDisjointRanges(rng(), bytes, 4);
    std::vector<vyre_upload_range> upload;
    uint64_t large_total = 0;
    size_t nonempty = 0;
    for (const auto& [offset, length] : ranges) {
      // The same offsets in the pinned source as in the buffer.
      const std::vector<uint8_t> piece = RandomBytes(rng(), length);
      std::memcpy(source.bytes() + offset, piece.data(), length);
      std::memcpy(model.data() + offset, piece.data(), length);
      upload.push_back({offset, length, source.bytes() + offset});
      large_total += length;
      nonempty += length > 0 ? 1 : 0;
    }
    vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_buffer_upload_ranges(buffer.get(), upload.data(), upload.size()));
    Moved moved = Delta(before, Telemetry(context()));
    if (large_total > kSingleCopyLimit) {
      EXPECT_EQ(moved.h2d_ops, nonempty) << "one DMA per pinned range";
    }
    std::memset(target.bytes(), kPoisonByte, bytes);
    std::vector<vyre_download_range> download;
    for (const auto& [offset, length] : ranges) {
      download.push_back({offset, length, target.bytes() + offset});
    }
    before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_buffer_download_ranges(buffer.get(), download.data(), download.size()));
    moved = Delta(before, Telemetry(context()));
    if (large_total > kSingleCopyLimit) {
      EXPECT_EQ(moved.d2h_ops, nonempty) << "one DMA per pinned range";
    }
    for (const auto& [offset, length] : ranges) {
      EXPECT_TRUE(BytesEqual(target.bytes() + offset, model.data() + offset, length,
                             "pinned download range [" + std::to_string(offset) + ", +" +
                                 std::to_string(length) + ")"));
    }
  }
  {
    SCOPED_TRACE("small copies (single-copy path) from and into pinned memory");
    const uint64_t small = kSingleCopyLimit - 12;
    const std::vector<uint8_t> piece = RandomBytes(rng(), small);
    std::memcpy(source.bytes() + 100, piece.data(), small);
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 4096 + 3, source.bytes() + 100, small));
    std::memcpy(model.data() + 4096 + 3, piece.data(), small);
    std::memset(target.bytes(), kPoisonByte, small + 200);
    ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 4096 + 3, target.bytes() + 100, small));
    EXPECT_TRUE(BytesEqual(target.bytes() + 100, piece.data(), small, "small pinned"));
  }
  // The whole buffer against the model, into pageable memory.
  std::vector<uint8_t> got(bytes, kPoisonByte);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, got.data(), bytes));
  EXPECT_TRUE(BytesEqual(got.data(), model.data(), bytes, "whole buffer at the end"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, PinnedBufferTest,
                         ::testing::Values(HostKind::kAllocated, HostKind::kRegistered),
                         [](const ::testing::TestParamInfo<HostKind>& info) {
                           return std::string(HostKindName(info.param));
                         });

// --- Releasing pinned memory that a dispatch in flight uses ----------------------------

constexpr uint32_t kSpinMicroseconds = 300'000;
constexpr uint32_t kSpinThreads = 32;

class InFlightTest : public HostTransferTest {
 protected:
  void SetUp() override {
    HostTransferTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_spin",
                                  {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads,
                                  &spin_));
    ASSERT_TRUE(CreateAdd(context(), &add_));
    ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(kSpinThreads, 1), &spin_data_));
  }

  // Holds the context's stream for kSpinMicroseconds, so work enqueued after
  // it is still in flight when the test releases memory.
  ::testing::AssertionResult StartSpin(PendingHandle* pending) {
    const std::vector<vyre_dispatch_binding> bindings = {Resident(spin_data_.get())};
    vyre_dispatch_desc desc = DispatchDesc(bindings, spin_params_);
    desc.grid[0] = desc.grid[1] = desc.grid[2] = 1;
    return StatusIs(vyre_dispatch_async(spin_.get(), &desc, pending->out()), VYRE_STATUS_OK,
                    "vyre_dispatch_async (spin)");
  }

  ProgramHandle spin_, add_;
  BufferHandle spin_data_;
  const std::vector<uint32_t> spin_params_ = {kSpinMicroseconds, kSpinThreads};
};

TEST_F(InFlightTest, HostFreeWhileADispatchUsesTheMemoryIsDeferred) {
  const uint32_t n = static_cast<uint32_t>(kPinnedCount);
  PinnedBlock pa, pb, pout;
  ASSERT_TRUE(pa.Make(context(), HostKind::kAllocated, kPinnedBytes));
  ASSERT_TRUE(pb.Make(context(), HostKind::kAllocated, kPinnedBytes));
  const uint64_t live_with_inputs = Telemetry(context()).pinned_bytes_live;
  ASSERT_TRUE(pout.Make(context(), HostKind::kAllocated, kPinnedBytes));
  const uint64_t output_accounted = Telemetry(context()).pinned_bytes_live - live_with_inputs;
  EXPECT_GE(output_accounted, kPinnedBytes) << "vyre_host_alloc memory counts as pinned";
  FillRandomU32(rng(), pa.u32(), kPinnedCount);
  FillRandomU32(rng(), pb.u32(), kPinnedCount);
  // The reference, taken before the memory is given back.
  const std::vector<uint32_t> a(pa.u32(), pa.u32() + kPinnedCount);
  const std::vector<uint32_t> b(pb.u32(), pb.u32() + kPinnedCount);
  PoisonU32(pout.u32(), kPinnedCount);

  PendingHandle spin, pending;
  ASSERT_TRUE(StartSpin(&spin));
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(pa.u32(), kPinnedBytes), HostIn(pb.u32(), kPinnedBytes),
      HostOut(pout.u32(), kPinnedBytes)};
  const std::vector<uint32_t> params = {n};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch_async(add_.get(), &desc, pending.out()));

  // Free both inputs while their copies wait behind the spinning kernel.
  void* const freed_a = pa.bytes();
  const uint64_t live_before_free = Telemetry(context()).pinned_bytes_live;
  ASSERT_VYRE_OK(pa.ReleaseToLibrary());
  ASSERT_VYRE_OK(pb.ReleaseToLibrary());
  // On a GPU the add still waits behind the spin here. (A tool that
  // serialises launches, or the fake driver's synchronous streams, may have
  // finished it already; the accounting below holds either way.)
  const vyre_status polled = vyre_pending_poll(pending.get());
  EXPECT_TRUE(polled == VYRE_STATUS_NOT_READY || polled == VYRE_STATUS_OK)
      << vyre_status_name(polled) << ": " << DescribeLastError();
  if (polled == VYRE_STATUS_OK) {
    std::printf("[ note     ] the dispatch had completed before its inputs were freed\n");
  }
  EXPECT_EQ(Telemetry(context()).pinned_bytes_live, live_before_free)
      << "memory freed while a dispatch uses it must stay until the dispatch is done";
  // Freed means freed: a second free is refused.
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_free(freed_a));

  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SumsMatch(pout.u32(), a.data(), b.data(), kPinnedCount, "inputs freed in flight"));
  ASSERT_VYRE_OK(vyre_pending_release(pending.release()));
  ASSERT_VYRE_OK(vyre_pending_wait(spin.get(), VYRE_WAIT_FOREVER));
  EXPECT_EQ(Telemetry(context()).pinned_bytes_live, live_before_free - 2 * output_accounted)
      << "the freed inputs are released once the dispatch is done";

  // Freeing the output in flight: the dispatch still completes cleanly.
  PinnedBlock qa, qout;
  ASSERT_TRUE(qa.Make(context(), HostKind::kAllocated, kPinnedBytes));
  ASSERT_TRUE(qout.Make(context(), HostKind::kAllocated, kPinnedBytes));
  FillRandomU32(rng(), qa.u32(), kPinnedCount);
  ASSERT_TRUE(StartSpin(&spin));
  const std::vector<vyre_dispatch_binding> second = {
      HostIn(qa.u32(), kPinnedBytes), HostIn(qa.u32(), kPinnedBytes),
      HostOut(qout.u32(), kPinnedBytes)};
  const vyre_dispatch_desc second_desc = DispatchDesc(second, params);
  ASSERT_VYRE_OK(vyre_dispatch_async(add_.get(), &second_desc, pending.out()));
  const uint64_t live = Telemetry(context()).pinned_bytes_live;
  ASSERT_VYRE_OK(qa.ReleaseToLibrary());
  ASSERT_VYRE_OK(qout.ReleaseToLibrary());
  EXPECT_EQ(Telemetry(context()).pinned_bytes_live, live);
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending.release()));
  EXPECT_EQ(Telemetry(context()).pinned_bytes_live, live - 2 * output_accounted);
}

TEST_F(InFlightTest, HostUnregisterWhileADispatchUsesTheMemoryIsRefused) {
  const uint32_t n = static_cast<uint32_t>(kPinnedCount);
  for (const bool output : {false, true}) {
    SCOPED_TRACE(output ? "registered output" : "registered input");
    PinnedBlock registered;
    ASSERT_TRUE(registered.Make(context(), HostKind::kRegistered, kPinnedBytes));
    const std::vector<uint32_t> a = rng().NonZeroU32(kPinnedCount);
    std::vector<uint32_t> b = rng().NonZeroU32(kPinnedCount);
    std::vector<uint32_t> out(kPinnedCount, kPoisonU32);
    uint32_t* out_ptr = out.data();
    const uint32_t* b_ptr = b.data();
    if (output) {
      out_ptr = registered.u32();
      PoisonU32(out_ptr, kPinnedCount);
    } else {
      std::memcpy(registered.u32(), b.data(), kPinnedBytes);
      b_ptr = registered.u32();
    }
    PendingHandle spin, pending;
    ASSERT_TRUE(StartSpin(&spin));
    const std::vector<vyre_dispatch_binding> bindings = {
        HostIn(a.data(), kPinnedBytes), HostIn(b_ptr, kPinnedBytes),
        HostOut(out_ptr, kPinnedBytes)};
    const std::vector<uint32_t> params = {n};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_dispatch_async(add_.get(), &desc, pending.out()));

    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_host_unregister(registered.bytes()));
    EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:", "vyre_pending_wait"}));
    // Still refused after the device finished, until the dispatch is waited on.
    ASSERT_VYRE_OK(vyre_pending_wait(spin.get(), VYRE_WAIT_FOREVER));
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_host_unregister(registered.bytes()));

    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
    EXPECT_TRUE(SumsMatch(out_ptr, a.data(), b.data(), kPinnedCount, "registered in flight"));
    ASSERT_VYRE_OK(vyre_pending_release(pending.release()));

    // Still registered and still used in place: one DMA for it.
    PoisonU32(out_ptr, kPinnedCount);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_TRUE(RunDispatch(add_.get(), bindings, n, Mode::kSync));
    const Moved moved = Delta(before, Telemetry(context()));
    EXPECT_TRUE(SumsMatch(out_ptr, a.data(), b.data(), kPinnedCount, "after the refusal"));
    if (output) {
      EXPECT_EQ(moved.d2h_ops, 1u);
    } else {
      EXPECT_GE(moved.h2d_ops, 2u);
    }
    // Now it may go (the block's destructor unregisters and frees it).
  }
}

// Misuse of the pinned-memory API on a real driver: a status with a Fix,
// and the memory involved keeps working.
TEST_F(HostTransferTest, PinnedMemoryMisuseIsRefused) {
  void* pointer = nullptr;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_alloc(context(), 0, &pointer));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_alloc(context(), 4096, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_free(nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_unregister(nullptr));

  PinnedBlock allocated, registered;
  ASSERT_TRUE(allocated.Make(context(), HostKind::kAllocated, kPinnedBytes));
  ASSERT_TRUE(registered.Make(context(), HostKind::kRegistered, kPinnedBytes));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_free(allocated.bytes() + 4096))
      << "not the start";
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_unregister(allocated.bytes()))
      << "allocated, not registered";
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_free(registered.bytes()))
      << "registered, not allocated";
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_host_register(context(), registered.bytes() + 4096, 4096))
      << "overlaps a registered range";
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_host_register(context(), allocated.bytes(), 4096))
      << "overlaps vyre_host_alloc memory";
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:"}));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_register(context(), nullptr, 4096));
  std::vector<uint8_t> plain(8192);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_host_register(context(), plain.data(), 0));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_unregister(plain.data()))
      << "never registered";

  // Both still serve as pinned memory.
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kPinnedBytes, buffer.out()));
  const std::vector<uint8_t> data = RandomBytes(rng(), kPinnedBytes);
  std::memcpy(allocated.bytes(), data.data(), kPinnedBytes);
  std::memset(registered.bytes(), kPoisonByte, kPinnedBytes);
  const vyre_telemetry before = Telemetry(context());
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, allocated.bytes(), kPinnedBytes));
  ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, registered.bytes(), kPinnedBytes));
  const Moved moved = Delta(before, Telemetry(context()));
  EXPECT_TRUE(BytesEqual(registered.bytes(), data.data(), kPinnedBytes, "after misuse"));
  EXPECT_EQ(moved.h2d_ops, 1u);
  EXPECT_EQ(moved.d2h_ops, 1u);

  // Freed twice: the second is refused.
  void* twice = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(context(), 4096, &twice));
  ASSERT_VYRE_OK(vyre_host_free(twice));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_host_free(twice));
}

// Out-of-domain staging descriptors are refused; extreme valid ones work.
TEST_F(HostTransferTest, StagingDescriptorLimits) {
  struct Bad {
    uint64_t chunk_bytes;
    uint32_t chunk_count;
    uint32_t threads;
    const char* why;
  };
  const Bad bad[] = {
      {100000, 0, 0, "chunk not a multiple of 64 KiB"},
      {32 * kKiB, 0, 0, "chunk under 64 KiB"},
      {512 * kMiB, 0, 0, "chunk over 256 MiB"},
      {0, 1, 0, "one chunk"},
      {0, 65, 0, "65 chunks"},
      {0, 0, 65, "65 threads"},
      {256 * kMiB, 64, 0, "a 16 GiB ring"},
      {~uint64_t{0} - 65535, 0, 0, "an absurd chunk size"},
      {0, ~uint32_t{0}, ~uint32_t{0}, "absurd counts"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.why);
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    desc.staging_chunk_bytes = b.chunk_bytes;
    desc.staging_chunk_count = b.chunk_count;
    desc.staging_threads = b.threads;
    vyre_context ctx{};
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_context_create(&desc, &ctx));
    EXPECT_TRUE(MessageContains(LastErrorMessage(), {"staging", "Fix:"}));
    if (ctx.bits != 0) vyre_context_destroy(ctx);
  }

  struct Good {
    uint64_t chunk_bytes;
    uint32_t chunk_count;
    uint32_t threads;
  };
  const Good good[] = {{64 * kKiB, 64, 64}, {16 * kMiB, 2, 1}, {64 * kKiB, 2, 64}};
  for (const Good& g : good) {
    SCOPED_TRACE("chunk " + std::to_string(g.chunk_bytes) + " x " +
                 std::to_string(g.chunk_count) + ", " + std::to_string(g.threads) + " threads");
    ContextHandle ctx;
    ASSERT_TRUE(CreateContextWith(g.chunk_bytes, g.chunk_count, g.threads, &ctx));
    ProgramHandle add;
    ASSERT_TRUE(CreateAdd(ctx.get(), &add));
    const uint64_t bytes = 8 * kMiB + 4;
    const size_t n = bytes / 4;
    const std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n);
    std::vector<uint32_t> out(n, kPoisonU32);
    ASSERT_TRUE(RunDispatch(
        add.get(), {HostIn(a.data(), bytes), HostIn(b.data(), bytes), HostOut(out.data(), bytes)},
        static_cast<uint32_t>(n), Mode::kSync));
    EXPECT_TRUE(SumsMatch(out.data(), a.data(), b.data(), n, "extreme ring"));
    BufferHandle buffer;
    ASSERT_VYRE_OK(vyre_buffer_alloc(ctx.get(), bytes, buffer.out()));
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, a.data(), bytes));
    std::vector<uint32_t> back(n, kPoisonU32);
    ASSERT_VYRE_OK(vyre_buffer_download(buffer.get(), 0, back.data(), bytes));
    EXPECT_TRUE(AllElementsEqual(back, [&](size_t i) { return a[i]; }, "round trip"));
  }
}

// ---------------------------------------------------------------------------------------
// Threads and steady state
// ---------------------------------------------------------------------------------------

constexpr int kThreads = 4;
constexpr int kIterationsPerThread = 8;
constexpr uint64_t kThreadBufferBytes = 12 * kMiB + 8;

// The first failure any thread saw (threads keep going so none deadlocks).
class FailureLog {
 public:
  void Record(int thread, int iteration, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    if (first_.empty()) {
      first_ = "thread " + std::to_string(thread) + " iteration " + std::to_string(iteration) +
               ": " + what;
    }
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  std::string first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  mutable std::mutex mutex_;
  int count_ = 0;
  std::string first_;
};

// One thread's iteration: a host vector add of random size (mostly over
// 256 KiB, sync or async), then a random range uploaded into the thread's
// buffer and a random range downloaded. "" when every element is right.
std::string ThreadIteration(vyre_program add, vyre_buffer buffer, std::vector<uint8_t>* model,
                            RandomSource& rng) {
  const size_t n = rng.Below(4) == 0 ? 1 + rng.Below(kSingleCopyLimit / 4)
                                     : kSingleCopyLimit / 4 + rng.Below((6 * kMiB) / 4);
  const uint64_t bytes = n * 4;
  const std::vector<uint32_t> a = rng.NonZeroU32(n), b = rng.NonZeroU32(n);
  std::vector<uint32_t> a_in = a, b_in = b;
  std::vector<uint32_t> out(n, kPoisonU32);
  const Mode mode = rng.Below(2) == 0 ? Mode::kSync : Mode::kAsync;
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a_in.data(), bytes), HostIn(b_in.data(), bytes), HostOut(out.data(), bytes)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  if (mode == Mode::kSync) {
    if (vyre_dispatch(add, &desc, nullptr) != VYRE_STATUS_OK) {
      return "vyre_dispatch: " + DescribeLastError();
    }
  } else {
    vyre_pending pending{};
    if (vyre_dispatch_async(add, &desc, &pending) != VYRE_STATUS_OK) {
      return "vyre_dispatch_async: " + DescribeLastError();
    }
    std::fill(a_in.begin(), a_in.end(), 0u);  // copied before the call returned
    std::fill(b_in.begin(), b_in.end(), 0u);
    const vyre_status waited = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
    const std::string wait_error = waited == VYRE_STATUS_OK ? "" : DescribeLastError();
    vyre_pending_release(pending);
    if (waited != VYRE_STATUS_OK) return "vyre_pending_wait: " + wait_error;
  }
  ::testing::AssertionResult sums =
      SumsMatch(out.data(), a.data(), b.data(), n, std::string(ModeName(mode)) + " dispatch of " +
                                                       std::to_string(bytes) + " bytes");
  if (!sums) return sums.message();

  const uint64_t buffer_bytes = model->size();
  const uint64_t offset = rng.Below(buffer_bytes);
  const uint64_t length = RandomLength(rng, buffer_bytes - offset);
  const std::vector<uint8_t> piece = RandomBytes(rng, length);
  if (vyre_buffer_upload(buffer, offset, piece.data(), length) != VYRE_STATUS_OK) {
    return "vyre_buffer_upload: " + DescribeLastError();
  }
  std::memcpy(model->data() + offset, piece.data(), length);
  const uint64_t read_offset = rng.Below(buffer_bytes);
  const uint64_t read_length = RandomLength(rng, buffer_bytes - read_offset);
  std::vector<uint8_t> got(read_length, kPoisonByte);
  if (vyre_buffer_download(buffer, read_offset, got.data(), read_length) != VYRE_STATUS_OK) {
    return "vyre_buffer_download: " + DescribeLastError();
  }
  ::testing::AssertionResult same =
      BytesEqual(got.data(), model->data() + read_offset, read_length, "download");
  if (!same) return same.message();
  return "";
}

class ConcurrencyTest : public HostTransferTest, public ::testing::WithParamInterface<Ring> {};

TEST_P(ConcurrencyTest, FourThreadsMoveHostDataOnOneContext) {
  vyre_context ctx{};
  ASSERT_TRUE(ContextFor(GetParam(), &ctx));
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(ctx, &add));
  BufferHandle buffers[kThreads];
  std::vector<std::vector<uint8_t>> models(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    models[t] = RandomBytes(rng(), kThreadBufferBytes);
    ASSERT_VYRE_OK(vyre_buffer_alloc(ctx, kThreadBufferBytes, buffers[t].out()));
    ASSERT_VYRE_OK(vyre_buffer_upload(buffers[t].get(), 0, models[t].data(), kThreadBufferBytes));
  }
  const vyre_telemetry before = Telemetry(ctx);

  FailureLog failures;
  std::atomic<int> completed{0};
  const uint64_t base_seed = rng().seed();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomSource thread_rng(base_seed + 1 + static_cast<uint64_t>(t));
      for (int iteration = 0; iteration < kIterationsPerThread; ++iteration) {
        const std::string failure =
            ThreadIteration(add.get(), buffers[t].get(), &models[t], thread_rng);
        if (failure.empty()) {
          completed.fetch_add(1);
        } else {
          failures.Record(t, iteration, failure);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_EQ(completed.load(), kThreads * kIterationsPerThread);
  const vyre_telemetry after = Telemetry(ctx);
  EXPECT_EQ(after.dispatches - before.dispatches,
            static_cast<uint64_t>(kThreads * kIterationsPerThread));
  EXPECT_EQ(after.live_pendings, 0u);
  // Every buffer holds exactly its thread's model.
  for (int t = 0; t < kThreads; ++t) {
    std::vector<uint8_t> got(kThreadBufferBytes, kPoisonByte);
    ASSERT_VYRE_OK(vyre_buffer_download(buffers[t].get(), 0, got.data(), kThreadBufferBytes));
    EXPECT_TRUE(BytesEqual(got.data(), models[t].data(), kThreadBufferBytes,
                           "thread " + std::to_string(t) + "'s buffer"));
  }
}

INSTANTIATE_TEST_SUITE_P(Rings, ConcurrencyTest,
                         ::testing::Values(Ring::kDefault, Ring::kSmall),
                         [](const ::testing::TestParamInfo<Ring>& info) {
                           return std::string(ConfigOf(info.param).name);
                         });

// After the first of each kind, 50 large host dispatches (sync, async, from
// pinned memory) and 50 large upload/download round trips allocate no device
// or pinned memory: the ring, the pools and the parameter cache are reused.
TEST_F(HostTransferTest, SteadyStateLargeTransfersAllocateNothingNew) {
  constexpr int kRepetitions = 50;
  constexpr uint64_t kBytes = 16 * kMiB + 4;
  constexpr size_t kCount = kBytes / 4;
  ProgramHandle add;
  ASSERT_TRUE(CreateAdd(context(), &add));
  const std::vector<uint32_t> a = rng().NonZeroU32(kCount), b = rng().NonZeroU32(kCount);
  std::vector<uint32_t> out(kCount, kPoisonU32);
  PinnedBlock pa, pout;
  ASSERT_TRUE(pa.Make(context(), HostKind::kAllocated, kBytes));
  ASSERT_TRUE(pout.Make(context(), HostKind::kRegistered, kBytes));
  std::memcpy(pa.u32(), a.data(), kBytes);
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kBytes, buffer.out()));
  const std::vector<uint8_t> bytes = RandomBytes(rng(), kBytes);
  std::vector<uint8_t> back(kBytes);

  const uint32_t n = static_cast<uint32_t>(kCount);
  const std::vector<vyre_dispatch_binding> pageable = {
      HostIn(a.data(), kBytes), HostIn(b.data(), kBytes), HostOut(out.data(), kBytes)};
  const std::vector<vyre_dispatch_binding> pinned = {
      HostIn(pa.u32(), kBytes), HostIn(b.data(), kBytes), HostOut(pout.u32(), kBytes)};
  int failures = 0;
  int wrong = 0;
  auto one_of_each = [&] {
    PoisonU32(out.data(), kCount);
    if (!RunDispatch(add.get(), pageable, n, Mode::kSync)) ++failures;
    if (!SumsMatch(out.data(), a.data(), b.data(), kCount, "sync")) ++wrong;
    PoisonU32(out.data(), kCount);
    if (!RunDispatch(add.get(), pageable, n, Mode::kAsync)) ++failures;
    if (!SumsMatch(out.data(), a.data(), b.data(), kCount, "async")) ++wrong;
    PoisonU32(pout.u32(), kCount);
    if (!RunDispatch(add.get(), pinned, n, Mode::kSync)) ++failures;
    if (!SumsMatch(pout.u32(), a.data(), b.data(), kCount, "pinned")) ++wrong;
    std::fill(back.begin(), back.end(), kPoisonByte);
    if (vyre_buffer_upload(buffer.get(), 0, bytes.data(), kBytes) != VYRE_STATUS_OK ||
        vyre_buffer_download(buffer.get(), 0, back.data(), kBytes) != VYRE_STATUS_OK) {
      ++failures;
    }
    if (back != bytes) ++wrong;
  };
  one_of_each();
  ASSERT_EQ(failures, 0) << DescribeLastError();
  ASSERT_EQ(wrong, 0);

  const vyre_telemetry first = Telemetry(context());
  for (int i = 0; i < kRepetitions; ++i) one_of_each();
  const vyre_telemetry last = Telemetry(context());
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(wrong, 0) << "of " << kRepetitions << " x 4 checked results";
  EXPECT_EQ(last.dispatches - first.dispatches, uint64_t{3 * kRepetitions});
  EXPECT_EQ(last.device_bytes_live, first.device_bytes_live) << "device memory grew";
  EXPECT_EQ(last.pinned_bytes_live, first.pinned_bytes_live) << "pinned memory grew";
  EXPECT_EQ(last.transient_pool_misses, first.transient_pool_misses)
      << "the device pool missed after warm-up";
  EXPECT_EQ(last.pinned_pool_misses, first.pinned_pool_misses)
      << "the pinned pool missed after warm-up";
  EXPECT_EQ(last.live_pendings, 0u);
}

}  // namespace
}  // namespace vyre_test
