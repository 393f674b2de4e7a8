// Every bad input of docs/ENGINE_CONTRACT.md's status table against the entry
// points that take it, through the fake driver. Each assertion checks the
// exact status and that the message carries a Fix: sentence.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "api_handle_calls.h"
#include "c_callers.h"
#include "struct_size_util.h"

namespace vyre_test {
namespace {

using ErrorsTest = FakeDriverTest;

constexpr uint64_t kMax = UINT64_MAX;

// A host vector add over `n` elements whose arrays outlive the desc.
struct HostAdd {
  explicit HostAdd(size_t n)
      : a(RandomNonZeroU32(n, 1)), b(RandomNonZeroU32(n, 2)), out(n, kPoison) {
    spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                     HostOut(out.data(), ByteSize(out))};
    spec.param_words = {static_cast<uint32_t>(n)};
  }
  std::vector<uint32_t> a, b, out;
  DispatchSpec spec;
};

vyre_status Dispatch(vyre_program program, const DispatchSpec& spec) {
  vyre_dispatch_desc desc = spec.Desc();
  return vyre_dispatch(program, &desc, nullptr);
}

vyre_status CreateProgram(vyre_context context, ProgramSpec spec, vyre_program* out) {
  vyre_program_desc desc = spec.Desc();
  return vyre_program_create(context, &desc, out);
}

vyre_pending StartAsyncAdd(vyre_program program, HostAdd& add) {
  vyre_dispatch_desc desc = add.spec.Desc();
  vyre_pending pending{0};
  EXPECT_VYRE_OK(vyre_dispatch_async(program, &desc, &pending));
  return pending;
}

// A graph of a host vector add, and a sequence of one FILL step on `buffer`
// (the handle tables cover graphs and sequences too).
vyre_graph RecordAdd(vyre_program program) {
  HostAdd add(16);
  vyre_dispatch_desc desc = add.spec.Desc();
  vyre_graph graph{0};
  EXPECT_VYRE_OK(vyre_graph_record(program, &desc, &graph));
  return graph;
}

vyre_sequence FillSequence(vyre_context context, vyre_buffer buffer) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.buffer = buffer;
  step.bytes = 16;
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = &step;
  desc.step_count = 1;
  vyre_sequence sequence{0};
  EXPECT_VYRE_OK(vyre_sequence_create(context, &desc, &sequence));
  return sequence;
}

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

TEST_F(ErrorsTest, EveryHandleCallRejectsZeroForgedWrongTypeAndStaleHandles) {
  // Live objects of every type.
  vyre_buffer buffer = MakeBuffer(context_, 64);
  vyre_program program = MakeProgram(context_, AddSpec());
  HostAdd live_add(16);
  vyre_pending pending = StartAsyncAdd(program, live_add);
  vyre_graph graph = RecordAdd(program);
  vyre_sequence sequence = FillSequence(context_, buffer);
  const std::map<HandleKind, uint64_t> live = {{HandleKind::kContext, context_.bits},
                                               {HandleKind::kBuffer, buffer.bits},
                                               {HandleKind::kProgram, program.bits},
                                               {HandleKind::kPending, pending.bits},
                                               {HandleKind::kGraph, graph.bits},
                                               {HandleKind::kSequence, sequence.bits}};

  // Destroyed objects of every type.
  vyre_context dead_context = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(dead_context));
  vyre_buffer dead_buffer = MakeBuffer(context_, 64);
  ASSERT_VYRE_OK(vyre_buffer_free(dead_buffer));
  vyre_program dead_program = MakeProgram(context_, AddSpec());
  ASSERT_VYRE_OK(vyre_program_destroy(dead_program));
  HostAdd dead_add(16);
  vyre_pending dead_pending = StartAsyncAdd(program, dead_add);
  ASSERT_VYRE_OK(vyre_pending_release(dead_pending));
  vyre_graph dead_graph = RecordAdd(program);
  ASSERT_VYRE_OK(vyre_graph_destroy(dead_graph));
  vyre_sequence dead_sequence = FillSequence(context_, buffer);
  ASSERT_VYRE_OK(vyre_sequence_destroy(dead_sequence));
  const std::map<HandleKind, uint64_t> stale = {{HandleKind::kContext, dead_context.bits},
                                                {HandleKind::kBuffer, dead_buffer.bits},
                                                {HandleKind::kProgram, dead_program.bits},
                                                {HandleKind::kPending, dead_pending.bits},
                                                {HandleKind::kGraph, dead_graph.bits},
                                                {HandleKind::kSequence, dead_sequence.bits}};

  std::vector<HandleCall> calls = AllHandleCalls();
  calls.push_back(ResidentBindingCall(program));
  for (const HandleCall& call : calls) {
    SCOPED_TRACE(call.function);
    EXPECT_VYRE_ERROR(call.call(0), VYRE_STATUS_INVALID_HANDLE) << "handle 0";
    for (uint64_t bits : ForgedHandleBits()) {
      EXPECT_VYRE_ERROR(call.call(bits), VYRE_STATUS_INVALID_HANDLE)
          << "forged 0x" << std::hex << bits;
    }
    for (const auto& [kind, bits] : live) {
      if (kind == call.kind) continue;
      EXPECT_VYRE_ERROR(call.call(bits), VYRE_STATUS_INVALID_HANDLE)
          << "a live " << HandleKindName(kind) << " handle passed as a "
          << HandleKindName(call.kind);
    }
    EXPECT_VYRE_ERROR(call.call(stale.at(call.kind)), VYRE_STATUS_STALE_HANDLE)
        << "a destroyed " << HandleKindName(call.kind);
  }

  // None of that disturbed the live objects.
  std::vector<uint32_t> data = RandomNonZeroU32(16, 3), back(16, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), 64));
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), 64));
  EXPECT_TRUE(SameU32(back, data));
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameU32(live_add.out, CpuAdd(live_add.a, live_add.b)));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(ErrorsTest, DestroyingAContextMakesItsObjectsStale) {
  vyre_context other = MakeContext();
  vyre_buffer buffer = MakeBuffer(other, 64);
  vyre_program program = MakeProgram(other, AddSpec());
  HostAdd add(16);
  vyre_pending pending = StartAsyncAdd(program, add);
  vyre_graph graph = RecordAdd(program);
  vyre_sequence sequence = FillSequence(other, buffer);
  ASSERT_VYRE_OK(vyre_context_destroy(other));

  const std::map<HandleKind, uint64_t> dead = {{HandleKind::kContext, other.bits},
                                               {HandleKind::kBuffer, buffer.bits},
                                               {HandleKind::kProgram, program.bits},
                                               {HandleKind::kPending, pending.bits},
                                               {HandleKind::kGraph, graph.bits},
                                               {HandleKind::kSequence, sequence.bits}};
  for (const HandleCall& call : AllHandleCalls()) {
    EXPECT_VYRE_ERROR(call.call(dead.at(call.kind)), VYRE_STATUS_STALE_HANDLE)
        << call.function << " with a " << HandleKindName(call.kind)
        << " of a destroyed context";
  }
  // The fixture's context is unaffected.
  vyre_buffer mine = MakeBuffer(context_, 16);
  EXPECT_VYRE_OK(vyre_buffer_free(mine));
}

TEST_F(ErrorsTest, DoubleDestroyIsStale) {
  vyre_buffer buffer = MakeBuffer(context_, 16);
  ASSERT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_ERROR(vyre_buffer_free(buffer), VYRE_STATUS_STALE_HANDLE);

  vyre_program program = MakeProgram(context_, AddSpec());
  ASSERT_VYRE_OK(vyre_program_destroy(program));
  EXPECT_VYRE_ERROR(vyre_program_destroy(program), VYRE_STATUS_STALE_HANDLE);

  vyre_context context = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(context));
  EXPECT_VYRE_ERROR(vyre_context_destroy(context), VYRE_STATUS_STALE_HANDLE);
}

TEST_F(ErrorsTest, ReusedSlotsDoNotRevivePastHandles) {
  std::vector<uint64_t> freed;
  for (int i = 0; i < 8; ++i) {
    vyre_buffer buffer = MakeBuffer(context_, 16);
    freed.push_back(buffer.bits);
    ASSERT_VYRE_OK(vyre_buffer_free(buffer));
  }
  vyre_buffer current = MakeBuffer(context_, 16);
  for (uint64_t bits : freed) {
    EXPECT_NE(bits, current.bits) << "a new buffer reused a freed handle value";
    EXPECT_VYRE_ERROR(vyre_buffer_free(vyre_buffer{bits}), VYRE_STATUS_STALE_HANDLE);
  }
  EXPECT_VYRE_OK(vyre_buffer_free(current));
}

// ---------------------------------------------------------------------------
// NULL pointers
// ---------------------------------------------------------------------------

TEST_F(ErrorsTest, NullOutPointersAndDescriptors) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  vyre_program program = MakeProgram(context_, AddSpec());
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  ProgramSpec add_spec = AddSpec();
  vyre_program_desc program_desc = add_spec.Desc();
  HostAdd add(16);
  vyre_dispatch_desc dispatch_desc = add.spec.Desc();
  vyre_context context_out{0};
  vyre_program program_out{0};
  vyre_pending pending_out{0};
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;

  EXPECT_VYRE_ERROR(vyre_device_count(nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_context_create(nullptr, &context_out), kInvalid);
  EXPECT_VYRE_ERROR(vyre_context_create(&context_desc, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_context_device_info(context_, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_context_telemetry(context_, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_alloc(context_, 16, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_upload(buffer, 0, nullptr, 4), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_download(buffer, 0, nullptr, 4), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_upload_ranges(buffer, nullptr, 1), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_download_ranges(buffer, nullptr, 1), kInvalid);
  vyre_upload_range null_src{0, 4, nullptr};
  EXPECT_VYRE_ERROR(vyre_buffer_upload_ranges(buffer, &null_src, 1), kInvalid);
  vyre_download_range null_dst{0, 4, nullptr};
  EXPECT_VYRE_ERROR(vyre_buffer_download_ranges(buffer, &null_dst, 1), kInvalid);
  EXPECT_VYRE_ERROR(vyre_buffer_info_get(buffer, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_program_create(context_, nullptr, &program_out), kInvalid);
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &program_desc, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_dispatch(program, nullptr, nullptr), kInvalid);
  EXPECT_VYRE_ERROR(vyre_dispatch_async(program, nullptr, &pending_out), kInvalid);
  EXPECT_VYRE_ERROR(vyre_dispatch_async(program, &dispatch_desc, nullptr), kInvalid);

  vyre_pending pending = StartAsyncAdd(program, add);
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_ERROR(vyre_pending_timing(pending, nullptr), kInvalid);
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

// ---------------------------------------------------------------------------
// struct_size
// ---------------------------------------------------------------------------

TEST_F(ErrorsTest, ContextDescStructSize) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  // Version 1 ended before the staging fields; smaller is refused.
  for (uint32_t size :
       TooSmallSizes<vyre_context_desc>(offsetof(vyre_context_desc, staging_chunk_bytes))) {
    vyre_context_desc small = WithStructSize(desc, size);
    EXPECT_VYRE_ERROR(vyre_context_create(&small, &context), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << size;
  }
  LargerStruct<vyre_context_desc> nonzero_tail(desc, 24, 0x01);
  EXPECT_VYRE_ERROR(vyre_context_create(nonzero_tail.get(), &context),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  LargerStruct<vyre_context_desc> zero_tail(desc, 24, 0);
  ASSERT_VYRE_OK(vyre_context_create(zero_tail.get(), &context));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

TEST_F(ErrorsTest, ProgramDescStructSize) {
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  for (uint32_t size : TooSmallSizes<vyre_program_desc>()) {
    vyre_program_desc small = WithStructSize(desc, size);
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &small, &program),
                      VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << size;
  }
  LargerStruct<vyre_program_desc> nonzero_tail(desc, 8, 0x80);
  EXPECT_VYRE_ERROR(vyre_program_create(context_, nonzero_tail.get(), &program),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  LargerStruct<vyre_program_desc> zero_tail(desc, 8, 0);
  ASSERT_VYRE_OK(vyre_program_create(context_, zero_tail.get(), &program));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(ErrorsTest, BindingDeclStructSize) {
  for (size_t index : {size_t{0}, size_t{2}}) {
    for (uint32_t size : TooSmallSizes<vyre_binding_decl>()) {
      ProgramSpec spec = AddSpec();
      spec.bindings[index].struct_size = size;
      vyre_program program{0};
      EXPECT_VYRE_ERROR(CreateProgram(context_, spec, &program),
                        VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
          << "binding " << index << " struct_size " << size;
    }
  }
}

TEST_F(ErrorsTest, DispatchDescStructSize) {
  vyre_program program = MakeProgram(context_, AddSpec());
  HostAdd add(64);
  vyre_dispatch_desc desc = add.spec.Desc();
  vyre_pending pending{0};
  for (uint32_t size : TooSmallSizes<vyre_dispatch_desc>()) {
    vyre_dispatch_desc small = WithStructSize(desc, size);
    EXPECT_VYRE_ERROR(vyre_dispatch(program, &small, nullptr), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << size;
    EXPECT_VYRE_ERROR(vyre_dispatch_async(program, &small, &pending),
                      VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << size;
  }
  LargerStruct<vyre_dispatch_desc> nonzero_tail(desc, 16, 0x7F);
  EXPECT_VYRE_ERROR(vyre_dispatch(program, nonzero_tail.get(), nullptr),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_VYRE_ERROR(vyre_dispatch_async(program, nonzero_tail.get(), &pending),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  LargerStruct<vyre_dispatch_desc> zero_tail(desc, 16, 0);
  ASSERT_VYRE_OK(vyre_dispatch(program, zero_tail.get(), nullptr));
  EXPECT_TRUE(SameU32(add.out, CpuAdd(add.a, add.b)));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(ErrorsTest, DispatchBindingStructSize) {
  vyre_program program = MakeProgram(context_, AddSpec());
  for (size_t index : {size_t{0}, size_t{2}}) {
    for (uint32_t size : TooSmallSizes<vyre_dispatch_binding>()) {
      HostAdd add(16);
      add.spec.bindings[index].struct_size = size;
      EXPECT_VYRE_ERROR(Dispatch(program, add.spec), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
          << "binding " << index << " struct_size " << size;
    }
  }
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

// Output structs: too small is refused; a larger one (a newer header's) gets
// the known fields and its tail is left alone.
// `v1_size`: the struct's first published size (a later header appended to it).
template <typename T, typename Call>
void CheckOutputStructSizes(const T& init, Call call, const char* what,
                            size_t v1_size = sizeof(T)) {
  SCOPED_TRACE(what);
  for (uint32_t size : TooSmallSizes<T>(v1_size)) {
    T small = WithStructSize(init, size);
    EXPECT_VYRE_ERROR(call(&small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE) << size;
  }
  LargerStruct<T> larger(init, 40, 0);
  larger.FillTail(0xCD);
  EXPECT_VYRE_OK(call(larger.get()));
  EXPECT_TRUE(larger.TailIsAll(0xCD)) << "the library wrote past the struct it knows";
  EXPECT_EQ(larger.get()->struct_size, sizeof(T) + 40) << "the caller's struct_size was changed";
}

TEST_F(ErrorsTest, OutputStructSizes) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  vyre_program program = MakeProgram(context_, AddSpec());
  HostAdd add(16);
  vyre_pending pending = StartAsyncAdd(program, add);
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));

  CheckOutputStructSizes<vyre_device_info>(
      VYRE_DEVICE_INFO_INIT, [](vyre_device_info* out) { return vyre_device_info_get(0, out); },
      "vyre_device_info_get", offsetof(vyre_device_info, peer_access_mask));
  CheckOutputStructSizes<vyre_device_info>(
      VYRE_DEVICE_INFO_INIT,
      [&](vyre_device_info* out) { return vyre_context_device_info(context_, out); },
      "vyre_context_device_info", offsetof(vyre_device_info, peer_access_mask));
  CheckOutputStructSizes<vyre_telemetry>(
      VYRE_TELEMETRY_INIT,
      [&](vyre_telemetry* out) { return vyre_context_telemetry(context_, out); },
      "vyre_context_telemetry", offsetof(vyre_telemetry, live_pendings) + sizeof(uint64_t));
  CheckOutputStructSizes<vyre_buffer_info>(
      VYRE_BUFFER_INFO_INIT,
      [&](vyre_buffer_info* out) { return vyre_buffer_info_get(buffer, out); },
      "vyre_buffer_info_get");
  CheckOutputStructSizes<vyre_timing>(
      VYRE_TIMING_INIT, [&](vyre_timing* out) { return vyre_pending_timing(pending, out); },
      "vyre_pending_timing");
  CheckOutputStructSizes<vyre_timing>(
      VYRE_TIMING_INIT,
      [&](vyre_timing* out) {
        vyre_dispatch_desc desc = add.spec.Desc();
        return vyre_dispatch(program, &desc, out);
      },
      "vyre_dispatch out_timing");

  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

// ---------------------------------------------------------------------------
// Devices and contexts
// ---------------------------------------------------------------------------

TEST_F(ErrorsTest, DeviceOrdinalPastTheCountIsNoDevice) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_VYRE_ERROR(vyre_device_info_get(1, &info), VYRE_STATUS_NO_DEVICE);
  EXPECT_VYRE_ERROR(vyre_device_info_get(UINT32_MAX, &info), VYRE_STATUS_NO_DEVICE);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  for (uint32_t ordinal : {1u, 7u, UINT32_MAX}) {
    desc.device_ordinal = ordinal;
    EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DEVICE) << ordinal;
  }
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

TEST_F(ErrorsTest, ZeroByteAllocIsInvalid) {
  vyre_buffer buffer{0};
  EXPECT_VYRE_ERROR(vyre_buffer_alloc(context_, 0, &buffer), VYRE_STATUS_INVALID_ARGUMENT);
}

struct CopyCase {
  uint64_t offset;
  uint64_t bytes;
  vyre_status expected;
};

// Copies against a 64-byte buffer.
const std::vector<CopyCase>& CopyCases() {
  static const std::vector<CopyCase> cases = {
      {0, 64, VYRE_STATUS_OK},
      {60, 4, VYRE_STATUS_OK},
      {0, 0, VYRE_STATUS_OK},
      {64, 0, VYRE_STATUS_OK},  // zero bytes at the end is fine
      {61, 4, VYRE_STATUS_OUT_OF_RANGE},
      {0, 65, VYRE_STATUS_OUT_OF_RANGE},
      {65, 0, VYRE_STATUS_OUT_OF_RANGE},
      {64, 1, VYRE_STATUS_OUT_OF_RANGE},
      {kMax, 1, VYRE_STATUS_OUT_OF_RANGE},
      {8, kMax, VYRE_STATUS_OUT_OF_RANGE},  // offset + bytes overflows
      {kMax - 2, 8, VYRE_STATUS_OUT_OF_RANGE},
  };
  return cases;
}

::testing::AssertionResult ExpectStatus(vyre_status actual, vyre_status expected) {
  return expected == VYRE_STATUS_OK ? IsOk(actual) : ExpectError(actual, expected);
}

TEST_F(ErrorsTest, UploadAndDownloadRanges) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  std::vector<uint8_t> host(128, 0x11);
  for (const CopyCase& c : CopyCases()) {
    SCOPED_TRACE(::testing::Message() << "offset " << c.offset << " bytes " << c.bytes);
    EXPECT_TRUE(ExpectStatus(vyre_buffer_upload(buffer, c.offset, host.data(), c.bytes),
                             c.expected));
    EXPECT_TRUE(ExpectStatus(vyre_buffer_download(buffer, c.offset, host.data(), c.bytes),
                             c.expected));
    vyre_upload_range up{c.offset, c.bytes, host.data()};
    EXPECT_TRUE(ExpectStatus(vyre_buffer_upload_ranges(buffer, &up, 1), c.expected));
    vyre_download_range down{c.offset, c.bytes, host.data()};
    EXPECT_TRUE(ExpectStatus(vyre_buffer_download_ranges(buffer, &down, 1), c.expected));
  }
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(ErrorsTest, UploadRangesChecksEveryRangeBeforeCopying) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  std::vector<uint8_t> original = RandomNonZeroBytes(64, 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, original.data(), 64));

  std::vector<uint8_t> replacement = RandomNonZeroBytes(64, 5);
  std::vector<vyre_upload_range> ranges = {
      {0, 32, replacement.data()},   // valid
      {32, 16, replacement.data()},  // valid
      {56, 16, replacement.data()},  // past the end
  };
  EXPECT_VYRE_ERROR(vyre_buffer_upload_ranges(buffer, ranges.data(), ranges.size()),
                    VYRE_STATUS_OUT_OF_RANGE);
  std::vector<uint8_t> after(64, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, after.data(), 64));
  EXPECT_SAME_BYTES(after.data(), original.data(), 64);

  ranges[2] = {48, 16, nullptr};  // NULL source
  EXPECT_VYRE_ERROR(vyre_buffer_upload_ranges(buffer, ranges.data(), ranges.size()),
                    VYRE_STATUS_INVALID_ARGUMENT);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, after.data(), 64));
  EXPECT_SAME_BYTES(after.data(), original.data(), 64);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(ErrorsTest, DownloadRangesRejectsAnyBadRange) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  std::vector<uint8_t> host(64, 0);
  std::vector<vyre_download_range> ranges = {{0, 16, host.data()}, {60, 8, host.data() + 16}};
  EXPECT_VYRE_ERROR(vyre_buffer_download_ranges(buffer, ranges.data(), ranges.size()),
                    VYRE_STATUS_OUT_OF_RANGE);
  ranges[1] = {kMax, 2, host.data() + 16};
  EXPECT_VYRE_ERROR(vyre_buffer_download_ranges(buffer, ranges.data(), ranges.size()),
                    VYRE_STATUS_OUT_OF_RANGE);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------

void ExpectProgramError(vyre_context context, ProgramSpec spec, vyre_status expected,
                        const char* what) {
  vyre_program program{0};
  EXPECT_VYRE_ERROR(CreateProgram(context, spec, &program), expected) << what;
  EXPECT_EQ(program.bits, 0u) << what << ": a failed create handed out a handle";
}

TEST_F(ErrorsTest, ProgramDescInvalidArguments) {
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  {
    ProgramSpec spec = AddSpec();
    vyre_program_desc desc = spec.Desc();
    desc.code = nullptr;
    vyre_program program{0};
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), kInvalid) << "code NULL";
  }
  {
    ProgramSpec spec = AddSpec();
    vyre_program_desc desc = spec.Desc();
    desc.entry = nullptr;
    vyre_program program{0};
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), kInvalid) << "entry NULL";
  }
  {
    ProgramSpec spec = AddSpec();
    vyre_program_desc desc = spec.Desc();
    desc.bindings = nullptr;  // binding_count stays 3
    vyre_program program{0};
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), kInvalid)
        << "bindings NULL";
  }
  {
    ProgramSpec spec = SaxpySpec();
    vyre_program_desc desc = spec.Desc();
    desc.params = nullptr;  // param_count stays 4
    vyre_program program{0};
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), kInvalid) << "params NULL";
  }
  for (int kind : {0, 4, 0x7FFFFFFE}) {
    ProgramSpec spec = AddSpec();
    vyre_program_desc desc = spec.Desc();
    c_set_code_kind(&desc, kind);
    vyre_program program{0};
    EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), kInvalid)
        << "code kind " << kind;
  }
  {
    ProgramSpec spec = AddSpec();
    spec.bindings[1].element_size = 0;
    ExpectProgramError(context_, spec, kInvalid, "element_size 0");
  }
  for (int role : {0, 5, 99, 0x7FFFFFFE}) {
    ProgramSpec spec = AddSpec();
    c_set_binding_role(&spec.bindings[2], role);
    ExpectProgramError(context_, spec, kInvalid, "bad role");
  }
  {
    ProgramSpec spec = AddSpec();
    spec.workgroup[0] = 0;
    ExpectProgramError(context_, spec, kInvalid, "workgroup x 0");
  }
}

TEST_F(ErrorsTest, WorkgroupOverDeviceLimits) {
  const std::vector<std::array<uint32_t, 3>> too_big = {
      {1025, 1, 1}, {1, 1025, 1}, {1, 1, 65}, {32, 32, 2}, {UINT32_MAX, 1, 1}};
  for (const auto& workgroup : too_big) {
    ProgramSpec spec = AddSpec();
    std::copy(workgroup.begin(), workgroup.end(), spec.workgroup);
    ExpectProgramError(context_, spec, VYRE_STATUS_LIMIT_EXCEEDED, "workgroup too big");
  }
  // The limits themselves are allowed; y and z of 0 mean 1.
  for (const std::array<uint32_t, 3>& workgroup :
       {std::array<uint32_t, 3>{1024, 1, 1}, std::array<uint32_t, 3>{1, 1024, 1},
        std::array<uint32_t, 3>{16, 1, 64}, std::array<uint32_t, 3>{1024, 0, 0}}) {
    ProgramSpec spec = AddSpec();
    std::copy(workgroup.begin(), workgroup.end(), spec.workgroup);
    vyre_program program{0};
    EXPECT_VYRE_OK(CreateProgram(context_, spec, &program))
        << workgroup[0] << "x" << workgroup[1] << "x" << workgroup[2];
    if (program.bits != 0) {
      EXPECT_VYRE_OK(vyre_program_destroy(program));
    }
  }
}

TEST_F(ErrorsTest, InvalidPtxCarriesTheJitLog) {
  ProgramSpec spec = AddSpec();
  spec.code = "this is not PTX at all";
  vyre_program program{0};
  EXPECT_VYRE_ERROR(CreateProgram(context_, spec, &program), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_NE(LastErrorMessage().find("fake ptxas: no .entry found"), std::string::npos)
      << "the JIT error log is missing from: " << LastErrorMessage();
}

TEST_F(ErrorsTest, MissingEntryIsEntryNotFound) {
  ProgramSpec spec = AddSpec();
  spec.entry = "vyre_no_such_kernel";
  vyre_program program{0};
  EXPECT_VYRE_ERROR(CreateProgram(context_, spec, &program), VYRE_STATUS_ENTRY_NOT_FOUND);
  EXPECT_NE(LastErrorMessage().find("vyre_no_such_kernel"), std::string::npos)
      << "the message should name the entry: " << LastErrorMessage();
}

TEST_F(ErrorsTest, CodeSizeLimitsThePtxText) {
  // With code_size set, text after it is not part of the module.
  ProgramSpec spec = AddSpec();
  std::string ptx = vyre_test_kernels_ptx;
  spec.code = std::string(".version 8.0\n.target sm_75\n") + "// no entries here\n" + ptx;
  vyre_program_desc desc = spec.Desc();
  desc.code_size = std::string(".version 8.0\n.target sm_75\n// no entries here\n").size();
  vyre_program program{0};
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), VYRE_STATUS_COMPILE_FAILED);
}

// Checks that may be made at program creation or at dispatch: either way the
// status must be `expected`.
void ExpectCreateOrDispatchError(vyre_context context, ProgramSpec program_spec,
                                 const DispatchSpec& dispatch_spec, vyre_status expected,
                                 const char* what) {
  SCOPED_TRACE(what);
  vyre_program program{0};
  vyre_status created = CreateProgram(context, program_spec, &program);
  if (created != VYRE_STATUS_OK) {
    EXPECT_VYRE_ERROR(created, expected) << "at vyre_program_create";
    return;
  }
  EXPECT_VYRE_ERROR(Dispatch(program, dispatch_spec), expected) << "at vyre_dispatch";
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

struct Saxpy {
  explicit Saxpy(size_t n) : x(RandomNonZeroF32(n, 6)), y(RandomNonZeroF32(n, 7)) {
    float a = 2.5f;
    uint32_t a_bits;
    std::memcpy(&a_bits, &a, 4);
    spec.bindings = {HostIn(x.data(), ByteSize(x)), HostInOut(y.data(), ByteSize(y))};
    spec.scalars = {a_bits, n};
  }
  std::vector<float> x, y;
  DispatchSpec spec;
};

TEST_F(ErrorsTest, ExplicitParameterListErrors) {
  Saxpy saxpy(64);
  {
    ProgramSpec spec = SaxpySpec();
    spec.params[2].index = 2;  // only bindings 0 and 1 exist
    ExpectCreateOrDispatchError(context_, spec, saxpy.spec, VYRE_STATUS_INVALID_ARGUMENT,
                                "binding param index out of range");
  }
  {
    ProgramSpec spec = SaxpySpec();
    c_set_param_kind(&spec.params[1], 0);
    ExpectCreateOrDispatchError(context_, spec, saxpy.spec, VYRE_STATUS_INVALID_ARGUMENT,
                                "param kind 0");
  }
  {
    ProgramSpec spec = SaxpySpec();
    c_set_param_kind(&spec.params[1], 77);
    ExpectCreateOrDispatchError(context_, spec, saxpy.spec, VYRE_STATUS_INVALID_ARGUMENT,
                                "param kind 77");
  }

  vyre_program program = MakeProgram(context_, SaxpySpec());
  {
    Saxpy short_scalars(64);
    short_scalars.spec.scalars.resize(1);  // SCALAR64 reads slot 1
    EXPECT_VYRE_ERROR(Dispatch(program, short_scalars.spec), VYRE_STATUS_INVALID_ARGUMENT);
  }
  {
    Saxpy no_scalars(64);
    no_scalars.spec.scalars.clear();
    EXPECT_VYRE_ERROR(Dispatch(program, no_scalars.spec), VYRE_STATUS_INVALID_ARGUMENT);
  }
  {
    Saxpy null_scalars(64);
    vyre_dispatch_desc desc = null_scalars.spec.Desc();
    desc.scalars = nullptr;  // scalar_count stays 2
    EXPECT_VYRE_ERROR(vyre_dispatch(program, &desc, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  }
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(ErrorsTest, SharedMemoryOverTheDeviceLimit) {
  ProgramSpec spec = AddSpec();
  spec.shared_memory_bytes = 48 * 1024 + 1;
  HostAdd add(16);
  ExpectCreateOrDispatchError(context_, spec, add.spec, VYRE_STATUS_LIMIT_EXCEEDED,
                              "program shared memory 48 KiB + 1");
  ProgramSpec with_shared_binding = AddSpec();
  vyre_binding_decl shared = Decl(VYRE_ROLE_SHARED, 4, "scratch");
  shared.element_count = 16 * 1024;  // 64 KiB
  with_shared_binding.bindings.push_back(shared);
  HostAdd add2(16);
  add2.spec.bindings.push_back(VYRE_DISPATCH_BINDING_INIT);  // ignored entry for SHARED
  ExpectCreateOrDispatchError(context_, with_shared_binding, add2.spec,
                              VYRE_STATUS_LIMIT_EXCEEDED, "SHARED binding of 64 KiB");
}

// ---------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------

class DispatchErrorsTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    if (HasFatalFailure()) return;
    add_ = MakeProgram(context_, AddSpec());
  }
  void TearDown() override {
    if (add_.bits != 0) {
      EXPECT_VYRE_OK(vyre_program_destroy(add_));
    }
    FakeDriverTest::TearDown();
  }
  vyre_status DispatchAdd(const DispatchSpec& spec) { return Dispatch(add_, spec); }

  vyre_program add_{0};
};

TEST_F(DispatchErrorsTest, BindingCountMustMatchTheDeclaration) {
  for (size_t count : {size_t{0}, size_t{2}, size_t{4}}) {
    HostAdd add(16);
    add.spec.bindings.resize(count, HostIn(add.a.data(), 64));
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), VYRE_STATUS_INVALID_ARGUMENT) << count;
  }
  HostAdd add(16);
  vyre_dispatch_desc desc = add.spec.Desc();
  desc.bindings = nullptr;
  EXPECT_VYRE_ERROR(vyre_dispatch(add_, &desc, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
}

TEST_F(DispatchErrorsTest, HostBindingErrors) {
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  for (uint64_t bytes : {uint64_t{0}, uint64_t{6}, uint64_t{63}}) {
    HostAdd add(16);
    add.spec.bindings[0].host_bytes = bytes;
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), kInvalid) << "host_bytes " << bytes;
  }
  {
    HostAdd add(16);
    add.spec.bindings[1].host_input = nullptr;
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), kInvalid) << "input with host_input NULL";
  }
  {
    HostAdd add(16);
    add.spec.bindings[2].host_output = nullptr;
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), kInvalid) << "output with host_output NULL";
  }
  for (int source : {0, 3, 0x7FFFFFFE}) {
    HostAdd add(16);
    c_set_binding_source(&add.spec.bindings[0], source);
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), kInvalid) << "source " << source;
  }
  {
    HostAdd add(16);
    vyre_dispatch_desc desc = add.spec.Desc();
    desc.fixpoint_iterations = 0;
    EXPECT_VYRE_ERROR(vyre_dispatch(add_, &desc, nullptr), kInvalid) << "fixpoint 0";
  }
  {
    HostAdd add(16);
    vyre_dispatch_desc desc = add.spec.Desc();
    desc.param_words = nullptr;  // param_word_count stays 1
    EXPECT_VYRE_ERROR(vyre_dispatch(add_, &desc, nullptr), kInvalid) << "param_words NULL";
  }
}

TEST_F(DispatchErrorsTest, DeclaredElementCountMustMatch) {
  ProgramSpec spec = AddSpec();
  spec.bindings[0].element_count = 16;
  vyre_program program = MakeProgram(context_, spec);
  HostAdd add(8);  // 32 bytes where 64 are declared
  EXPECT_VYRE_ERROR(Dispatch(program, add.spec), VYRE_STATUS_INVALID_ARGUMENT);
  HostAdd exact(16);
  EXPECT_VYRE_OK(Dispatch(program, exact.spec));
  EXPECT_TRUE(SameU32(exact.out, CpuAdd(exact.a, exact.b)));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(DispatchErrorsTest, OutputRangeOutsideTheBoundLength) {
  struct Case {
    uint64_t offset, length;
  };
  for (Case c : {Case{60, 8}, Case{64, 4}, Case{0, 68}, Case{kMax - 2, 8}, Case{8, kMax}}) {
    ProgramSpec spec = AddSpec();
    spec.bindings[2].output_offset = c.offset;
    spec.bindings[2].output_length = c.length;
    HostAdd add(16);
    ExpectCreateOrDispatchError(context_, spec, add.spec, VYRE_STATUS_OUT_OF_RANGE,
                                "output range outside 64 bound bytes");
    EXPECT_TRUE(SameU32(add.out, std::vector<uint32_t>(16, kPoison)))
        << "a refused dispatch wrote its output";
  }
}

TEST_F(DispatchErrorsTest, ResidentBindingErrors) {
  vyre_buffer a = MakeBuffer(context_, 64);
  struct Case {
    uint64_t offset, length;
    vyre_status expected;
    const char* what;
  };
  const std::vector<Case> cases = {
      {64, 0, VYRE_STATUS_INVALID_ARGUMENT, "offset at the end: zero length"},
      {68, 0, VYRE_STATUS_OUT_OF_RANGE, "offset past the end"},
      {8, 64, VYRE_STATUS_OUT_OF_RANGE, "range past the end"},
      {0, 68, VYRE_STATUS_OUT_OF_RANGE, "length past the end"},
      {kMax - 3, 8, VYRE_STATUS_OUT_OF_RANGE, "offset + length overflows"},
      {4, kMax - 3, VYRE_STATUS_OUT_OF_RANGE, "huge length"},
      {0, 6, VYRE_STATUS_INVALID_ARGUMENT, "length not a multiple of element_size"},
      {2, 8, VYRE_STATUS_INVALID_ARGUMENT, "offset not at an element boundary"},
  };
  for (const Case& c : cases) {
    HostAdd add(16);
    add.spec.bindings[0] = Resident(a, c.offset, c.length);
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), c.expected) << c.what;
  }
  EXPECT_VYRE_OK(vyre_buffer_free(a));
}

TEST_F(DispatchErrorsTest, ResidentBufferFromAnotherContext) {
  vyre_context other = MakeContext();
  vyre_buffer foreign = MakeBuffer(other, 64);
  HostAdd add(16);
  add.spec.bindings[1] = Resident(foreign);
  EXPECT_VYRE_ERROR(DispatchAdd(add.spec), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_OK(vyre_context_destroy(other));
}

TEST_F(DispatchErrorsTest, LaunchShapeOverDeviceLimits) {
  struct Case {
    std::array<uint32_t, 3> grid, block;
    uint32_t shared;
    const char* what;
  };
  const std::vector<Case> cases = {
      {{0, 0, 0}, {2048, 1, 1}, 0, "block x 2048"},
      {{0, 0, 0}, {1, 1, 128}, 0, "block z 128"},
      {{0, 0, 0}, {64, 32, 1}, 0, "2048 threads per block"},
      {{1, 65536, 1}, {1, 1, 1}, 0, "grid y 65536"},
      {{1, 1, 65536}, {1, 1, 1}, 0, "grid z 65536"},
      {{0, 0, 0}, {0, 0, 0}, 48 * 1024 + 1, "dynamic shared memory 48 KiB + 1"},
  };
  for (const Case& c : cases) {
    HostAdd add(16);
    std::copy(c.grid.begin(), c.grid.end(), add.spec.grid);
    std::copy(c.block.begin(), c.block.end(), add.spec.block);
    add.spec.shared_memory_bytes = c.shared;
    EXPECT_VYRE_ERROR(DispatchAdd(add.spec), VYRE_STATUS_LIMIT_EXCEEDED) << c.what;
  }
}

TEST_F(DispatchErrorsTest, CooperativeGridLargerThanCoResidentBlocks) {
  // The fake: 2048 / 1024 = 2 blocks per SM, 132 SMs -> 264 co-resident blocks.
  HostAdd too_big(16);
  too_big.spec.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  too_big.spec.grid[0] = 265;
  too_big.spec.block[0] = 1024;
  EXPECT_VYRE_ERROR(DispatchAdd(too_big.spec), VYRE_STATUS_LIMIT_EXCEEDED);
  uint64_t cooperative_before = FakeCuda::Stats().cooperative_launches;

  HostAdd fits(16);
  fits.spec.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  fits.spec.grid[0] = 264;
  fits.spec.block[0] = 1024;
  EXPECT_VYRE_OK(DispatchAdd(fits.spec));
  EXPECT_TRUE(SameU32(fits.out, CpuAdd(fits.a, fits.b)));
  EXPECT_EQ(FakeCuda::Stats().cooperative_launches, cooperative_before + 1)
      << "the cooperative flag did not use cuLaunchCooperativeKernel";
}

// ---------------------------------------------------------------------------
// Pending dispatches
// ---------------------------------------------------------------------------

TEST_F(DispatchErrorsTest, PendingStateErrors) {
  HostAdd add(16);
  vyre_pending pending = StartAsyncAdd(add_, add);
  vyre_timing timing = VYRE_TIMING_INIT;
  EXPECT_VYRE_ERROR(vyre_pending_timing(pending, &timing), VYRE_STATUS_INVALID_STATE)
      << "timing before wait";
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, VYRE_WAIT_FOREVER), VYRE_STATUS_INVALID_STATE)
      << "second wait";
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 0), VYRE_STATUS_INVALID_STATE)
      << "third wait, zero timeout";
  EXPECT_VYRE_OK(vyre_pending_timing(pending, &timing));
  EXPECT_VYRE_OK(vyre_pending_poll(pending)) << "a waited dispatch has completed";
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_ERROR(vyre_pending_release(pending), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 0), VYRE_STATUS_STALE_HANDLE);
}

TEST_F(DispatchErrorsTest, FailedDispatchLeavesNoPendingBehind) {
  HostAdd add(16);
  add.spec.bindings[0].host_bytes = 6;
  vyre_dispatch_desc desc = add.spec.Desc();
  vyre_pending pending{0};
  EXPECT_VYRE_ERROR(vyre_dispatch_async(add_, &desc, &pending), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(pending.bits, 0u);
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
}

// ---------------------------------------------------------------------------
// Negative enum values from a C caller (own ctest entry, see c_callers.c)
// ---------------------------------------------------------------------------

using CEnumErrorsTest = FakeDriverTest;

TEST_F(CEnumErrorsTest, NegativeCodeKind) {
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  c_set_code_kind(&desc, -1);
  vyre_program program{0};
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program),
                    VYRE_STATUS_INVALID_ARGUMENT);
}

TEST_F(CEnumErrorsTest, NegativeBindingRole) {
  ProgramSpec spec = AddSpec();
  c_set_binding_role(&spec.bindings[2], -1);
  ExpectProgramError(context_, spec, VYRE_STATUS_INVALID_ARGUMENT, "role -1");
}

TEST_F(CEnumErrorsTest, NegativeParamKind) {
  ProgramSpec spec = SaxpySpec();
  c_set_param_kind(&spec.params[1], -1);
  Saxpy saxpy(64);
  ExpectCreateOrDispatchError(context_, spec, saxpy.spec, VYRE_STATUS_INVALID_ARGUMENT,
                              "param kind -1");
}

TEST_F(CEnumErrorsTest, NegativeBindingSource) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd add_data(16);
  c_set_binding_source(&add_data.spec.bindings[0], -1);
  EXPECT_VYRE_ERROR(Dispatch(add, add_data.spec), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

}  // namespace
}  // namespace vyre_test
